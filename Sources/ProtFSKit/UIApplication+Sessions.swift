import Foundation
import ProtFSApp
import Synchronization

extension UIApplication {
  /// The event line's name for a background session's waiting events.
  static let sessionEventsName = "handleEventsForBackgroundURLSession"
  /// The supervisor's request kind the completion handler sends (`events-handled`).
  nonisolated static let eventsHandledKind = AppRequest.Kind(rawValue: "events-handled")

  /// The session service woke or launched the app for session `identifier`'s events: the session
  /// (made before or after this) calls `urlSessionDidFinishEvents` once they are delivered, and the
  /// delegate's completion handler tells the supervisor `events-handled` (once).
  func handleEvents(forBackgroundURLSession identifier: String) {
    BackgroundSessionEvents.wake(identifier)
    let socket = socketName
    let once = Mutex(false)
    let completion: @Sendable () -> Void = {
      guard
        once.withLock({ done in
          defer { done = true }
          return !done
        })
      else { return }
      guard let kind = UIApplication.eventsHandledKind else {
        FileHandle.standardError.write(Data("UIApplication: this supervisor has no events-handled request.\n".utf8))
        return
      }
      _ = UIApplication.send(AppRequest(kind, identifier), to: socket)
    }
    if let delegate {
      delegate.application(self, handleEventsForBackgroundURLSession: identifier, completionHandler: completion)
    } else {
      completion()
    }
  }
}
