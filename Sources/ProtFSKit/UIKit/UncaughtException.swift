import Foundation
import ProtFSApp

/// What iOS does with an Objective-C exception nothing catches, for the ones Foundation and UIKit
/// raise on API misuse (a data upload in a background session, a task asked of an invalidated
/// session): the app stops at once with SIGABRT, and its crash report names the exception.
enum UncaughtException {
  /// Stops the app on exception `name` with `reason`: prints iOS's line on standard error, tells
  /// the supervisor (whose crash report carries the line, once the app died of SIGABRT), aborts.
  static func raise(_ name: String, reason: String) -> Never {
    let line = "*** Terminating app due to uncaught exception '\(name)', reason: '\(reason)'"
    FileHandle.standardError.write(Data((line + "\n").utf8))
    _ = Supervisor.send(.uncaughtException(line: line))
    abort()
  }
}
