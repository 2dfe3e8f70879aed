import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// The background modes that keep an app running, as on iOS (docs/semantics.md §8): audio playing
/// in a playback session, and background location updates, each only with its mode in the
/// Info.plist's UIBackgroundModes; `protfs app location` sets the device's location as
/// `simctl location set` does.
@Suite struct AppBackgroundModeTests {
  @Test func aSwiftAppPlayingSilentAudioRunsInTheBackgroundUntilItStops() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: ["audio"])
    let app = try d.launch(
      ["--info-plist", plist, "--suspend-after", "200ms"], [try d.installExample("KeepAlive")])
    defer { app.stop() }
    #expect(await app.line(containing: "playing true") != nil, "\(app.output)")
    let before = app.output.compactMap { $0.hasPrefix("tick ") ? Int($0.dropFirst(5)) : nil }.max() ?? 0
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    // Its timer still fires well after the suspension (200 ms) would have come: 15 ticks of 100 ms.
    let (_, background) = try #require(await app.line(containing: "tick \(before + 1)"))
    let late = await app.line(containing: "tick \(before + 16)")
    #expect(late.map { $0.1.timeIntervalSince(background) > 1 } == true, "\(app.output.suffix(5))")
    #expect(d.record()["state"] as? String == "background", "\(d.record())")
    let moved = try await d.protfs(["app", "location", AppDevice.bundle, "0,0"])
    #expect(moved.status == 0, "\(moved)")
    #expect(await app.line(containing: "location 0.0,0.0") != nil, "\(app.output.suffix(5))")
    #expect(await app.line(containing: "stopped playing") != nil)
    #expect(await d.waitForState("suspended"), "\(d.record())")
  }

  /// A shell app that starts `updates` location updates and prints each location.
  func locatedApp(_ d: AppDevice, _ updates: String) throws -> String {
    try d.script(
      "located.sh",
      """
      #!/bin/sh
      "$PROTFS" app audio play 2>&1 | sed 's/^/audio: /'
      "$PROTFS" app audio stop
      "$PROTFS" app location-updates \(updates)
      echo ready
      while read -r line <&3; do
        case "$line" in
          *didUpdateLocations*) echo "$line" ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
  }

  @Test func backgroundLocationUpdatesKeepAShellAppRunningAndGetARoute() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: ["location"])
    let app = try d.launch(["--info-plist", plist, "--suspend-after", "200ms"], [try locatedApp(d, "background")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    // Without the audio mode, playing keeps nothing running, and the app is told so.
    #expect(
      app.output.contains { $0.hasPrefix("audio: Warning:") && $0.contains("does not list audio") }, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    let route = d.scripts + "/route.csv"
    try "# a walk\n48.8584,2.2945\n\n48.8606,2.3376\n-33.8568,151.2153\n".write(
      toFile: route, atomically: true, encoding: .utf8)
    let played = try await d.protfs(["app", "location", AppDevice.bundle, "--file", route, "--every", "50ms"])
    #expect(played.status == 0 && played.stdout.isEmpty, "\(played)")
    #expect(await app.line(containing: #""latitude":-33.8568,"longitude":151.2153"#) != nil, "\(app.output)")
    #expect(app.output.filter { $0.contains("didUpdateLocations") }.count == 3, "\(app.output)")
    #expect(d.record()["state"] as? String == "background", "\(d.record())")
  }

  @Test func foregroundUpdatesLetTheAppBeSuspendedAndBadLocationsAreOneClearError() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let notRunning = try await d.protfs(["app", "location", AppDevice.bundle, "1,2"])
    #expect(notRunning.status == 1 && notRunning.stderr.contains("is not running"), "\(notRunning)")
    let app = try d.launch(["--suspend-after", "200ms"], [try locatedApp(d, "foreground")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "location", AppDevice.bundle, "10.5,20.25"]).status == 0)
    #expect(await app.line(containing: #""latitude":10.5,"longitude":20.25"#) != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"), "\(d.record())")
    let suspended = try await d.protfs(["app", "location", AppDevice.bundle, "1,2"])
    #expect(suspended.status == 0 && suspended.stdout.contains("is suspended"), "\(suspended)")
    for bad in [["91,0"], ["north"], []] {
      let result = try await d.protfs(["app", "location", AppDevice.bundle] + bad)
      #expect(result.status == 64, "\(bad): \(result)")
    }
    let missing = try await d.protfs(["app", "location", AppDevice.bundle, "--file", d.scripts + "/none.csv"])
    #expect(missing.status == 1 && missing.stderr.contains("Cannot read the route"), "\(missing)")
    let huge = d.scripts + "/huge.csv"
    try Data(repeating: 0x30, count: 9 << 20).write(to: URL(fileURLWithPath: huge))
    let tooBig = try await d.protfs(["app", "location", AppDevice.bundle, "--file", huge])
    #expect(tooBig.status == 1 && tooBig.stderr.contains("is larger than"), "\(tooBig.stderr)")
  }
}
