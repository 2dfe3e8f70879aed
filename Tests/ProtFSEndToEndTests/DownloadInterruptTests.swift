import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// Ctrl-C (SIGINT) or SIGTERM during a foreground `protfs download` (issue 64): the task is
/// recorded as interrupted, which `tasks`, `cache ls` and `sessions` show (text and JSON) with the
/// command that goes on with it, one line on stderr says so, the exit status is the signal's, and
/// that command finishes the file. A download killed with SIGKILL is shown interrupted too.
@Suite(.timeLimit(.minutes(2))) struct DownloadInterruptTests {
  static let app = "com.example.app"

  /// A device with one container, a server that stalls after 400,000 of its 1 MiB, and `protfs
  /// download` of it running until the engine reported those bytes, its stderr in `errors`.
  struct Stalled {
    let t: TestDevice
    let body: [UInt8]
    let server: FaultServer
    let process: TestProcess
    /// The directory of the download's `stderr`.
    let errors: String

    init() async throws {
      t = try TestDevice()
      try #require(try await Protfs.run(["--device", t.root, "init", app]).status == 0)
      body = DownloadFixture.bytes(1 << 20)
      server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .stallAfter(bytes: 400_000))
      errors = try TestDevice.makeTemporaryDirectory(prefix: "protfs-stderr")
      let handle = try #require(Self.create(errors + "/stderr"))
      defer { try? handle.close() }
      let url = server.url("big.bin").absoluteString
      do {
        process = try #require(
          try await Protfs.startDownload(
            ["--device", t.root, "download", "--bundle", app, "--progress", "json", url], untilWritten: 400_000,
            standardError: handle),
          "protfs download ended before reporting progress")
      } catch {
        server.stop()
        throw error
      }
    }

    static func create(_ path: String) -> FileHandle? {
      FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil
    }

    /// The tasks of `protfs tasks --json`.
    func tasks() async throws -> [[String: Any]] {
      let listed = try await Protfs.run(["--device", t.root, "tasks", "--json"])
      return try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
    }

    /// Resumes the task as its `resumeCommand` says, and checks that the file is whole.
    func resume(_ command: String) async throws {
      server.setMode(.normal)
      var words = command.split(separator: " ").map(String.init)
      try #require(words.first == "protfs", "\(command)")
      words.removeFirst()
      let resumed = try await Protfs.run(words)
      #expect(resumed.status == 0, "\(resumed)")
      #expect(FileManager.default.contents(atPath: t.containerPath(app, "Documents/big.bin")) == Data(body))
      let last = try #require(server.requests.last)
      #expect(last.headers["range"].map { $0 != "bytes=0-" } == true, "\(last.headers)")
      #expect(try await tasks().first?["state"] as? String == "completed")
    }

    func remove() {
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      process.waitUntilExit()
      server.stop()
      TestDevice.removeTree(errors)
    }
  }

  @Test(arguments: [SIGINT, SIGTERM])
  func aSignalledDownloadIsRecordedInterruptedAndItsCommandFinishesIt(signal: Int32) async throws {
    let stalled = try await Stalled()
    defer { stalled.remove() }
    let t = stalled.t
    kill(stalled.process.processIdentifier, signal)
    await offPool { stalled.process.waitUntilExit() }
    #expect(stalled.process.terminationStatus == 128 + signal)
    let said = (try? String(contentsOfFile: stalled.errors + "/stderr", encoding: .utf8)) ?? ""
    let resume = "`protfs --device \(t.root) tasks resume 1`"
    #expect(said.split(separator: "\n").count == 1, "\(said)")
    #expect(said.contains("Interrupted") && said.contains("download task 1") && said.contains(resume), "\(said)")

    // `tasks`: interrupted, with the command that goes on with it; so in JSON.
    let listed = try await Protfs.run(["--device", t.root, "tasks"])
    #expect(listed.stdout.contains("interrupted"), "\(listed)")
    #expect(listed.stderr.contains("task 1: interrupted") && listed.stderr.contains(resume), "\(listed)")
    let record = try #require(try await stalled.tasks().first)
    #expect(record["state"] as? String == "interrupted", "\(record)")
    #expect(record["resumeCommand"] as? String == "protfs --device \(t.root) tasks resume 1", "\(record)")
    // `cache ls` and `sessions` show it so.
    let cache = try await Protfs.run(["--device", t.root, "cache", "ls", Self.app])
    #expect(cache.stdout.contains("task 1 [\(Self.app).background] interrupted"), "\(cache)")
    let sessions = try await Protfs.run(["--device", t.root, "sessions", "--json"])
    let report = try JSONSerialization.jsonObject(with: Data(sessions.stdout.utf8)) as? [String: Any]
    let session = (report?["sessions"] as? [[String: Any]])?.first
    #expect((session?["tasks"] as? [String: Int]) == ["interrupted": 1], "\(sessions.stdout)")

    try await stalled.resume(try #require(record["resumeCommand"] as? String))
  }

  /// No process is left to record it: the store's running task whose owner is gone is shown
  /// interrupted, and the command shown goes on with it.
  @Test func aKilledDownloadIsShownInterrupted() async throws {
    let stalled = try await Stalled()
    defer { stalled.remove() }
    kill(stalled.process.processIdentifier, SIGKILL)
    await offPool { stalled.process.waitUntilExit() }
    let record = try #require(try await stalled.tasks().first)
    #expect(record["state"] as? String == "interrupted", "\(record)")
    let sessions = try await Protfs.run(["--device", stalled.t.root, "sessions"])
    #expect(sessions.stdout.contains("interrupted 1"), "\(sessions)")
    try await stalled.resume(try #require(record["resumeCommand"] as? String))
  }
}
