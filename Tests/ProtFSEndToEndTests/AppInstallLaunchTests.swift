import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// simctl's `install` and `launch`: `protfs app install BUNDLE-ID -- CMD` keeps the app's command
/// and Info.plist, and `protfs app launch BUNDLE-ID` starts it detached, returning once it runs
/// with `BUNDLE-ID: PID`; `--wait` (or a command) keeps it in the foreground of the shell.
@Suite struct AppInstallLaunchTests {
  func loopingApp(_ d: AppDevice) throws -> String {
    try d.script(
      "looping.sh",
      """
      #!/bin/sh
      echo "ready as $PROTFS_APP_BUNDLE"
      while read -r line <&3; do
        echo "$line"
        case "$line" in *willTerminate*) exit 0 ;; esac
      done
      """)
  }

  @Test func anInstalledAppIsLaunchedDetachedAndTheCommandReturnsOnceItRuns() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try loopingApp(d)
    let never = try await d.protfs(["app", "launch", AppDevice.bundle])
    #expect(
      never.status == 1 && never.stderr.contains("is not installed") && never.stderr.contains("app install"), "\(never)"
    )
    let installed = try await d.protfs(["app", "install", AppDevice.bundle, "--", script])
    #expect(installed.status == 0 && installed.stdout.contains(script), "\(installed)")
    #expect(d.record()["lastLaunchCommand"] as? [String] == [script])
    let launched = try await d.protfs(["app", "launch", AppDevice.bundle, "--suspend-after", "300ms"])
    defer { d.endApp() }
    #expect(launched.status == 0, "\(launched)")
    // simctl's line: the bundle id and the app's pid, which the record shows running.
    let pid = Int(launched.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").last ?? "")
    #expect(launched.stdout.hasPrefix("\(AppDevice.bundle): ") && pid != nil, "\(launched)")
    #expect(d.record()["pid"] as? Int == pid && d.record()["state"] as? String == "active", "\(d.record())")
    #expect(kill(pid_t(pid ?? 0), 0) == 0)
    // The options given reach the launch: the app is suspended 300 ms after it enters the background.
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    let again = try await d.protfs(["app", "launch", AppDevice.bundle])
    #expect(again.status == 1 && again.stderr.contains("already running"), "\(again)")
    let reinstall = try await d.protfs(["app", "install", AppDevice.bundle, "--", script])
    #expect(reinstall.status == 1 && reinstall.stderr.contains("terminate it before installing"), "\(reinstall)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("notRunning"), "\(d.record())")
    let log = (try? String(contentsOfFile: d.root + "/.protfs/logs/\(AppDevice.bundle).log", encoding: .utf8)) ?? ""
    #expect(log.contains("ready as \(AppDevice.bundle)") && log.contains("didEnterBackground"), "\(log)")
  }

  /// `app terminate` returns once the app is gone, as simctl's does (issue 64): a launch right
  /// after it is never refused as "already running", and `app status` names the pid a launch
  /// printed as soon as it returned.
  @Test func terminateThenLaunchInALoopNeverFindsTheAppRunning() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    #expect(try await d.protfs(["app", "install", AppDevice.bundle, "--", try loopingApp(d)]).status == 0)
    for round in 1...5 {
      let launched = try await d.protfs(["app", "launch", AppDevice.bundle])
      try #require(launched.status == 0, "round \(round): \(launched)")
      let pid = Int(launched.stdout.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ").last ?? "")
      let status = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
      let entry = (try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])?.first
      #expect(pid != nil && entry?["pid"] as? Int == pid, "round \(round): \(launched.stdout) \(status.stdout)")
      let ended = try await d.protfs(["app", "terminate", AppDevice.bundle])
      try #require(ended.status == 0, "round \(round): \(ended)")
      #expect(d.record()["state"] as? String == "notRunning", "round \(round): \(d.record())")
    }
    // And a launch with a command, in the foreground, right after a terminate.
    let again = try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"])
    #expect(again.status == 0, "\(again)")
  }

  @Test func waitRunsTheInstalledAppHereAndAFailedStartIsOneClearError() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let quick = try d.script("quick.sh", "#!/bin/sh\necho \"quick $1\"\nexit 3\n")
    #expect(try await d.protfs(["app", "install", AppDevice.bundle, "--", quick, "one"]).status == 0)
    let waited = try await d.protfs(["app", "launch", AppDevice.bundle, "--wait"])
    #expect(waited.status == 3 && waited.stdout.contains("quick one"), "\(waited)")
    // The installed program is gone: the detached launch fails, saying why and where its log is.
    try FileManager.default.removeItem(atPath: quick)
    let failed = try await d.protfs(["app", "launch", AppDevice.bundle])
    #expect(
      failed.status == 1 && failed.stderr.contains("Cannot run '\(quick)'") && failed.stderr.contains(".protfs/logs/"),
      "\(failed)")
    let missing = try await d.protfs(["app", "install", AppDevice.bundle, "--", d.scripts + "/none"])
    #expect(missing.status == 1 && missing.stderr.contains("not an executable file"), "\(missing)")
    let noCommand = try await d.protfs(["app", "install", AppDevice.bundle])
    #expect(noCommand.status == 64 && noCommand.stderr.contains("Missing the command"), "\(noCommand)")
  }

  @Test func anInstalledInfoPlistServesTheSystemsLaunches() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: ["fetch"])
    let script = try loopingApp(d)
    #expect(try await d.protfs(["app", "install", AppDevice.bundle, "--info-plist", plist, "--", script]).status == 0)
    let info = try PropertyListSerialization.propertyList(
      from: Data(contentsOf: URL(fileURLWithPath: d.root + "/Bundles/\(AppDevice.bundle).app/Info.plist")), format: nil)
    #expect((info as? [String: Any])?["UIBackgroundModes"] as? [String] == ["fetch"], "\(info)")
    // Never launched by the user, an installed app is launched by the system for a fetch.
    let fetched = try await d.protfs(["app", "fetch", AppDevice.bundle], environment: ["PROTFS": d.protfsForApps])
    defer { d.endApp() }
    #expect(fetched.status == 0 && fetched.stdout.contains("in the background for a fetch"), "\(fetched)")
    // Running in the background for the fetch; or, when this test is resumed only after the
    // fetch's 30 s ran out (the cooperative pool of a loaded machine), the fetch it timed out.
    let launched = await d.waitForRecord { $0["state"] as? String == "background" || $0["lastFetch"] != nil }
    #expect(launched, "\(d.record())")
    #expect(d.record()["lastLaunchCommand"] as? [String] == [script])
  }
}
