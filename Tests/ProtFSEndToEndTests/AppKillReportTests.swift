import Foundation
import ProtFSTestSupport
import Testing

/// An app the watchdog kills says so (issue 64): one line on the launch's stderr with the reason
/// and the crash report's path, `app status` with both (text and JSON), and a task begun without a
/// name is named after its caller in the report.
@Suite struct AppKillReportTests {
  @Test func theWatchdogsKillIsSaidWithItsReasonAndCrashReport() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let script = try d.script(
      "unnamed.sh",
      """
      #!/bin/sh
      while read -r line <&"$PROTFS_APP_EVENTS_FD"; do
        case "$line" in *didEnterBackground*) "$PROTFS" app begin-task || exit 3 ;; esac
      done
      """)
    let launched = try await d.protfs(
      ["app", "launch", AppDevice.bundle, "--background-time", "1s", "--schedule", "background@100ms", "--", script],
      environment: ["PROTFS": d.protfsForApps])
    #expect(launched.status == 137, "\(launched)")
    let report = try #require(d.crashReports().first, "no crash report")
    #expect(report["openTasks"] as? [String] == ["Called by unnamed.sh"], "\(report)")
    let reason = "background tasks were still open when the background time (1 s) ran out"
    #expect(report["reason"] as? String == reason, "\(report)")

    // One line on stderr: who, why, the reason's code and the report's path.
    let said = launched.stderr.split(separator: "\n").filter { $0.hasPrefix("protfs: ") }
    #expect(said.count == 1, "\(launched)")
    let line = String(said.first ?? "")
    let prefix = "protfs: \(AppDevice.bundle) was killed: \(reason) (0x8badf00d); crash report: "
    #expect(line.hasPrefix(prefix), "\(line)")
    let path = String(line.dropFirst(prefix.count))
    #expect(path.contains("/.protfs/crash-reports/") && FileManager.default.fileExists(atPath: path), "\(path)")

    let status = try await d.protfs(["app", "status", AppDevice.bundle])
    #expect(
      status.stdout.contains("last exit status 137; was killed: \(reason) (0x8badf00d); crash report: \(path)"),
      "\(status)")
    let json = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
    let entry = (try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]])?.first
    let crash = entry?["lastCrash"] as? [String: Any]
    #expect(crash?["killed"] as? Bool == true, "\(json)")
    #expect(crash?["terminationReason"] as? String == "0x8badf00d", "\(json)")
    #expect(crash?["reason"] as? String == reason, "\(json)")
    #expect(crash?["crashReport"] as? String == path, "\(json)")

    // A run that ends by itself clears it.
    let clean = try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"])
    #expect(clean.status == 0 && !clean.stderr.contains("was killed"), "\(clean)")
    let after = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
    let cleared = (try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [[String: Any]])?.first
    #expect(cleared?["lastCrash"] is NSNull, "\(after)")
  }

  /// A crash is said the same way, as a crash rather than a kill.
  @Test func aCrashIsSaidWithItsExceptionTypeAndCrashReport() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("crashing.sh", "#!/bin/sh\nkill -SEGV $$\n")
    let launched = try await d.protfs(["app", "launch", AppDevice.bundle, "--", script])
    #expect(launched.status == 128 + SIGSEGV, "\(launched)")
    let prefix =
      "protfs: \(AppDevice.bundle) crashed: Namespace SIGNAL, Code 11, Segmentation fault: 11 "
      + "(EXC_BAD_ACCESS (SIGSEGV)); crash report: "
    let line = launched.stderr.split(separator: "\n").first { $0.hasPrefix("protfs: ") }.map(String.init) ?? ""
    #expect(line.hasPrefix(prefix), "\(launched)")
    #expect(FileManager.default.fileExists(atPath: String(line.dropFirst(prefix.count))), "\(line)")
    let status = try await d.protfs(["app", "status", AppDevice.bundle])
    #expect(status.stdout.contains("crashed: Namespace SIGNAL, Code 11"), "\(status)")
  }
}
