import Foundation
import ProtFS
import ProtFSSessions
import ProtFSTestSupport
import Testing

/// The example Swift apps under Examples/, built on ProtFSKit's UIApplication, run with
/// `protfs app launch` and driven with `protfs app background/foreground/fetch/terminate`
/// (docs/semantics.md §8). They print what they are told, which the tests read.
@Suite(.serialized) struct SwiftAppTests {
  @Test func backgroundRunnerFinishesItsWorkEndsItsTaskIsSuspendedAndResumes() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--suspend-after", "300ms"], [try d.installExample("BackgroundRunner")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    let began = await app.line(containing: "background task ")
    // The default 30 s of background time, less the moments since it began (more on a busy machine).
    let remaining = Double(began?.0.split(separator: " ").last ?? "") ?? -1
    #expect(began?.0.hasPrefix("background task 1, remaining ") == true, "\(app.output)")
    #expect(remaining > 29.5 && remaining <= 30, "\(app.output)")
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    #expect(app.output.filter { $0.hasPrefix("tick ") } == (1...5).map { "tick \($0)" })
    // The main-thread timer logged the time left while the work ran (every 250 ms of its second;
    // fewer on a busy machine), going down.
    let left = app.output.filter { $0.hasPrefix("time remaining ") }.compactMap { Double($0.dropFirst(15)) }
    #expect(!left.isEmpty && left == left.sorted(by: >) && left.allSatisfy { $0 < 30 }, "\(app.output)")
    #expect(await d.waitForState("suspended"))
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "foreground") != nil)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "terminating") != nil)
    let (status, _) = await app.exit()
    #expect(status == 0, "\(app.output)")
    #expect(d.crashReports().isEmpty)
  }

  @Test func aSilentPushWakesTheSuspendedSwiftAppOnItsMainThreadWithItsUserInfo() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--suspend-after", "300ms"], [try d.installExample("BackgroundRunner"), "1"])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(app.output)")
    let payload = d.scripts + "/silent.json"
    try Data(#"{"aps": {"content-available": 1}, "url": "https://example.com/new"}"#.utf8)
      .write(to: URL(fileURLWithPath: payload))
    #expect(try await d.protfs(["app", "push", AppDevice.bundle, payload]).status == 0)
    let line = await app.line(containing: "push ")
    #expect(line?.0 == "push https://example.com/new, background, main thread true", "\(app.output)")
    // Its completion handler called, the app is suspended again.
    #expect(await d.waitForState("suspended"), "\(d.record())")
    #expect(d.crashReports().isEmpty)
  }

  @Test func theDelegateAndTheNotificationsFollowTheLockAndTheBackgroundInOrder() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(
      ["--schedule", "lock@100ms,unlock@200ms,background@300ms"], [try d.installExample("BackgroundRunner")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready, state inactive, time unlimited") != nil, "\(app.output)")
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    let seen = app.output.filter {
      $0.hasPrefix("notified ") || $0.hasPrefix("protected ") || $0.hasPrefix("background ")
    }.map { line in
      // The default 30 s of background time, less the moments since it began.
      let left = Double(line.split(separator: " ").last ?? "") ?? -1
      return line.hasPrefix("background task 1, remaining ") && left > 29.5 && left <= 30
        ? "background task 1, remaining about 30" : line
    }
    #expect(
      seen == [
        "protected data locking", "notified UIApplicationProtectedDataWillBecomeUnavailable",
        "protected data available: true", "notified UIApplicationProtectedDataDidBecomeAvailable",
        "background task 1, remaining about 30", "notified UIApplicationDidEnterBackgroundNotification",
      ], "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func anAppLaunchedWhileLockedStartsWithoutProtectedData() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let app = try d.launch([], [try d.installExample("BackgroundRunner")])
    defer { app.stop() }
    #expect(
      await app.line(containing: "ready, state inactive, time unlimited, protected data false") != nil, "\(app.output)")
    #expect(try await d.protfs(["unlock"]).status == 0)
    #expect(await app.line(containing: "protected data available: true") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func backgroundRunnersExpirationHandlerEndsTheTaskSoItIsSuspendedNotKilled() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // 100 ticks would take 20 s; the budget is 1 s, the warning comes at 0.8 s.
    let app = try d.launch(
      ["--background-time", "1s", "--suspend-after", "300ms"], [try d.installExample("BackgroundRunner"), "100"])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    let expired = await app.line(containing: "expired after ")
    let ticks = Int(expired?.0.split(separator: " ").dropFirst(2).first ?? "") ?? -1
    #expect(ticks >= 3 && ticks <= 6, "\(app.output)")
    #expect(await d.waitForState("suspended"))
    #expect(d.crashReports().isEmpty)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (status, _) = await app.exit()
    #expect(status == 137)  // a suspended app is killed without notice
    #expect(!app.output.contains("done"))
  }

  @Test func fetchHelperCompletesAFetchWithNewData() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // Kept in the background past its fetch (not suspended 5 s after it got there, which a fetch
    // under load can outlast), so that terminate finds it running and it ends itself.
    let app = try d.launch(["--suspend-after", "60s"], [try d.installExample("FetchHelper")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready, fetch interval 0.0") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "fetching (state background)") != nil, "\(app.output)")
    #expect(await app.line(containing: "fetched newData") != nil, "\(app.output)")
    #expect(await d.waitForFetchResult() == "newData")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (status, _) = await app.exit()
    #expect(status == 0, "\(app.output)")
  }

  /// Background fetch as Apple's documentation writes it: the handler asks `URLSession.shared` for
  /// the data and keeps it in Documents as a complete file. Locked, the request still succeeds (a
  /// data task touches no file), but the complete file cannot be made, so the fetch fails, as on a
  /// phone; a download of it, written by the app itself into its tmp/, succeeds unlocked and fails
  /// locked once tmp/ is complete.
  @Test func aFetchThroughTheSharedSessionGetsItsDataLockedOrNotAndKeepsItOnlyUnlocked() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let body = #"{"headlines": ["Protected data", "Background time"]}"#
    let server = try FaultServer(body: Array(body.utf8))
    defer { server.stop() }
    let app = try d.launch(
      ["--suspend-after", "60s"],
      [try d.installExample("SharedSessionFetch"), server.url("latest.json").absoluteString])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "fetched \(body.utf8.count) bytes, kept in Documents") != nil, "\(app.output)")
    #expect(app.output.contains("downloaded \(body.utf8.count) bytes into tmp"), "\(app.output)")
    #expect(await d.waitForFetchResult() == "newData")
    let kept = d.t.containerPath(AppDevice.bundle, "Documents/latest.json")
    #expect(FileManager.default.contents(atPath: kept) == Data(body.utf8))
    let shown = try await d.protfs(["get-class", kept])
    #expect(shown.stdout.hasPrefix("NSFileProtectionComplete  own"), "\(shown)")
    // tmp/ made complete: locked, the download's file cannot be made there, as on a phone.
    let tmp = d.t.containerPath(AppDevice.bundle, "tmp")
    #expect(try await d.protfs(["set-class", "NSFileProtectionComplete", tmp]).status == 0)
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).status == 0)
    #expect(
      await app.line(containing: "fetched \(body.utf8.count) bytes, cannot keep them", after: "kept in Documents")
        != nil,
      "\(app.output)")
    #expect(app.output.contains { $0.hasPrefix("download failed: ") && $0.contains("-3000") }, "\(app.output)")
    #expect(await d.waitForRecord { ($0["lastFetch"] as? [String: Any])?["result"] as? String == "failed" })
    #expect(app.output.filter { $0.contains("downloaded \(body.utf8.count) bytes into tmp") }.count == 1)
    #expect(server.requests.count == 4)
    // Data tasks and a standard session's downloads run in the app: the shared session never asked
    // for the session service.
    #expect(SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: d.t.device)) == nil)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  /// A standard session's upload runs in the app, which reads the file itself through its mount:
  /// locked, a complete file cannot be read and the task fails with
  /// `NSURLErrorNoPermissionsToReadFile` (EPERM underneath), nothing sent; unlocked it goes, with
  /// the server's reply, and the session service is never asked.
  @Test func aStandardUploadReadsTheFileAsTheAppSoItsClassDecides() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let server = try UploadServer()
    defer { server.stop() }
    let file = d.t.containerPath(AppDevice.bundle, "Documents/report.bin")
    let body = Data(DownloadFixture.bytes(200_000))
    try body.write(to: URL(fileURLWithPath: file))
    #expect(try await d.protfs(["set-class", "complete", file]).status == 0)
    let example = try d.installExample("UploadSession")
    let run = { () async throws -> [[String: Any]] in
      let result = try await d.protfs(
        ["app", "launch", AppDevice.bundle, "--", example, server.url("reports/1").absoluteString, file, "standard"])
      #expect(result.status == 0, "\(result)")
      return result.stdout.split(separator: "\n").compactMap {
        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
      }
    }
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let locked = try await run()
    let failure = locked.first { $0["event"] as? String == "didCompleteWithError" }
    #expect(failure?["code"] as? Int == NSURLErrorNoPermissionsToReadFile, "\(locked)")
    #expect(server.requests.isEmpty)
    #expect(try await d.protfs(["unlock"]).status == 0)
    let unlocked = try await run()
    #expect(unlocked.first { $0["event"] as? String == "didReceive" }?["json"] as? Bool == true, "\(unlocked)")
    let done = unlocked.first { $0["event"] as? String == "didCompleteWithError" }
    #expect(done != nil && done?["code"] == nil && done?["status"] as? Int == 201, "\(unlocked)")
    #expect(unlocked.last { $0["event"] as? String == "didSendBodyData" }?["sent"] as? Int == body.count)
    #expect(server.requests.map(\.received) == [body.count])
    #expect(SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: d.t.device)) == nil)
  }

  @Test func fetchHelperLaunchedInTheBackgroundForAFetchCompletesIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let helper = try d.installExample("FetchHelper")
    let first = try await d.protfs(["app", "launch", AppDevice.bundle, "--schedule", "terminate@50ms", "--", helper])
    #expect(first.status == 0, "\(first)")
    // The schedule ends the app 50 ms after its launch; the fetch is to find it not running, and
    // under load the next command may come sooner than that.
    #expect(await d.waitForState("notRunning"), "\(d.record())")
    let fetch = try await d.protfs(["app", "fetch", AppDevice.bundle])
    #expect(fetch.status == 0, "\(fetch)")
    // Whatever happens, the detached supervisor and its app end with the test.
    defer { d.endApp() }
    let fetched = await d.waitForFetchResult() == "newData"
    #expect(fetched, "\(d.record())")
    // Launched in the background, it never became active: still in the background, or, once its
    // --suspend-after (5 s) passed on a loaded machine, suspended.
    let state = d.record()["state"] as? String
    #expect(state == "background" || state == "suspended", "\(d.record())")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("notRunning"))
    // From the background it exits after applicationWillTerminate; a suspended app is killed
    // without notice, as on iOS (it may be suspended between the look above and the terminate).
    let status = d.record()["lastExitStatus"] as? Int
    #expect(status == 0 || status == 137, "\(d.record())")
  }

  @Test func forgetfulAppIsKilledWithACrashReportNamingItsTask() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--background-time", "1s"], [try d.installExample("ForgetfulApp")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "began task 1") != nil, "\(app.output)")
    #expect(await app.line(containing: "expiring, still not ending the task") != nil, "\(app.output)")
    let (status, _) = await app.exit()
    #expect(status == 137, "\(app.output)")
    let report = d.crashReports().first ?? [:]
    #expect(report["terminationReason"] as? String == "0x8badf00d")
    #expect(report["openTasks"] as? [String] == ["upload"])
  }

  /// A task begun without a name is named as iOS names one, after its caller (issue 64): the
  /// crash report's `openTasks` never holds an empty name.
  @Test func anUnnamedTaskIsNamedAfterItsCallerInTheCrashReport() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--background-time", "1s"], [try d.installExample("ForgetfulApp"), "unnamed"])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "began task 1") != nil, "\(app.output)")
    let (status, _) = await app.exit()
    #expect(status == 137, "\(app.output)")
    let report = d.crashReports().first ?? [:]
    #expect(report["openTasks"] as? [String] == ["Called by ForgetfulApp"], "\(report)")
  }

  @Test func anAppWhoseMainThreadNeverReturnsIsKilledByTheWatchdogNotSuspended() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(
      ["--watchdog", "1s", "--suspend-after", "100ms"], [try d.installExample("ForgetfulApp"), "block-main"])
    defer { app.stop() }
    // Launched, not just started: the main thread is watched from UIApplicationMain on, and a move to
    // the background before that would be an event the watchdog does not wait for.
    #expect(await app.line(containing: "launched") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "blocking the main thread") != nil, "\(app.output)")
    // From here to the watchdog's kill (a second, ten times --suspend-after), the record must never
    // say suspended: every state it shows is watched, not a moment chosen by a sleep.
    let seen = await offPool { () -> [String] in
      var states: [String] = []
      let deadline = Date() + 20
      while Date() < deadline {
        let state = d.record()["state"] as? String ?? ""
        if states.last != state { states.append(state) }
        if state == "notRunning" { break }
        usleep(5_000)
      }
      return states
    }
    #expect(!seen.contains("suspended"), "\(seen)")
    guard seen.last == "notRunning" else {
      Issue.record("the app was not killed: \(d.record())")
      return
    }
    let (status, _) = await app.exit()
    #expect(status == 137, "\(app.output)")
    let report = try #require(d.crashReports().first, "no crash report")
    #expect(report["terminationReason"] as? String == "0x8badf00d")
    let reason = report["reason"] as? String ?? ""
    #expect(reason.contains("the main thread did not return from didEnterBackground within 1"), "\(reason)")
  }

  @Test func aSwiftAppOutsideProtfsAppStopsWithAMessageNamingTheVariable() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: try d.installExample("ForgetfulApp"))
    var environment = ProcessInfo.processInfo.environment
    environment["PROTFS_APP_SOCKET"] = nil
    environment["PROTFS_APP_EVENTS_FD"] = nil
    process.environment = environment
    let errors = Pipe()
    process.standardError = errors
    process.standardOutput = FileHandle.nullDevice
    try process.start()
    let text = await offPool { String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self) }
    await offPool { process.waitUntilExit() }
    #expect(process.terminationStatus != 0)
    #expect(text.contains("$PROTFS_APP_SOCKET is not set"), "\(text)")
    #expect(text.contains("protfs app launch"), "\(text)")
  }
}
