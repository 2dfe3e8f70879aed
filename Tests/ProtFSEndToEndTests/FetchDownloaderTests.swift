import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Examples/FetchDownloader end to end: a background fetch starts a download with a task
/// description through the session service; the app is suspended and killed; the download
/// finishes in the service, which relaunches the app for the session's events; the app finds its
/// task by its description, moves the file into Documents and calls its events' handler.
@Suite(.serialized, .timeLimit(.minutes(3))) struct FetchDownloaderTests {
  @Test func aFetchStartedDownloadReachesTheRelaunchedApp() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"f1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let log = try Self.installExample(in: d)
    let socket = SessionServiceClient.socketName(device: d.t.device)
    // Whatever happens, the relaunched app, its supervisor and the service end with the test.
    defer { d.endAppAndSessionService() }
    let app = try d.launch(
      ["--suspend-after", "100ms"], [d.scripts + "/fetch-downloader.sh", server.url("fetched.bin").absoluteString])
    defer { app.stop() }
    #expect(await d.waitForState("active"), "\(d.record())")

    // The fetch starts the download in the service; the gate holds it unfinished.
    let fetch = try await d.protfs(["app", "fetch", AppDevice.bundle])
    #expect(fetch.status == 0, "\(fetch)")
    let started = await Self.line(log, containing: "\"started\"")
    #expect(started?.contains("fetch-download") == true, "\(Self.lines(log))")
    let store = try DownloadStore(path: d.t.device.downloadStorePath)
    let received = await offPool { () -> Bool in
      let deadline = Date() + 30
      while Date() < deadline {
        if let task = try? store.tasks().first, task.bytesReceived > 0 { return true }
        usleep(20_000)
      }
      return false
    }
    #expect(received, "\((try? store.tasks()) ?? [])")
    #expect(try store.tasks().first?.taskDescription == "fetch-download")

    // Suspended in the background, then killed.
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    let pid = try #require(await d.recordedPID(), "\(d.record())")
    kill(-pid_t(pid), SIGKILL)
    _ = await app.exit()
    #expect(SessionServiceClient.ping(socketName: socket) != nil, "the download's service is gone")
    let beforeRelaunch = Self.lines(log).count

    server.openGate()
    let fetched = d.t.containerPath(AppDevice.bundle, "Documents/fetched")
    let settled = await offPool { () -> Bool in
      let deadline = Date() + 60
      while Date() < deadline {
        let placed = FileManager.default.contents(atPath: fetched) == Data(body)
        let tasks = (try? store.tasks()) ?? []
        let acknowledged = !tasks.isEmpty && tasks.allSatisfy { $0.delivery == .delivered }
        let finished = Self.lines(log).contains { $0.contains("urlSessionDidFinishEvents") }
        if placed && acknowledged && finished { return true }
        usleep(50_000)
      }
      return false
    }
    let relaunch = Array(Self.lines(log).dropFirst(beforeRelaunch))
    let tasks = try store.tasks()
    #expect(settled, "\(relaunch)\n\(tasks.map { ($0.id, $0.state, $0.delivery as Any) })\n\(d.record())")
    #expect(tasks.count == 1 && tasks.first?.state == .completed, "\(tasks.map { ($0.id, $0.state) })")

    // The relaunched app's story, in iOS's order.
    let events = relaunch.compactMap(Self.event)
    let names = events.compactMap { $0["event"] as? String }
    // The session made in didFinishLaunching may hear of its task before the app is told of the
    // session's events (as on iOS); the end of the events comes after both.
    let task = ["didFinishDownloadingTo", "didCompleteWithError", "urlSessionDidFinishEvents"]
    #expect(names.filter(task.contains) == task, "\(relaunch)")
    let woken = ["handleEventsForBackgroundURLSession", "urlSessionDidFinishEvents"]
    #expect(names.filter(woken.contains) == woken, "\(relaunch)")
    #expect(!names.contains("started"), "the relaunched app started a download: \(relaunch)")
    let handled = events.first { $0["event"] as? String == "handleEventsForBackgroundURLSession" }
    #expect(handled?["session"] as? String == "com.example.FetchDownloader")
    // getTasks lists the task unless its completion reached the delegate first (a race iOS has
    // too): found by its description, it is the one task, at most once.
    let reattached = events.filter { $0["event"] as? String == "reattached" }
    #expect(reattached.count <= 1, "\(relaunch)")
    #expect(reattached.allSatisfy { $0["task"] as? Int == Int(tasks.first?.id ?? -1) }, "\(relaunch)")
    let finished = events.first { $0["event"] as? String == "didFinishDownloadingTo" }
    #expect(finished?["description"] as? String == "fetch-download", "\(relaunch)")
    #expect(finished?["path"] as? String == d.t.containerPath(AppDevice.bundle, "Documents/fetched"), "\(relaunch)")
    let completions = Self.lines(log).compactMap(Self.event).filter {
      $0["event"] as? String == "didCompleteWithError"
    }
    #expect(completions.count == 1 && completions.first?["code"] as? Int == 0, "\(Self.lines(log))")

    // The app's events-handled reached the service: its supervisor did not kill it for a missing
    // answer, nothing waits for delivery, and no relaunch failure is recorded.
    #expect(d.crashReports().isEmpty, "\(d.crashReports())")
    let listed = try await d.protfs(["sessions", "--json"])
    let report = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any]
    let session = (report?["sessions"] as? [[String: Any]])?.first {
      $0["identifier"] as? String == "com.example.FetchDownloader"
    }
    #expect((session?["pendingDeliveries"] as? [Any])?.isEmpty == true, "\(listed.stdout)")
    #expect(session?["lastRelaunchError"] == nil, "\(listed.stdout)")
    let leftovers =
      (try? FileManager.default.contentsOfDirectory(
        atPath: d.t.containerPath(
          AppDevice.bundle, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(AppDevice.bundle)"))) ?? []
    #expect(leftovers.isEmpty, "\(leftovers)")
  }

  /// Puts the built example where the app user reaches it, behind a script that appends the app's
  /// output to a log (a relaunched app's own output goes to /dev/null); returns the log's path.
  static func installExample(in d: AppDevice) throws -> String {
    let example = try d.installExample("FetchDownloader")
    let log = d.scripts + "/fetch-downloader.log"
    try Data().write(to: URL(fileURLWithPath: log))
    chmod(log, 0o666)
    _ = try d.script(
      "fetch-downloader.sh",
      """
      #!/bin/sh
      exec "\(example)" "$@" >>"\(log)" 2>&1
      """)
    return log
  }

  /// The log's lines so far.
  static func lines(_ log: String) -> [String] {
    let text = String(decoding: FileManager.default.contents(atPath: log) ?? Data(), as: UTF8.self)
    return text.split(separator: "\n").map(String.init)
  }

  /// A line of the log as the example's JSON event.
  static func event(_ line: String) -> [String: Any]? {
    try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
  }

  /// The first line of the log containing `text`, waiting up to 20 s off the cooperative pool.
  static func line(_ log: String, containing text: String) async -> String? {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        if let found = lines(log).first(where: { $0.contains(text) }) { return found }
        usleep(20_000)
      }
      return nil
    }
  }
}
