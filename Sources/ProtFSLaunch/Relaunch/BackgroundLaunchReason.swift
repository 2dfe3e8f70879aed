import Foundation
import ProtFS

/// Why the system launches an app that is not running in the background (`AppSessionLauncher`):
/// the options of the `app launch` that says so, and the words of its refusals.
package enum BackgroundLaunchReason: Sendable, Equatable {
  /// A background fetch (`app fetch`).
  case fetch
  /// A silent push, its payload in the file `payloadFile` (`app push`).
  case push(payloadFile: String)
  /// A background task, the request `message` as JSON (`app bgtask launch`).
  case backgroundTask(message: String)
  /// The events of the background session `session` (the session service).
  case sessionEvents(session: String)

  /// The launch's options that say what it is for.
  var options: [String] {
    switch self {
    case .fetch: ["--for-fetch"]
    case .push(let file): ["--for-push", file]
    case .backgroundTask(let message): ["--for-bgtask", message]
    case .sessionEvents(let session): ["--for-session", session]
    }
  }

  /// The refusal of app `app` that was never launched.
  func neverLaunched(_ app: BundleID) -> String {
    switch self {
    case .sessionEvents(let session):
      "The app \(app) is not running and was never launched, so it cannot get the events of \(session)."
    default: "The app \(app) is not running and was never launched."
    }
  }

  /// The refusal of app `app` that the user force-quit.
  func forceQuit(_ app: BundleID) -> String {
    let refusal =
      switch self {
      case .fetch: "it is not launched for a fetch"
      case .push: "a push does not launch it"
      case .backgroundTask: "it is not launched for its background tasks"
      case .sessionEvents(let session): "it is not launched for the events of \(session)"
      }
    return "The app \(app) is not running: the user force-quit it, so \(refusal)."
  }
}
