import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// Background fetch scheduled by the system, as on iOS (docs/semantics.md §8): only for an app
/// that asked (an interval, and `fetch` in its Info.plist's `UIBackgroundModes`), only in the
/// background, and no more often than the interval or `--fetch-minimum`.
@Suite(.serialized) struct FetchScheduleTests {
  @Test func anAppThatAskedIsFetchedInTheBackgroundAtMostOncePerMinimumAndNeverInTheForeground() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: ["fetch"])
    // FetchHelper asks for the minimum interval: --fetch-minimum decides the period.
    let app = try d.launch(
      ["--info-plist", plist, "--fetch-minimum", "400ms", "--suspend-after", "100ms"],
      [try d.installExample("FetchHelper")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready, fetch interval 0.0") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    // The app is suspended right after each fetch completes (as on iOS), so only the start of each
    // fetch is sure to be printed.
    let first = await app.line(containing: "fetching (state background)")
    let second = await app.line(containing: "fetching", after: "fetching")
    let third = await offPool { () -> Date? in
      let deadline = Date() + 20
      while Date() < deadline {
        if app.output.filter({ $0.hasPrefix("fetching") }).count >= 3 { return Date() }
        usleep(10_000)
      }
      return nil
    }
    #expect(first != nil && second != nil && third != nil, "\(app.output)")
    // Two periods of 400 ms, as the app saw its fetches start (its own uptime in each line):
    // unlimited, they would come every --suspend-after (about 0.2 s for two). 200 ms are allowed
    // for the app being woken later for the first than for the third on a loaded machine.
    let starts = app.output.filter { $0.hasPrefix("fetching") }.compactMap {
      Double($0.split(separator: " ").last ?? "")
    }
    #expect(starts.count >= 3 && starts[2] - starts[0] >= 0.6, "\(app.output)")
    let fetch = d.record()["lastFetch"] as? [String: Any]
    #expect(fetch?["result"] as? String == "newData", "\(d.record())")
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    let count = app.output.filter { $0.hasPrefix("fetching") }.count
    // A measured window, not a synchronisation: three periods in the foreground bring no fetch.
    try await Task.sleep(for: .milliseconds(1200))
    #expect(app.output.filter { $0.hasPrefix("fetching") }.count <= count + 1, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test(arguments: [["remote-notification"], []])
  func anAppWhoseInfoPlistDoesNotListFetchIsNeverFetchedByTheSystemButAppFetchStillWorks(modes: [String])
    async throws
  {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: modes)
    let app = try d.launch(
      ["--info-plist", plist, "--fetch-minimum", "100ms", "--suspend-after", "100ms"],
      [try d.installExample("FetchHelper")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    // A measured window: ten periods pass without a fetch.
    try await Task.sleep(for: .milliseconds(1000))
    #expect(!app.output.contains { $0.hasPrefix("fetching") }, "\(app.output)")
    // Xcode's Simulate Background Fetch works whatever the app declared.
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "fetching") != nil, "\(app.output)")
    #expect(await d.waitForFetchResult() == "newData", "\(d.record())")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func aShellAppSetsItsIntervalWithTheHelperCommandAndABadOneIsRefused() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = try d.infoPlist(modes: ["fetch"])
    let script = try d.script(
      "fetcher.sh",
      """
      #!/bin/sh
      "$PROTFS" app set-fetch-interval soon 2>&1; echo "bad: $?"
      "$PROTFS" app set-fetch-interval 0.3 && echo "interval set"
      while read -r line <&3; do
        case "$line" in
          *performFetch*) echo "fetch"; "$PROTFS" app fetch-completed noData ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
    let app = try d.launch(["--info-plist", plist, "--fetch-minimum", "100ms", "--suspend-after", "100ms"], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "is not a fetch interval") != nil, "\(app.output)")
    #expect(await app.line(containing: "bad: 64") != nil, "\(app.output)")
    #expect(await app.line(containing: "interval set") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "fetch") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }
}
