import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSTestSupport
import Testing

/// The example URLSession apps through the session service: UploadSession (a complete file fails
/// while the device is locked, EPERM underneath as on iOS, and the same upload succeeds after
/// unlock with the server's JSON reply delivered) and PauseResume (resume data, then Range).
@Suite(.serialized, .timeLimit(.minutes(2))) struct SessionExampleTests {
  let app = SessionServiceFixture.app

  /// Runs the built example `name` as root in app `app`'s name, with the service's socket.
  func runExample(_ name: String, _ arguments: [String], on f: SessionServiceFixture) async throws -> RunResult {
    let example = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().appendingPathComponent(name).path
    return try await Protfs.runProgram(
      example, arguments,
      environment: [
        "PROTFS_DEVICE": f.t.root, "PROTFS_APP_BUNDLE": app, SessionServiceClient.socketEnvironment: f.socketName,
      ])
  }

  @Test func aCompleteFileFailsWhileLockedAndUploadsAfterUnlockThroughTheService() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let t = f.t
    let file = t.containerPath(app, "Documents/report.bin")
    let body = Data(DownloadFixture.bytes(300_000))
    try body.write(to: URL(fileURLWithPath: file))
    #expect(try await Protfs.run(["--device", t.root, "set-class", "complete", file]).status == 0)
    let server = try UploadServer()
    defer { server.stop() }
    #expect(try await Protfs.run(["--device", t.root, "sessions", "start"]).status == 0)
    let run = { () async throws -> [[String: Any]] in
      let result = try await runExample("UploadSession", [server.url("reports/1").absoluteString, file], on: f)
      #expect(result.status == 0, "\(result)")
      return result.stdout.split(separator: "\n").compactMap {
        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
      }
    }

    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let locked = try await run()
    let failure = locked.first { $0["event"] as? String == "didCompleteWithError" }
    #expect(failure?["domain"] as? String == NSURLErrorDomain, "\(locked)")
    #expect(server.requests.isEmpty)

    #expect(try await Protfs.run(["--device", t.root, "unlock"]).status == 0)
    let unlocked = try await run()
    let events = unlocked.compactMap { $0["event"] as? String }
    #expect(events.contains("didReceive"), "\(unlocked)")
    #expect(unlocked.first { $0["event"] as? String == "didReceive" }?["json"] as? Bool == true, "\(unlocked)")
    let done = unlocked.first { $0["event"] as? String == "didCompleteWithError" }
    #expect(done != nil && done?["domain"] == nil, "\(unlocked)")
    #expect(server.requests.map(\.method) == ["PUT"])
    #expect(server.requests.first?.received == body.count)
    // The snapshot is gone with the task.
    let uploads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Uploads/" + app)
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: uploads)) ?? []).isEmpty)
  }

  @Test func pauseResumeContinuesFromItsResumeDataWithRangeAndMovesTheFile() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let t = f.t
    let body = DownloadFixture.bytes(4 << 20)
    // A slow body, so that the pause comes while bytes are still on their way.
    let server = try FaultServer(
      body: body, entityTag: "\"e1\"", mode: .slowDrip(chunk: 256 * 1024, interval: .milliseconds(20)))
    defer { server.stop() }
    #expect(try await Protfs.run(["--device", t.root, "sessions", "start"]).status == 0)
    let result = try await runExample("PauseResume", [server.url("big.bin").absoluteString], on: f)
    #expect(result.status == 0, "\(result)")
    let lines = result.stdout.split(separator: "\n").compactMap {
      try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
    }
    let paused = lines.first { $0["event"] as? String == "paused" }
    #expect((paused?["resumeData"] as? Int ?? 0) > 0, "\(result.stdout)")
    let offset = lines.first { $0["event"] as? String == "didResumeAtOffset" }?["offset"] as? Int
    #expect((offset ?? 0) > 0, "\(result.stdout)")
    let finished = lines.first { $0["event"] as? String == "didFinishDownloadingTo" }
    let path = try #require(finished?["path"] as? String, "\(result.stdout)")
    // Under the downloaded file's name: the session's temp name is no document's.
    #expect(path == t.containerPath(app, "Documents/big.bin"), "\(result.stdout)")
    #expect(FileManager.default.contents(atPath: path) == Data(body))
    let documents = try FileManager.default.contentsOfDirectory(atPath: t.containerPath(app, "Documents"))
    #expect(!documents.contains { $0.hasPrefix("CFNetworkDownload_") }, "\(documents)")
    let codes = lines.filter { $0["event"] as? String == "didCompleteWithError" }.compactMap { $0["code"] as? Int }
    #expect(codes == [NSURLErrorCancelled, 0], "\(result.stdout)")
    #expect(server.requests.contains { $0.headers["range"] != nil }, "no request continued with Range")
  }
}
