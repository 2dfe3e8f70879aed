import Foundation
import ProtFSApp
import Synchronization

extension UIApplication {
  /// The session service woke or launched the app for session `identifier`'s events: the session
  /// (made before or after this) calls `urlSessionDidFinishEvents` once they are delivered, and the
  /// delegate's completion handler tells the supervisor `events-handled` (once).
  func handleEvents(forBackgroundURLSession identifier: String) {
    let socket = socketName
    let once = Mutex(false)
    let completion: @Sendable () -> Void = {
      guard
        once.withLock({ done in
          defer { done = true }
          return !done
        })
      else { return }
      _ = UIApplication.send(.eventsHandled(session: identifier), to: socket)
    }
    if let delegate {
      delegate.application(self, handleEventsForBackgroundURLSession: identifier, completionHandler: completion)
    } else {
      completion()
    }
    // Only now, as on iOS: the app hears of the events before `urlSessionDidFinishEvents`, which a
    // session whose deliveries are all done would otherwise call at once.
    BackgroundSessionEvents.wake(identifier)
  }
}
