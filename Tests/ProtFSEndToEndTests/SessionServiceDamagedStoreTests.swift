import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The session service against a damaged task store: a session whose stored configuration is
/// garbage does not stop the service, and is shown, not hidden.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SessionServiceDamagedStoreTests {
  let app = SessionServiceFixture.app

  @Test func aGarbledSessionConfigurationIsReportedAndTheServiceRunsOn() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"g1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("first.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    f.stop()
    let store = try DownloadStore(path: f.t.device.downloadStorePath)
    let (identifier, _, sound) = try #require(try store.serviceSessions().first)
    let destination = try #require(
      (try JSONSerialization.jsonObject(with: Data(sound.utf8)) as? [String: Any])?["destinationDirectory"] as? String)
    try store.database.execute(
      "UPDATE sessions SET service_configuration = '{\"configuration\": 42, garbage' WHERE identifier = '\(identifier)'"
    )

    // The service starts anyway and names the session it cannot reopen.
    let service = try ForegroundService(root: f.t.root)
    defer { service.end() }
    try SessionServiceClient.waitUntilListening(f.socketName, timeout: 10)
    let listed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(listed.status == 0, "\(listed)")
    let report = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any]
    #expect(report?["serviceRunning"] as? Bool == true, "\(listed.stdout)")
    let session = (report?["sessions"] as? [[String: Any]])?.first { $0["identifier"] as? String == identifier }
    let problem = session?["configurationError"] as? String
    #expect(problem?.contains("'\(identifier)'") == true && problem?.contains("unreadable") == true, "\(listed)")
    // Its task is stranded: no process transfers it, and it is shown so (issue 64).
    #expect((session?["tasks"] as? [String: Int])?["interrupted"] == 1, "\(listed.stdout)")
    let table = try await Protfs.run(["--device", f.t.root, "sessions"])
    #expect(table.status == 0, "\(table)")
    #expect(table.stdout.contains("unreadable"), "\(table)")
    #expect(table.stderr.contains(identifier) && table.stderr.contains("unreadable"), "\(table)")

    // Opening the session again (as `download --detach` does) writes a sound configuration: the
    // stranded task goes on and finishes.
    var configuration = SessionConfiguration(identifier: identifier, bundleID: app)
    configuration.sendsLaunchEvents = false
    try SessionServiceClient.adopt(
      configuration, destinationDirectory: destination, resuming: [1], socketName: f.socketName)
    server.openGate()
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    let finished = try f.tasks()
    #expect(
      finished.map(\.state) == [.completed],
      "\(finished.map { ($0.id, $0.state, $0.url, $0.bytesReceived, $0.errorMessage as Any) })")
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/first.bin")) == Data(body))
    let healed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(!healed.stdout.contains("configurationError"), "\(healed.stdout)")

    let stderr = service.end()
    #expect(stderr.contains("cannot reopen '\(identifier)'") && stderr.contains("unreadable"), "\(stderr)")
  }
}

/// `protfs sessions start --foreground`, whose standard error the test reads once it ended.
final class ForegroundService: @unchecked Sendable {
  let process = TestProcess()
  let root: String
  private let errors = Pipe()

  init(root: String) throws {
    self.root = root
    process.executableURL = URL(fileURLWithPath: Protfs.binary)
    process.arguments = ["--device", root, "sessions", "start", "--foreground", "--idle-exit", "10m"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    try process.start()
  }

  /// Stops the service (if it still runs) and returns what it wrote on standard error.
  @discardableResult
  func end() -> String {
    if process.isRunning {
      _ = try? Protfs.runBlocking(["--device", root, "sessions", "stop"])
      let deadline = Date() + 10
      while process.isRunning, Date() < deadline { usleep(10_000) }
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      process.waitUntilExit()
    }
    let data = (try? errors.fileHandleForReading.readToEnd()) ?? nil
    return String(decoding: data ?? Data(), as: UTF8.self)
  }
}
