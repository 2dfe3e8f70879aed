// ForgetfulApp: the mistake the source documents warn about. It begins a background task on
// entering the background and never ends it, not even in its expiration handler, so when the
// background time runs out the system kills it (exit 137) and writes a crash report with
// `0x8badf00d` and the task's name. With the argument `block-main` it makes the other mistake: its
// main thread never returns from applicationDidEnterBackground, so the watchdog kills it. With
// `unnamed` it begins its task without a name, which the system names after its caller.
import Foundation
import ProtFSKit

/// Writes `line` to standard output at once (unbuffered), for whoever reads the app's output.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// The app's delegate: begins a task it forgets.
@MainActor final class Forgetful: UIApplicationDelegate {
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    say("launched")
    return true
  }

  func applicationDidEnterBackground(_ application: UIApplication) {
    if CommandLine.arguments.dropFirst().first == "block-main" {
      say("blocking the main thread")
      while true { sleep(1) }
    }
    // Should call endBackgroundTask in its expiration handler; it only complains.
    let expiring: @MainActor @Sendable () -> Void = { say("expiring, still not ending the task") }
    let task =
      CommandLine.arguments.dropFirst().first == "unnamed"
      ? application.beginBackgroundTask(expirationHandler: expiring)
      : application.beginBackgroundTask(withName: "upload", expirationHandler: expiring)
    say("began task \(task.rawValue)")
  }
}

say("ready")
UIApplication.main(delegate: Forgetful())
