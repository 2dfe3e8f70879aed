import Foundation
import Synchronization

/// Which background sessions the app was woken for (`handleEventsForBackgroundURLSession`) before
/// a session with that identifier was made, and the live sessions by identifier, so that a wake
/// reaches a session made before or after it.
package enum BackgroundSessionEvents {
  /// Weak references to live sessions, and the identifiers woken while no session was live.
  private struct Registry: Sendable {
    var sessions: [String: WeakSession] = [:]
    var woken: Set<String> = []
  }
  /// `@unchecked Sendable`: a weak reference, read and written only inside `registry`'s lock.
  private struct WeakSession: @unchecked Sendable { weak var session: URLSession? }
  private static let registry = Mutex(Registry())

  /// The app was woken for session `identifier`'s events: the live session takes the wake (in the
  /// order of its events), or the next one made with that identifier.
  package static func wake(_ identifier: String) {
    let live = registry.withLock { registry -> URLSession? in
      guard let live = registry.sessions[identifier]?.session else {
        registry.woken.insert(identifier)
        return nil
      }
      return live
    }
    live?.wokenForEvents()
  }

  /// Records a live session; true when a wake for its identifier waited for it (it takes it).
  static func register(_ session: URLSession) -> Bool {
    registry.withLock { registry in
      registry.sessions[session.identifier] = WeakSession(session: session)
      return registry.woken.remove(session.identifier) != nil
    }
  }

  /// Forgets an invalidated session; a wake it had not finished waits for its successor.
  static func unregister(_ session: URLSession, woken: Bool) {
    registry.withLock { registry in
      if registry.sessions[session.identifier]?.session === session { registry.sessions[session.identifier] = nil }
      if woken { registry.woken.insert(session.identifier) }
    }
  }
}
