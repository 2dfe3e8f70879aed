import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The end to end: an app starts a background download through the session service and is
/// killed; the download finishes in the service, which relaunches the app; the app receives the
/// file, moves it into Documents and completes its events' handler (Examples/BackgroundDownloader).
/// A force-quit app launched again gets its cancelled download, typed and with resume data, and
/// continues it.
@Suite(.serialized, .timeLimit(.minutes(3))) struct BackgroundDownloadRelaunchTests {
  @Test func aKilledAppIsRelaunchedWhenItsDownloadFinishesAndMovesTheFile() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("BackgroundDownloader")
    let socket = SessionServiceClient.socketName(device: d.t.device)
    // Whatever happens, the relaunched app, its supervisor and the service end with the test.
    defer { d.endAppAndSessionService() }
    let app = try d.launch([], [example, server.url("big.bin").absoluteString])
    defer { app.stop() }
    #expect(await app.line(containing: "didWriteData") != nil, "\(app.output)")
    let pid = try #require(await d.recordedPID(), "\(d.record())")
    kill(-pid_t(pid), SIGKILL)
    _ = await app.exit()
    #expect(SessionServiceClient.ping(socketName: socket) != nil, "the download's service is gone")

    server.openGate()
    let documents = d.t.containerPath(AppDevice.bundle, "Documents/big.bin")
    let store = try DownloadStore(path: d.t.device.downloadStorePath)
    let settled = await offPool { () -> Bool in
      let deadline = Date() + 60
      while Date() < deadline {
        let placed = FileManager.default.contents(atPath: documents) == Data(body)
        let tasks = (try? store.tasks()) ?? []
        let acknowledged = !tasks.isEmpty && tasks.allSatisfy { $0.delivery == .delivered }
        if placed && acknowledged { return true }
        usleep(50_000)
      }
      return false
    }
    let tasks = try store.tasks()
    let sessions = try await d.protfs(["sessions", "--json"])
    let listing = try await Protfs.runProgram(
      "/bin/ls",
      ["-laR", d.t.containerPath(AppDevice.bundle, "Documents"), d.t.containerPath(AppDevice.bundle, "Library/Caches")])
    #expect(
      settled,
      "\(tasks.map { ($0.id, $0.state, $0.delivery as Any, $0.temporaryFileName as Any) })\n\(listing.stdout)\n\(sessions.stdout)\n\(d.record())"
    )
    #expect(tasks.first?.state == .completed)
    // Launched in the background (applicationState .background), the app started nothing new.
    #expect(tasks.count == 1, "\(tasks.map(\.id))")
  }

  @Test func aSuspendedAppIsWokenWhenItsDownloadFinishesGetsTheFileAndIsSuspendedAgain() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("BackgroundDownloader")
    defer { d.endAppAndSessionService() }
    let app = try d.launch(["--suspend-after", "300ms"], [example, server.url("big.bin").absoluteString])
    defer { app.stop() }
    #expect(await app.line(containing: "didWriteData") != nil, "\(app.output)")
    let pid = try #require(await d.recordedPID(), "\(d.record())")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    #expect(await d.waitUntilFrozen())

    // The download finishes while the app is frozen: the system resumes it in the background.
    server.openGate()
    let finished = await app.line(containing: "urlSessionDidFinishEvents", timeout: 60)
    #expect(finished != nil, "\(app.output)\n\(d.record())")
    let events = app.output.compactMap { line in
      (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["event"] as? String
    }.filter { $0 != "didWriteData" }
    // The calls that waited come before urlSessionDidFinishEvents, and the handler was kept first.
    let handled = events.firstIndex(of: "handleEventsForBackgroundURLSession")
    let moved = events.firstIndex(of: "didFinishDownloadingTo")
    let completed = events.firstIndex(of: "didCompleteWithError")
    let end = events.firstIndex(of: "urlSessionDidFinishEvents")
    #expect(handled != nil && moved != nil && completed != nil && end != nil, "\(events)")
    if let handled, let moved, let completed, let end {
      #expect(handled < end && moved < completed && completed < end, "\(events)")
    }
    #expect(events.filter { $0 == "didFinishDownloadingTo" }.count == 1, "\(events)")
    let documents = d.t.containerPath(AppDevice.bundle, "Documents/big.bin")
    #expect(FileManager.default.contents(atPath: documents) == Data(body))
    // Woken, not relaunched: the same process, suspended again once it called the handler.
    #expect(d.record()["pid"] as? Int == pid)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    #expect(d.crashReports().isEmpty, "\(d.crashReports())")
    // The acknowledgement reaches the store from the service, which may record it after the
    // supervisor suspended the app: waited for.
    let store = try DownloadStore(path: d.t.device.downloadStorePath)
    let delivered = await offPool { () -> Bool in
      let deadline = Date() + 20
      while Date() < deadline {
        if (try? store.tasks().map(\.delivery)) == [.delivered] { return true }
        usleep(20_000)
      }
      return false
    }
    #expect(delivered, "\((try? store.tasks().map { ($0.id, $0.delivery as Any) }) ?? [])")
  }

  @Test func aForceQuitAppLaunchedAgainGetsTheCancellationAndContinuesFromItsResumeData() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let example = try d.installExample("BackgroundDownloader")
    defer { d.endAppAndSessionService() }
    let first = try d.launch([], [example, server.url("big.bin").absoluteString])
    defer { first.stop() }
    #expect(await first.line(containing: "didWriteData") != nil, "\(first.output)")
    // The user force-quits the app: the service cancels its download, keeping the bytes.
    let quit = try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"])
    #expect(quit.status == 0, "\(quit)")
    _ = await first.exit()
    let store = try DownloadStore(path: d.t.device.downloadStorePath)
    let cancelled = try #require(try store.tasks().first)
    #expect(cancelled.state == .failed && cancelled.failure?.code == .cancelled)
    #expect(!first.output.contains { $0.contains("didCompleteWithError") }, "\(first.output)")
    server.openGate()

    // Launched again by the user (no URL: nothing new), it makes its session again.
    let second = try d.launch([], [example])
    defer { second.stop() }
    let completion = try #require(await second.line(containing: "didCompleteWithError"), "\(second.output)")
    let fields = try #require(
      try JSONSerialization.jsonObject(with: Data(completion.0.utf8)) as? [String: Any])
    #expect(fields["task"] as? Int == Int(cancelled.id))
    #expect(fields["domain"] as? String == NSURLErrorDomain)
    #expect(fields["code"] as? Int == NSURLErrorCancelled)
    #expect(fields["reason"] as? Int == NSURLErrorCancelledReasonUserForceQuitApplication)
    #expect((fields["resumeData"] as? Int ?? 0) > 0, "\(second.output)")
    // downloadTask(withResumeData:) continues it (Range) and the file is moved into Documents.
    #expect(await second.line(containing: "\"path\"", timeout: 60) != nil, "\(second.output)")
    let documents = d.t.containerPath(AppDevice.bundle, "Documents/big.bin")
    #expect(FileManager.default.contents(atPath: documents) == Data(body))
    #expect(server.requests.count == 2)
    #expect(server.requests.last?.headers["range"]?.hasPrefix("bytes=") == true)
    #expect(second.output.filter { $0.contains("didCompleteWithError") }.count <= 2, "\(second.output)")
  }
}
