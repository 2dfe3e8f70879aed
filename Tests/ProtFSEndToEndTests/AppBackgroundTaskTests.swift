import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// BGTaskScheduler driven from the shell, as Xcode's debugger commands drive it on a phone
/// (docs/semantics.md §8): `protfs app refresh`, `process` and `expire` run and expire the
/// requests an app submitted, shell apps take part through `bgtask-*`, Swift apps through
/// ProtFSKit's BGTaskScheduler, and an app that is not running is launched for its request.
@Suite struct AppBackgroundTaskTests {
  static let refresh = "com.example.tasks.refresh"
  static let cleanup = "com.example.tasks.cleanup"

  /// An Info.plist permitting both identifiers, with `modes`.
  static func infoPlist(_ d: AppDevice, modes: [String] = ["fetch", "processing"]) throws -> String {
    try d.infoPlist(modes: modes, ["BGTaskSchedulerPermittedIdentifiers": [refresh, cleanup]])
  }

  /// A shell app that registers both tasks, submits them when it enters the background, completes
  /// the refresh at once and the cleanup only when it expires.
  func shellApp(_ d: AppDevice, earliest: String = "--earliest 15m") throws -> String {
    try d.script(
      "tasks.sh",
      """
      #!/bin/sh
      "$PROTFS" app bgtask-register \(Self.refresh) && "$PROTFS" app bgtask-register \(Self.cleanup) || exit 3
      "$PROTFS" app bgtask-register com.example.unlisted 2>&1 | sed 's/^/unlisted: /'
      echo ready
      while read -r line <&3; do
        case "$line" in
          *didEnterBackground*)
            "$PROTFS" app bgtask-submit \(Self.refresh) --refresh \(earliest) &&
              "$PROTFS" app bgtask-submit \(Self.cleanup) --processing --requires-power && echo submitted ;;
          *bgTaskLaunch*\(Self.refresh)*)
            echo "$line"; echo "refresh completing"
            "$PROTFS" app bgtask-completed \(Self.refresh) --success 2>&1 | sed 's/^/completion: /' ;;
          *bgTaskLaunch*) echo "$line" ;;
          *bgTaskExpiration*)
            echo "$line"; echo "cleanup stopping"
            "$PROTFS" app bgtask-completed \(Self.cleanup) --failure 2>&1 | sed 's/^/completion: /' ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
  }

  /// The result of the last BGTask the record shows, once it shows `expected` (or the last one
  /// seen when 20 s pass).
  func lastTask(_ d: AppDevice, is expected: String) async -> String? {
    await Task.detached {
      let deadline = Date() + 20
      var seen: String?
      while Date() < deadline {
        seen = (d.record()["lastBackgroundTask"] as? [String: Any])?["result"] as? String
        if seen == expected { return seen }
        usleep(20_000)
      }
      return seen
    }.value
  }

  @Test func aShellAppsRequestsAreRunWhenDueExpiredOnDemandAndListed() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try Self.infoPlist(d)
    // Two seconds in the background for the shell app's two submissions (two starts of protfs),
    // which a loaded machine can stretch past a shorter time before it is suspended mid-way.
    let app = try d.launch(["--info-plist", plist, "--suspend-after", "2s"], [try shellApp(d)])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(
      app.output.contains { $0.contains("unlisted: ") && $0.contains("BGTaskSchedulerPermittedIdentifiers") },
      "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "submitted") != nil, "\(app.output)")
    let listed = try await d.protfs(["app", "requests", AppDevice.bundle, "--json"])
    let requests = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]] ?? []
    #expect(requests.map { $0["identifier"] as? String } == [Self.refresh, Self.cleanup], "\(listed)")
    #expect(requests.first?["earliestBeginDate"] is String && requests.last?["earliestBeginDate"] is NSNull)
    #expect(
      requests.last?["requiresExternalPower"] as? Bool == true && requests.first?["requiresExternalPower"] is NSNull)
    let status = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
    let entry = (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])?.first
    #expect(
      (entry?["taskRequests"] as? [[String: Any]])?.count == 2 && entry?["lastBackgroundTask"] is NSNull, "\(status)")
    #expect(await d.waitForState("suspended"), "\(d.record())")

    // Not before its earliest begin date, unless --now.
    let early = try await d.protfs(["app", "refresh", AppDevice.bundle])
    #expect(
      early.status == 1 && early.stderr.contains("may not begin before") && early.stderr.contains("--now"), "\(early)")
    let ran = try await d.protfs(["app", "refresh", AppDevice.bundle, "--now"])
    #expect(ran.status == 0 && ran.stdout.contains("'\(Self.refresh)'"), "\(ran)")
    let launched = await app.line(containing: "bgTaskLaunch")
    #expect(launched?.0.contains(#""identifier":"\#(Self.refresh)","type":"refresh""#) == true, "\(app.output)")
    #expect(await app.line(containing: "refresh completing") != nil, "\(app.output)")
    #expect(await lastTask(d, is: "success") == "success", "\(d.record())")
    #expect(await d.waitForState("suspended"), "\(d.record())")

    // The processing task runs until it is expired, and then stops.
    #expect(try await d.protfs(["app", "process", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: #""type":"processing""#) != nil, "\(app.output)")
    let expired = try await d.protfs(["app", "expire", AppDevice.bundle, Self.cleanup])
    #expect(expired.status == 0, "\(expired)")
    #expect(await app.line(containing: #"{"event":"bgTaskExpiration","#) != nil, "\(app.output)")
    // Once completed, the app is suspended at once: it says so before it completes.
    #expect(await app.line(containing: "cleanup stopping") != nil, "\(app.output) \(d.record()) \(d.crashReports())")
    #expect(!app.output.contains { $0.hasPrefix("completion: ") }, "\(app.output)")
    #expect(await lastTask(d, is: "failure") == "failure", "\(d.record())")
    #expect(await d.waitForState("suspended"), "\(d.record())")
    let none = try await d.protfs(["app", "requests", AppDevice.bundle])
    #expect(none.status == 0 && none.stdout.contains("no pending task requests"), "\(none)")
    let again = try await d.protfs(["app", "expire", AppDevice.bundle, Self.cleanup])
    #expect(again.status == 1 && again.stderr.contains("No background task"), "\(again)")
  }

  @Test func aScheduledRefreshRunsTheDueRequestAtItsTime() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try Self.infoPlist(d)
    let app = try d.launch(
      ["--info-plist", plist, "--schedule", "background@100ms,refresh@1s"], [try shellApp(d, earliest: "")])
    defer { app.stop() }
    #expect(await app.line(containing: "submitted") != nil, "\(app.output)")
    #expect(await app.line(containing: "refresh completing") != nil, "\(app.output)")
    let exec = try await d.protfs(["exec", "--schedule", "process@1s", "--", "/bin/true"])
    #expect(exec.status == 64 && exec.stderr.contains("needs an app"), "\(exec)")
  }

  @Test func aSwiftAppPortedByItsImportsIsRefreshedAndLaunchedForItsRequestWhenNotRunning() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try Self.infoPlist(d)
    let example = try d.installExample("TaskScheduler")
    let log = d.scripts + "/tasks.log"
    try Data().write(to: URL(fileURLWithPath: log))
    chmod(log, 0o666)
    let wrapper = try d.script("task-scheduler.sh", "#!/bin/sh\nexec \"\(example)\" \"$@\" >>\"\(log)\" 2>&1\n")
    /// Whether the log shows `text` `times` times, within 60 s (a machine with every core busy took
    /// over 20 s once).
    func logged(_ text: String, times: Int = 1) async -> Bool {
      await Task.detached {
        let deadline = Date() + 60
        while Date() < deadline {
          let shown =
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").components(separatedBy: text).count - 1
          if shown >= times { return true }
          usleep(20_000)
        }
        return false
      }.value
    }
    let app = try d.launch(["--info-plist", plist, "--suspend-after", "300ms"], [wrapper])
    defer { app.stop() }
    #expect(await logged("launched, state foreground, unlisted registered false"), "\(log)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await logged("pending: \(Self.cleanup), \(Self.refresh)"))
    #expect(try await d.protfs(["app", "refresh", AppDevice.bundle, "--now"]).status == 0)
    #expect(await logged("refresh ran main=false"))
    #expect(await lastTask(d, is: "success") == "success", "\(d.record())")
    #expect(try await d.protfs(["app", "process", AppDevice.bundle]).status == 0)
    #expect(await logged("cleanup started"))
    #expect(try await d.protfs(["app", "expire", AppDevice.bundle, Self.cleanup]).status == 0)
    #expect(await logged("cleanup expired"))

    // The refresh submitted itself again; terminated, the app is launched for it in the background.
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("notRunning"), "\(d.record())")
    let early = try await d.protfs(["app", "refresh", AppDevice.bundle])
    #expect(early.status == 1 && early.stderr.contains("may not begin before"), "\(early)")
    let relaunch = try await d.protfs(
      ["app", "refresh", AppDevice.bundle, "--now"], environment: ["PROTFS": d.protfsForApps])
    #expect(relaunch.status == 0 && relaunch.stdout.contains("in the background for its refresh task"), "\(relaunch)")
    defer { d.endApp() }
    #expect(await logged("launched, state background"))
    #expect(await logged("refresh ran main=false", times: 2))
    #expect(await lastTask(d, is: "success") == "success", "\(d.record())")
  }

  @Test func badRequestsAreOneClearError() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let outside = try await d.protfs(["app", "bgtask-submit", Self.refresh, "--refresh"])
    #expect(outside.status == 1 && outside.stderr.contains("works only inside an app"), "\(outside)")
    let both = try await d.protfs(["app", "bgtask-submit", Self.refresh, "--refresh", "--processing"])
    #expect(both.status == 64 && both.stderr.contains("one of --refresh and --processing"), "\(both)")
    let neither = try await d.protfs(["app", "bgtask-completed", Self.refresh])
    #expect(neither.status == 64 && neither.stderr.contains("--success and --failure"), "\(neither)")
    let never = try await d.protfs(["app", "refresh", AppDevice.bundle])
    #expect(never.status == 1 && never.stderr.contains("No refresh task request"), "\(never)")
    let expire = try await d.protfs(["app", "expire", AppDevice.bundle, Self.refresh])
    #expect(expire.status == 1 && expire.stderr.contains("is not running"), "\(expire)")
    let notApp = try await d.protfs(["app", "requests", "com.example.nope"])
    #expect(notApp.status == 1 && notApp.stderr.contains("has no container"), "\(notApp)")
    let plist = d.scripts + "/Bad.plist"
    try PropertyListSerialization.data(
      fromPropertyList: ["BGTaskSchedulerPermittedIdentifiers": "one"], format: .xml, options: 0
    ).write(to: URL(fileURLWithPath: plist))
    let bad = try await d.protfs(["app", "launch", AppDevice.bundle, "--info-plist", plist, "--", "/bin/true"])
    #expect(
      bad.status == 1 && bad.stderr.contains("BGTaskSchedulerPermittedIdentifiers that is not an array"), "\(bad)")
  }
}
