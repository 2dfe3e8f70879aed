import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs app push`, `xcrun simctl push`'s verb: a silent remote notification wakes a suspended
/// app, or launches one that is not running, with its payload as userInfo; a visible one reaches
/// only an active app; a payload that is no APNs payload is one clear error.
@Suite struct AppPushTests {
  /// A shell app that prints each remote notification's payload and completes it.
  func pushApp(_ d: AppDevice) throws -> String {
    try d.script(
      "pushed.sh",
      """
      #!/bin/sh
      echo ready
      while read -r line <&3; do
        case "$line" in
          *didReceiveRemoteNotification*) echo "$line"; echo completing; "$PROTFS" app push-completed newData ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
  }

  func payload(_ d: AppDevice, _ name: String, _ text: String) throws -> String {
    let path = d.scripts + "/" + name
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
  }

  @Test func aSilentPushWakesTheSuspendedAppWithItsPayloadAndItIsSuspendedAgain() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--suspend-after", "200ms"], [try pushApp(d)])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    let silent = try payload(d, "silent.json", #"{"aps": {"content-available": 1}, "url": "https://example.com/new"}"#)
    let pushed = try await d.protfs(["app", "push", AppDevice.bundle, silent])
    #expect(pushed.status == 0 && pushed.stdout.isEmpty, "\(pushed)")
    let line = await app.line(containing: "didReceiveRemoteNotification")
    #expect(
      line?.0.contains(#""userInfo":{"aps":{"content-available":1},"url":"https://example.com/new"}"#) == true,
      "\(app.output)")
    #expect(await app.line(containing: "completing") != nil, "\(app.output)")
    #expect(await d.waitForState("suspended"), "\(d.record())")
    // Without content-available the notification is shown, and the suspended app stays so.
    let visible = try payload(d, "visible.json", #"{"aps": {"alert": "Hello"}}"#)
    let shown = try await d.protfs(["app", "push", AppDevice.bundle, visible])
    #expect(shown.status == 0 && shown.stdout.contains("the notification is shown"), "\(shown)")
    #expect(d.record()["state"] as? String == "suspended")
  }

  @Test func aSilentPushLaunchesAnAppNotRunningUnlessTheUserForceQuitIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try pushApp(d)
    let silent = try payload(d, "silent.json", #"{"aps": {"content-available": 1}, "token": "s3cret-push-token"}"#)
    #expect(try await d.protfs(["app", "push", AppDevice.bundle, silent]).stderr.contains("never launched"))
    let first = try await d.protfs(["app", "launch", AppDevice.bundle, "--schedule", "terminate@50ms", "--", script])
    #expect(first.status == 0, "\(first)")
    #expect(await d.waitForState("notRunning"), "\(d.record())")
    let pushed = try await d.protfs(
      ["app", "push", AppDevice.bundle, silent], environment: ["PROTFS": d.protfsForApps])
    #expect(pushed.status == 0 && pushed.stdout.contains("in the background for the notification"), "\(pushed)")
    defer { d.endApp() }
    // Launched for the push, the app never came to the foreground.
    #expect(await d.waitForState("background") || d.record()["state"] as? String == "suspended", "\(d.record())")
    // The payload never stood on a command line, which every user reads (issue 61), and the file
    // that carried it to the launch is gone.
    let commandLines = try FileManager.default.contentsOfDirectory(atPath: "/proc").filter { Int($0) != nil }.compactMap
    {
      FileManager.default.contents(atPath: "/proc/\($0)/cmdline").map { String(decoding: $0, as: UTF8.self) }
    }
    #expect(!commandLines.contains { $0.contains("s3cret-push-token") })
    #expect(commandLines.contains { $0.contains("--for-push\u{0}@push-") }, "the launch names the payload's file")
    let state = try FileManager.default.contentsOfDirectory(atPath: d.root + "/.protfs")
    #expect(!state.contains { $0.hasPrefix("push-") }, "\(state)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    #expect(await d.waitForState("notRunning"))
    let refused = try await d.protfs(["app", "push", AppDevice.bundle, silent])
    #expect(refused.status == 1 && refused.stderr.contains("force-quit"), "\(refused)")
  }

  @Test func withAPushLimitTheSystemHoldsTheSilentPushesOverIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--push-limit", "1"], [try pushApp(d)])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    let silent = try payload(d, "silent.json", #"{"aps": {"content-available": 1}}"#)
    #expect(try await d.protfs(["app", "push", AppDevice.bundle, silent]).status == 0)
    #expect(await app.line(containing: "completing") != nil, "\(app.output)")
    let held = try await d.protfs(["app", "push", AppDevice.bundle, silent])
    #expect(held.status == 0 && held.stdout.contains("the notification is held"), "\(held)")
    let bad = try await d.protfs(["app", "launch", AppDevice.bundle, "--push-limit", "0", "--", "/bin/true"])
    #expect(bad.status == 64 && bad.stderr.contains("'0' is not a count"), "\(bad)")
  }

  @Test func aScheduledPushIsASilentOneAtItsTime() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let app = try d.launch(["--schedule", "background@50ms,push@400ms"], [try pushApp(d)])
    defer { app.stop() }
    let line = await app.line(containing: "didReceiveRemoteNotification")
    #expect(line?.0.contains(#""userInfo":{"aps":{"content-available":1}}"#) == true, "\(app.output)")
    #expect(await app.line(containing: "completing") != nil, "\(app.output)")
    let exec = try await d.protfs(["exec", "--schedule", "push@1s", "--", "/bin/true"])
    #expect(exec.status == 64 && exec.stderr.contains("needs an app"), "\(exec)")
  }

  @Test func aPayloadThatIsNoAPNsPayloadIsOneClearErrorNamingIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let cases: [(String, String)] = [
      ("{", "is not JSON"), (#"{"alert": "x"}"#, #"it needs an "aps" dictionary"#),
      (#"{"aps": {}, "pad": ""# + String(repeating: "x", count: 5_000) + #""}"#, "APNs delivers at most 4096 bytes"),
    ]
    for (index, (text, message)) in cases.enumerated() {
      let path = try payload(d, "bad\(index).json", text)
      let result = try await d.protfs(["app", "push", AppDevice.bundle, path])
      #expect(result.status == 1 && result.stderr.contains(message) && result.stderr.contains(path), "\(result)")
    }
    let stdin = try await d.protfs(["app", "push", AppDevice.bundle, "-"])
    #expect(stdin.status == 1 && stdin.stderr.contains("standard input"), "\(stdin)")
    let missing = try await d.protfs(["app", "push", AppDevice.bundle, d.scripts + "/none.json"])
    #expect(missing.status == 1 && missing.stderr.contains("Cannot read the payload"), "\(missing)")
    let notApp = try await d.protfs(["app", "push", "com.example.nope", d.scripts + "/none.json"])
    #expect(notApp.status == 1 && notApp.stderr.contains("has no container"), "\(notApp)")
    let outside = try await d.protfs(["app", "push-completed", "newData"])
    #expect(outside.status == 1 && outside.stderr.contains("works only inside an app"), "\(outside)")
  }
}
