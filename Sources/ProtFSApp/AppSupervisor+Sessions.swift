import Foundation
import ProtFS
import ProtFSSystem

/// Background sessions' events (docs/semantics.md §9): the system posts
/// `handleEventsForBackgroundURLSession` and waits for the app's completion handler.
extension AppSupervisor {
  /// Posts session `session`'s events to the app. In the foreground it only gets the event; in the
  /// background, or suspended (then it is resumed), it gets the background time to answer, as for a
  /// fetch: no suspension meanwhile, and a kill with a crash report when no answer comes in time.
  /// On the queue.
  func postSessionEvents(_ session: String) -> AppReply {
    guard !session.isEmpty else { return .refused("Give the identifier of the session whose events wait.") }
    postedSessions.insert(session)
    if record.state != .active {
      if record.state == .suspended {
        processes.resume()
        record.state = .background
        record.backgroundSince = Date()
        backgroundStart = .now()
        warned = []
      }
      if sessionWaits[session] == nil {
        sessionToken += 1
        let token = sessionToken
        sessionWaits[session] = token
        let budget = timings.backgroundTime
        queue.asyncAfter(deadline: .now() + budget) { [self] in
          guard sessionWaits[session] == token else { return }
          killApp(
            "the app did not call the completion handler of handleEventsForBackgroundURLSession for session '\(session)' within \(Self.seconds(budget))"
          )
        }
      }
    }
    send(.handleEventsForBackgroundURLSession, session: session)
    reschedule()
    return .ok()
  }

  /// The app answered session `session`'s events: its wait ends (suspension follows as after a
  /// fetch). Refused for a session whose events were not posted. On the queue; the caller then
  /// runs `onEventsHandled`.
  func endSessionEvents(_ session: String) -> AppReply {
    guard postedSessions.remove(session) != nil else {
      return .refused(
        "No handleEventsForBackgroundURLSession for the session '\(session)' waits for an answer from the app \(bundleID)."
      )
    }
    sessionWaits[session] = nil
    reschedule()
    return .ok()
  }

  /// Runs a hook: its error becomes the reply's.
  static func hook(_ body: () throws(ProtFSError) -> Void) -> AppReply {
    do {
      try body()
      return .ok()
    } catch {
      return .refused(error.message)
    }
  }
}
