import Foundation
import ProtFSTestSupport
import Testing

/// The cleanups' check that a pid a record kept is still the test's process.
@Suite struct TestProcessTests {
  @Test func onlyAProcessNamingTheMarkerIsKilled() async throws {
    let marker = "/tmp/protfs-test-\(UUID().uuidString)/device"
    let another = "/tmp/protfs-test-\(UUID().uuidString)/device"
    func sleeper(_ environment: [String: String]) throws -> Process {
      let process = Process()
      process.executableURL = URL(fileURLWithPath: "/bin/sleep")
      process.arguments = ["60"]
      process.environment = environment
      try process.start()
      return process
    }
    let ours = try sleeper(["PROTFS_DEVICE": marker])
    let theirs = try sleeper(["PROTFS_DEVICE": another])
    defer { kill(theirs.processIdentifier, SIGKILL) }
    #expect(isProcess(ours.processIdentifier, namedBy: marker))
    #expect(!isProcess(theirs.processIdentifier, namedBy: marker))
    killIfStill(theirs.processIdentifier, namedBy: marker)
    killIfStill(ours.processIdentifier, namedBy: marker)
    await offPool { ours.waitUntilExit() }
    #expect(ours.terminationReason == .uncaughtSignal && ours.terminationStatus == SIGKILL)
    #expect(theirs.isRunning)
  }
}
