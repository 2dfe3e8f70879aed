import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

/// One request to the session service, with what it needs: each kind carries its own typed values,
/// so that no request can carry another kind's (docs/semantics.md §9). On the wire it is a JSON line
/// (`SessionServiceRequest+Coding.swift`).
package enum SessionServiceRequest: Sendable, Equatable {
  /// Is the service there? (the reply carries its pid)
  case ping
  /// Opens (registers) the session `configuration` as a service session; root may name the
  /// directory its placed (not handed-over) tasks go to.
  case openSession(SessionConfiguration, destinationDirectory: String? = nil)
  /// Adopts the session's tasks recorded in the store by another process (`download --detach`)
  /// and resumes `resuming`; `destinationDirectory` is where its placed tasks go.
  case adopt(SessionConfiguration, destinationDirectory: String?, resuming: [Int64])
  /// Creates a handed-over download task for `request` (or `resumeData`) in `session`.
  case createDownloadTask(session: String, SessionRequest, resumeData: Data?)
  /// Creates an upload task in `session` sending the file at `path` (as the app names it) with
  /// `request`'s method and headers.
  case createUploadTask(session: String, SessionRequest, path: String)
  /// Resumes task `task`; one not yet begun begins no earlier than `beginsAt`, in seconds since
  /// 1970 (`earliestBeginDate`).
  case resume(session: String, task: Int64, beginsAt: Double? = nil)
  /// Suspends task `task`.
  case suspend(session: String, task: Int64)
  /// Cancels task `task`, `producingResumeData` or not.
  case cancel(session: String, task: Int64, producingResumeData: Bool = false)
  /// Sets task `task`'s description (nil: none).
  case setDescription(session: String, task: Int64, text: String?)
  /// The session's tasks not yet completed to the app.
  case tasks(session: String)
  /// Every task of the peer's app's sessions (root: of `bundleID`'s, or of every app), or of
  /// `session` only, as the task store keeps them (`protfs tasks` inside an app).
  case appTasks(session: String?, bundleID: String?)
  /// Removes the finished tasks of the peer's app's sessions (root: of `bundleID`'s, or of every
  /// app), or of `session` only, that have not changed for `olderThan` seconds (every finished
  /// one when nil): `protfs tasks prune`.
  case prune(session: String?, bundleID: String?, olderThan: Double?)
  /// Turns the connection into a stream of `SessionEvent` lines.
  case subscribe(session: String)
  /// The app is done with session `session` (`invalidateAndCancel`, `finishTasksAndInvalidate`):
  /// with `cancelling`, its unfinished tasks are cancelled; once none is unfinished, the service
  /// forgets the session (it stops running it and its records leave the store), so that its
  /// identifier names a new session and it no longer counts among the app's.
  case invalidate(session: String, cancelling: Bool)
  /// The app is done with task `task`'s completion; with `fileOnly`, only with its finished file
  /// (`didFinishDownloadingTo` returned).
  case acknowledge(session: String, task: Int64, fileOnly: Bool = false)
  /// The app handled session `session`'s events (`protfs app events-handled`).
  case eventsHandled(session: String)
  /// Sends `queuedEventsDelivered` to session `session`'s subscriber once every delivery the
  /// service holds for it is written there: an app woken from suspension for its events asks,
  /// so that `urlSessionDidFinishEvents` follows the calls that were waiting.
  case markDelivered(session: String)
  /// The user force-quit app `bundleID`.
  case forceQuit(bundleID: String)
  /// Moves finished downloads waiting for unlock into place now.
  case wake
  /// Answers once every task of `tasks` is completed, failed or waiting for unlock (`protfs tasks
  /// wait`); refused for a task that is unfinished and not run by the service.
  case wait(tasks: [Int64])
  /// Ends the service.
  case stop

  /// What a request asks, without its values: its `kind` on the wire.
  package enum Kind: String, Sendable, Codable, CaseIterable {
    case ping, openSession, adopt, createDownloadTask, createUploadTask, resume, suspend, cancel, setDescription
    case tasks, appTasks, prune, subscribe, invalidate, acknowledge, eventsHandled, markDelivered, forceQuit, wake
    case wait, stop
  }

  /// What is asked.
  package var kind: Kind {
    switch self {
    case .ping: .ping
    case .openSession: .openSession
    case .adopt: .adopt
    case .createDownloadTask: .createDownloadTask
    case .createUploadTask: .createUploadTask
    case .resume: .resume
    case .suspend: .suspend
    case .cancel: .cancel
    case .setDescription: .setDescription
    case .tasks: .tasks
    case .appTasks: .appTasks
    case .prune: .prune
    case .subscribe: .subscribe
    case .invalidate: .invalidate
    case .acknowledge: .acknowledge
    case .eventsHandled: .eventsHandled
    case .markDelivered: .markDelivered
    case .forceQuit: .forceQuit
    case .wake: .wake
    case .wait: .wait
    case .stop: .stop
    }
  }

  /// The error for a request without a value its kind needs.
  package static func missing(_ what: String) -> ProtFSError {
    ProtFSError(.invalidArgument, "The request to the session service has no \(what).")
  }
}
