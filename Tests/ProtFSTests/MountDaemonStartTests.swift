import Foundation
import ProtFS
import ProtFSSystem
import Testing

@testable import ProtFSLaunch
@testable import ProtFSMount

/// `MountDaemon.start`'s wait for a background mount's readiness, on fake daemons (`sh -c`) that
/// write the readiness line, or end first; and the refusals of a background launch.
@Suite("MountDaemonStart")
struct MountDaemonStartTests {
  /// Starts `script` as the daemon.
  static func start(_ script: String) throws -> pid_t {
    try MountDaemon.start("/bin/sh", arguments: ["sh", "-c", script], environment: [:])
  }

  @Test func aDaemonThatSaysItIsReadyGivesItsPid() throws {
    let pid = try Self.start("echo ready $$")
    #expect(try Kernel.waitForChild(pid).get() == 0)
  }

  @Test func theReadinessLineMayComeInPieces() throws {
    let pid = try Self.start("printf rea; sleep 0.1; printf \"dy $$\\n\"; sleep 0.1")
    #expect(try Kernel.waitForChild(pid).get() == 0)
  }

  @Test func aDaemonThatEndsFirstGivesItsErrorsAndStatus() {
    #expect(throws: MountDaemon.StartFailure(errors: "Error: no FUSE.\n", status: 3)) {
      try Self.start("echo starting; echo 'Error: no FUSE.' >&2; exit 3")
    }
  }

  @Test func aDaemonThatExitsWithZeroFirstFailsWithOne() {
    #expect(throws: MountDaemon.StartFailure(errors: "", status: 1)) { try Self.start("exit 0") }
  }

  @Test func aKilledDaemonFailsWithTheSignalsStatus() {
    #expect(throws: MountDaemon.StartFailure(errors: "", status: 128 + SIGKILL)) { try Self.start("kill -9 $$") }
  }

  @Test func backgroundLaunchRefusalsSayWhatTheyPrevent() throws {
    let app = try BundleID("com.example.app")
    #expect(
      BackgroundLaunchReason.fetch.neverLaunched(app)
        == "The app com.example.app is not running and was never launched.")
    #expect(
      BackgroundLaunchReason.push(payloadFile: "p").forceQuit(app)
        == "The app com.example.app is not running: the user force-quit it, so a push does not launch it.")
    #expect(
      BackgroundLaunchReason.sessionEvents(session: "s").neverLaunched(app)
        == "The app com.example.app is not running and was never launched, so it cannot get the events of s.")
    #expect(BackgroundLaunchReason.backgroundTask(message: "{}").options == ["--for-bgtask", "{}"])
  }
}
