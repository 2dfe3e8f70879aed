import Foundation
import ProtFSTestSupport
import Testing

/// The cleanups' check that a pid a record kept is still the test's process.
@Suite struct TestProcessTests {
  @Test func onlyAProcessNamingTheMarkerIsKilled() async throws {
    let marker = "/tmp/protfs-test-\(UUID().uuidString)/device"
    let another = "/tmp/protfs-test-\(UUID().uuidString)/device"
    // A shell that says it runs, then waits on its standard input: until a process's exec is done,
    // /proc shows it with an empty command line and environment (the parent of a spawn may run
    // again before that), so the check waits for the word, which comes after the exec.
    func sleeper(_ environment: [String: String]) async throws -> TestProcess {
      let process = TestProcess()
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments = ["-c", "echo running; read line"]
      process.environment = environment
      let output = Pipe()
      process.standardOutput = output
      process.standardInput = Pipe()
      try process.start()
      let said = await offPool { output.fileHandleForReading.read(until: "running\n") }
      #expect(String(decoding: said, as: UTF8.self) == "running\n")
      return process
    }
    let ours = try await sleeper(["PROTFS_DEVICE": marker])
    let theirs = try await sleeper(["PROTFS_DEVICE": another])
    defer { kill(theirs.processIdentifier, SIGKILL) }
    #expect(isProcess(ours.processIdentifier, namedBy: marker))
    #expect(!isProcess(theirs.processIdentifier, namedBy: marker))
    killIfStill(theirs.processIdentifier, namedBy: marker)
    killIfStill(ours.processIdentifier, namedBy: marker)
    await offPool { ours.waitUntilExit() }
    #expect(ours.terminationReason == .uncaughtSignal && ours.terminationStatus == SIGKILL)
    #expect(theirs.isRunning)
  }

  /// A test's program is reaped when it ends (a zombie left behind makes Swift Testing's exit-test
  /// monitor spin), reports its status, and takes /dev/null for `FileHandle.nullDevice`.
  @Test func aProgramIsReapedWhenItEndsAndReportsItsStatus() async throws {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "read line || echo empty; exit 3"]
    process.standardInput = FileHandle.nullDevice
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let said = await offPool { output.fileHandleForReading.readDataToEndOfFile() }
    #expect(String(decoding: said, as: UTF8.self) == "empty\n")
    await offPool { process.waitUntilExit() }
    #expect(!process.isRunning)
    #expect(process.terminationReason == .exit && process.terminationStatus == 3)
    // Gone from /proc, or (its pid reused already) no zombie child of this process.
    let stat = FileManager.default.contents(atPath: "/proc/\(process.processIdentifier)/stat")
    let fields = stat.map { String(decoding: $0, as: UTF8.self) }?.split(separator: ")").last?.split(separator: " ")
    #expect(fields == nil || !(fields?.first == "Z" && fields?.dropFirst().first == "\(getpid())"))
  }
}
