import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSTestSupport
import Testing

/// `protfs upload` against the loopback upload server, on a simulated device.
@Suite(.timeLimit(.minutes(2))) struct UploadCLITests {
  let app = "com.example.app"

  /// A device with the app's container and `bytes` in Documents/report.json.
  func device(_ bytes: Data = Data(DownloadFixture.bytes(1 << 20))) async throws -> TestDevice {
    let t = try TestDevice()
    let result = try await Protfs.run(["--device", t.root, "init", app])
    try #require(result.status == 0, "\(result)")
    try bytes.write(to: URL(fileURLWithPath: t.containerPath(app, "Documents/report.json")))
    return t
  }

  var uploads: String { "Library/Caches/com.apple.nsurlsessiond/Uploads/" + app }

  @Test func aPutPrintsTheStatusWritesTheResponseAndIsListed() async throws {
    let t = try await device()
    let server = try UploadServer(failFirst: 1)
    defer { server.stop() }
    let response = t.directory + "/response.json"
    let result = try await Protfs.run([
      "--device", t.root, "upload", "--bundle", app, "--from", "Documents/report.json", "-H", "X-Note: hello",
      "--response", response, "--description", "nightly", server.url("put").absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == "201 \(server.url("put").absoluteString)\n", "\(result)")
    let reply =
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: response))) as! [String: Any]
    #expect(reply["received"] as? Int == 1 << 20)
    #expect(server.requests.map(\.status) == [500, 201])
    #expect(server.requests.last?.headers["x-note"] == "hello")
    #expect(try FileManager.default.contentsOfDirectory(atPath: t.containerPath(app, uploads)).isEmpty)
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.map { $0["kind"] as? String } == ["upload"])
    #expect(records.first?["taskDescription"] as? String == "nightly")
    let table = try await Protfs.run(["--device", t.root, "tasks"])
    #expect(table.stdout.contains("upload") && table.stdout.contains("KIND"), "\(table)")
  }

  @Test func aPostWritesTheResponseToStdout() async throws {
    let t = try await device(Data("{\"a\":1}".utf8))
    let server = try UploadServer()
    defer { server.stop() }
    let result = try await Protfs.run([
      "--device", t.root, "upload", "--bundle", app, "--from", t.containerPath(app, "Documents/report.json"),
      "-X", "post", "--response", "-", "--progress", "none", server.url("post").absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    let reply = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as! [String: Any]
    #expect(reply["method"] as? String == "POST" && reply["received"] as? Int == 7)
    #expect(result.stderr.contains("200 "))
  }

  @Test func aCompleteFileFailsWhileLockedAndUploadsAfterUnlock() async throws {
    let t = try await device()
    let server = try UploadServer()
    defer { server.stop() }
    let file = t.containerPath(app, "Documents/report.json")
    #expect(try await Protfs.run(["--device", t.root, "set-class", "complete", file]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let arguments = [
      "--device", t.root, "upload", "--bundle", app, "--from", "Documents/report.json", server.url().absoluteString,
    ]
    let locked = try await Protfs.run(arguments)
    #expect(locked.status == 1, "\(locked)")
    #expect(locked.stderr.contains("Operation not permitted") || locked.stderr.contains(file), "\(locked)")
    #expect(locked.stderr.contains(file), "\(locked)")
    #expect(server.requests.isEmpty)
    #expect(try await Protfs.run(["--device", t.root, "unlock"]).status == 0)
    let unlocked = try await Protfs.run(arguments)
    #expect(unlocked.status == 0, "\(unlocked)")
  }

  @Test func aDetachedUploadIsSentByTheSessionServiceAfterTheCommandReturns() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let t = f.t
    try Data(DownloadFixture.bytes(1 << 20)).write(
      to: URL(fileURLWithPath: t.containerPath(app, "Documents/report.json")))
    let server = try UploadServer()
    defer { server.stop() }
    let result = try await Protfs.run([
      "--device", t.root, "upload", "--bundle", app, "--from", "Documents/report.json", "--detach",
      server.url("reports/7").absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    let id = try #require(Int64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result)")
    #expect(f.servicePID != nil, "no session service runs")
    await f.waitUntil { (try? f.tasks())?.first { $0.id == id }?.state.isSettled == true }
    let settled = try f.tasks().first { $0.id == id }
    #expect(settled?.state == .completed, "\(String(describing: settled))")
    #expect(settled?.upload?.responseStatus == 200 || settled?.upload?.responseStatus == 201)
    #expect(server.requests.map(\.received) == [1 << 20])
    let usage = try await Protfs.run([
      "--device", t.root, "upload", "--bundle", app, "--from", "Documents/report.json", "--detach", "--response",
      "-", server.url().absoluteString,
    ])
    #expect(usage.status == 64 && usage.stderr.contains("--detach"), "\(usage)")
  }

  @Test func badInputGetsOneClearErrorAndLeavesNothing() async throws {
    let t = try await device()
    let documents = t.containerPath(app, "Documents")
    try FileManager.default.createSymbolicLink(atPath: documents + "/link", withDestinationPath: "/etc/hostname")
    let url = "http://127.0.0.1:9/upload"
    let cases: [([String], Int32, String)] = [
      (["--from", "Documents/missing.json", url], 1, "missing.json"),
      (["--from", "Documents", url], 1, "is a directory"),
      (["--from", "/etc/hostname", url], 1, "outside the app's container"),
      (["--from", "Documents/link", url], 1, "symbolic link"),
      (["--from", "Documents/report.json", "-X", "DELETE", url], 64, "'DELETE' is not an upload method"),
      (["--from", "Documents/report.json", "-H", "NoColon", url], 64, "NoColon"),
      (["--from", "Documents/report.json", "ftp://127.0.0.1/x"], 1, "ftp://127.0.0.1/x"),
      ([url], 64, "--from"),
    ]
    for (arguments, status, words) in cases {
      let result = try await Protfs.run(["--device", t.root, "upload", "--bundle", app] + arguments)
      #expect(result.status == status, "\(arguments): \(result)")
      #expect(result.stderr.contains(words), "\(arguments): \(result)")
      #expect(result.stderr.components(separatedBy: "Error:").count == 2, "\(arguments): \(result)")
    }
    let snapshots = (try? FileManager.default.contentsOfDirectory(atPath: t.containerPath(app, uploads))) ?? []
    #expect(snapshots.isEmpty)
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    #expect(
      tasks.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[\n\n]" || !tasks.stdout.contains("upload"))
  }
}
