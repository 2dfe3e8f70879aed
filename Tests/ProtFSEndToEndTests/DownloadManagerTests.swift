import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// A download manager written as open-source iOS ones are (Examples/DownloadManager): it keeps its
/// own resume data, reads Apple's keys in it, and continues a paused or force-quit download at a
/// later launch, as it would on a phone.
@Suite(.serialized, .timeLimit(.minutes(3))) struct DownloadManagerTests {
  /// The JSON lines of `app` with `event`.
  static func events(_ app: RunningApp, _ event: String) -> [[String: Any]] {
    app.output.compactMap { line in
      guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
        object["event"] as? String == event
      else { return nil }
      return object
    }
  }

  @Test func aForceQuitsCancellationIsDeliveredOnceThoughTheAppDoesNotResumeIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("DownloadManager")
    defer { d.endAppAndSessionService() }
    let first = try d.launch([], [example, "run", server.url("big.bin").absoluteString])
    defer { first.stop() }
    #expect(await first.line(containing: "didWriteData") != nil, "\(first.output)")
    // The task's response is there from the first bytes on, as on iOS.
    #expect(Self.events(first, "didWriteData").first?["status"] as? Int == 200, "\(first.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    _ = await first.exit()

    // Launched again, it gets the cancellation with its resume data and keeps the data.
    let second = try d.launch([], [example])
    defer { second.stop() }
    #expect(await second.line(containing: "didCompleteWithError") != nil, "\(second.output)")
    let kept = try #require(Self.events(second, "keptResumeData").first, "\(second.output)")
    #expect(kept["partialExists"] as? Bool == true && (kept["bytes"] as? Int ?? 0) > 0, "\(kept)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await second.exit()

    // Once delivered, never again: a later launch makes its session and gets no call.
    let third = try d.launch([], [example])
    defer { third.stop() }
    #expect(await third.line(containing: "sessionMade") != nil, "\(third.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await third.exit()
    #expect(Self.events(third, "didCompleteWithError").isEmpty, "\(third.output)")

    // Its own resume data still continues the download, with a Range request.
    server.openGate()
    let fourth = try d.launch([], [example, "resume"])
    defer { fourth.stop() }
    #expect(await fourth.line(containing: "didFinishDownloadingTo", timeout: 60) != nil, "\(fourth.output)")
    #expect(
      FileManager.default.contents(atPath: d.t.containerPath(AppDevice.bundle, "Documents/big.bin")) == Data(body))
    #expect(server.requests.last?.headers["range"]?.hasPrefix("bytes=") == true)
  }

  /// The issue's app: it pauses (its resume data and its task's response kept, the response
  /// archived with secure coding), is force-quit, and launched again continues from its own resume
  /// data with a Range request, reading the response it archived.
  @Test func aPausedDownloadWhoseResponseWasArchivedContinuesAfterAForceQuit() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e2\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("DownloadManager")
    defer { d.endAppAndSessionService() }
    let first = try d.launch([], [example, "start", server.url("big.bin").absoluteString])
    defer { first.stop() }
    let paused = try #require(await first.line(containing: #""event":"paused""#), "\(first.output)")
    let fields = try #require(try JSONSerialization.jsonObject(with: Data(paused.0.utf8)) as? [String: Any])
    #expect(fields["partialExists"] as? Bool == true && (fields["bytes"] as? Int ?? 0) > 0, "\(fields)")
    #expect(Self.events(first, "archivedResponse").first?["bytes"] as? Int ?? 0 > 0, "\(first.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    _ = await first.exit()

    server.openGate()
    let second = try d.launch([], [example, "resume"])
    defer { second.stop() }
    #expect(await second.line(containing: "didFinishDownloadingTo", timeout: 60) != nil, "\(second.output)")
    let response = try #require(Self.events(second, "unarchivedResponse").first, "\(second.output)")
    #expect(response["status"] as? Int == 200 && response["etag"] as? String == "\"e2\"", "\(response)")
    #expect(response["length"] as? Int == body.count, "\(response)")
    #expect(
      Self.events(second, "didResumeAtOffset").first?["offset"] as? Int == fields["bytes"] as? Int, "\(second.output)")
    #expect(
      FileManager.default.contents(atPath: d.t.containerPath(AppDevice.bundle, "Documents/big.bin")) == Data(body))
    #expect(server.requests.last?.headers["range"] == "bytes=\(fields["bytes"] as? Int ?? -1)-")
  }

  /// The app is killed mid-download and relaunched in the background for the download's events:
  /// it makes its session and lists the tasks while its main thread waits, as MZDownloadManager
  /// does. The finished download is in the list, running (its delegate calls are still to come), and
  /// its file comes after the list, so that the manager finds it there and keeps the file.
  @Test func aRelaunchedManagerListsTheFinishedDownloadBeforeItsFileArrives() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e3\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("DownloadManager")
    defer { d.endAppAndSessionService() }
    let first = try d.launch([], [example, "run", server.url("big.bin").absoluteString])
    defer { first.stop() }
    #expect(await first.line(containing: "didWriteData") != nil, "\(first.output)")
    let pid = try #require(await d.recordedPID(), "\(d.record())")
    kill(-pid_t(pid), SIGKILL)
    _ = await first.exit()

    server.openGate()
    let documents = d.t.containerPath(AppDevice.bundle, "Documents/big.bin")
    let log = d.t.containerPath(AppDevice.bundle, "Library/DownloadManager.log")
    let finished = await offPool { () -> Bool in
      let deadline = Date() + 60
      while Date() < deadline {
        if let text = try? String(contentsOfFile: log, encoding: .utf8),
          text.split(separator: "\n").filter({ $0.contains("didFinishDownloadingTo") }).count == 1
        {
          return true
        }
        usleep(50_000)
      }
      return false
    }
    let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    #expect(finished, "\(lines)\n\(d.record())")
    // The relaunch's lines: the list (the task running), then the file, moved.
    let relaunch = Array(lines.drop { !$0.contains(#""event":"listed""#) })
    #expect(relaunch.first?.contains(#""state":0"#) == true, "\(lines)")
    #expect(relaunch.contains { $0.contains("didFinishDownloadingTo") && $0.contains("Documents") }, "\(lines)")
    #expect(FileManager.default.contents(atPath: documents) == Data(body), "\(lines)")
  }
}
