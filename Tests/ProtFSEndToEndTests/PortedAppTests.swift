import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// iOS app delegates ported by changing their imports alone (Examples/PortedApp in the Swift 5
/// language mode with `UIApplicationMain`, Examples/PortedMainApp in the Swift 6 mode with
/// `@main`), run with `protfs app launch`: that they build at all is half the test; these check
/// that they then see what a phone shows them (docs/semantics.md §8).
@Suite(.serialized) struct PortedAppTests {
  @Test func aPortedDelegateSeesTheMainThreadTheLifecycleInOrderTheSandboxAndMainThreadTimers() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let container = d.t.containerPath(AppDevice.bundle)
    let app = try d.launch(
      ["--background-time", "2s", "--suspend-after", "300ms"], [try d.installExample("PortedApp")])
    defer { app.stop() }
    #expect(await app.line(containing: "didBecomeActive state=0") != nil, "\(app.output)")
    #expect(await app.line(containing: "main operation main=true") != nil, "\(app.output)")
    let launch = Array(app.output.prefix(while: { !$0.hasPrefix("didBecomeActive") }))
    #expect(
      launch == [
        "willFinishLaunching options=0",
        "didFinishLaunching main=true state=1",
        "home \(container)",
        "tmp \(container)/tmp/",
        "bundle \(AppDevice.bundle)",
        "caches \(container)/Library/Caches",
        "documents \(container)/Documents",
        "support \(container)/Library/Application Support",
        "downloads class NSFileProtectionNone",
        "searchable true",
        "size unknown is -1",
      ], "\(app.output)")
    // The directory the app made is class none on the device, as the CLI reads it.
    let downloads = container + "/Library/Caches/com.apple.nsurlsessiond/Downloads/" + AppDevice.bundle
    let shown = try await d.protfs(["get-class", downloads])
    #expect(shown.stdout.hasPrefix("NSFileProtectionNone  own "), "\(shown.stdout)\(shown.stderr)")

    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "remaining read off the main thread: true") != nil, "\(app.output)")
    #expect(await app.line(containing: "expiring") != nil, "\(app.output)")
    #expect(await d.waitForState("suspended"), "\(app.output)")
    let background = app.output.drop(while: { !$0.hasPrefix("willResignActive") })
    #expect(background.first == "willResignActive", "\(app.output)")
    #expect(background.dropFirst().first == "didEnterBackground main=true", "\(app.output)")
    let ticks = background.filter { $0.hasPrefix("timer ") }
    // The timer fires every 200 ms on the main thread for the 2 s of background time (fewer on a
    // busy machine), with the time left going down.
    #expect(ticks.count >= 3, "\(app.output)")
    #expect(ticks.allSatisfy { $0.hasPrefix("timer main=true remaining ") }, "\(app.output)")
    let left = ticks.compactMap { Double($0.split(separator: " ").last ?? "") }
    #expect(left == left.sorted(by: >) && (left.first ?? 0) <= 2, "\(app.output)")

    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "willEnterForeground") != nil, "\(app.output)")
    #expect(await app.line(containing: "didBecomeActive state=0", after: "willEnterForeground") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (status, _) = await app.exit()
    #expect(status == 0, "\(app.output)")
    let end = Array(app.output.drop(while: { $0 != "willEnterForeground" }).filter { !$0.hasPrefix("timer ") })
    #expect(
      end == ["willEnterForeground", "didBecomeActive state=0", "willResignActive", "willTerminate"], "\(app.output)")
  }

  @Test func anAtMainDelegateRunsFromItsBundleWithTheInfoPlistItShips() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = d.scripts + "/Info.plist"
    let info: [String: Any] = [
      "CFBundleIdentifier": AppDevice.bundle, "CFBundleShortVersionString": "1.2", "UIBackgroundModes": ["fetch"],
      "UIDeviceFamily": [1, 2],
    ]
    try PropertyListSerialization.data(fromPropertyList: info, format: .binary, options: 0).write(
      to: URL(fileURLWithPath: plist))
    let example = try d.installExample("PortedMainApp")
    let app = try d.launch(["--info-plist", plist], [example])
    defer { app.stop() }
    #expect(
      await app.line(containing: "didFinishLaunching main=true bundle \(AppDevice.bundle)") != nil, "\(app.output)")
    #expect(await app.line(containing: "main queue main=true") != nil, "\(app.output)")
    #expect(await app.line(containing: "didBecomeActive") != nil, "\(app.output)")
    #expect(app.output.contains("library \(d.t.containerPath(AppDevice.bundle))/Library"), "\(app.output)")
    let installed = d.root + "/Bundles/\(AppDevice.bundle).app/Info.plist"
    let read = FileManager.default.contents(atPath: installed).flatMap {
      try? PropertyListSerialization.propertyList(from: $0, format: nil) as? [String: Any]
    }
    #expect(read?["CFBundleShortVersionString"] as? String == "1.2")
    #expect(read?["UIBackgroundModes"] as? [String] == ["fetch"])
    #expect(read?["CFBundleExecutable"] as? String == "PortedMainApp")
    // Installed as it was given: the integers stay integers (1 is not true).
    let text = String(decoding: FileManager.default.contents(atPath: installed) ?? Data(), as: UTF8.self)
    #expect(text.contains("<integer>1</integer>") && text.contains("<integer>2</integer>"), "\(text)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (status, _) = await app.exit()
    #expect(status == 0, "\(app.output)")
    #expect(app.output.last == "willTerminate", "\(app.output)")

    // A later launch without --info-plist keeps the installed one, as an installed app keeps its own.
    // It is started through a symlink, and after a launch killed while it built the bundle: the
    // bundle holds the program itself, and the leftovers are gone.
    let leftover = d.root + "/Bundles/.\(AppDevice.bundle).app.99999"
    try FileManager.default.createDirectory(atPath: leftover, withIntermediateDirectories: false)
    try Data("partial".utf8).write(to: URL(fileURLWithPath: leftover + "/PortedMainApp"))
    let link = d.scripts + "/ported-link"
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: example)
    let again = try d.launch([], [link])
    defer { again.stop() }
    #expect(await again.line(containing: "didBecomeActive") != nil, "\(again.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await again.exit()
    let kept = FileManager.default.contents(atPath: installed).flatMap {
      try? PropertyListSerialization.propertyList(from: $0, format: nil) as? [String: Any]
    }
    #expect(kept?["CFBundleShortVersionString"] as? String == "1.2")
    // Nothing of the staging is left beside the bundle.
    let entries = try FileManager.default.contentsOfDirectory(atPath: d.root + "/Bundles")
    #expect(entries == ["\(AppDevice.bundle).app"])
    let program = d.root + "/Bundles/\(AppDevice.bundle).app/ported-link"
    #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: program)) == nil)
    #expect(FileManager.default.contents(atPath: program) == FileManager.default.contents(atPath: example))
  }

  @Test(arguments: [
    ("data", "Upload tasks from NSData are not supported in background sessions."),
    ("stream", "Upload tasks in background sessions must be from a file"),
  ])
  func aDataOrStreamUploadInABackgroundSessionStopsTheAppWithACrashReportAsOnIOS(kind: String, reason: String)
    async throws
  {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endAppAndSessionService() }
    let app = try d.launch([], [try d.installExample("MisusedUpload"), kind])
    defer { app.stop() }
    let (status, _) = await app.exit()
    #expect(status == 128 + SIGABRT, "\(app.output)")
    #expect(app.output.contains("uploading from \(kind)") && !app.output.contains("not reached"), "\(app.output)")
    let report = try #require(d.crashReports().first, "no crash report")
    #expect(report["terminationReason"] as? String == "EXC_CRASH (SIGABRT)")
    #expect(
      report["reason"] as? String
        == "*** Terminating app due to uncaught exception 'NSGenericException', reason: '\(reason)'", "\(report)")
    #expect(d.record()["state"] as? String == "notRunning")
  }

  @Test(arguments: [
    ("garbage", "not a property list"),
    ("array", "not a dictionary"),
    ("other-bundle", "names the bundle 'com.example.other', not 'com.example.app'"),
    ("missing", "Cannot read the Info.plist"),
    ("modes", "UIBackgroundModes that is not an array of strings"),
    ("empty", "is empty"),
    ("directory", "Is a directory"),
    // A FIFO that no program writes to once kept the launch waiting in open(2) for ever.
    ("fifo", "nothing came through it within 10 s"),
  ])
  func aBadInfoPlistIsRefusedNamingItAndNothingIsInstalled(kind: String, message: String) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let plist = d.scripts + "/Info.plist"
    let contents: Data? =
      switch kind {
      case "garbage": Data("<plist><dict><key>x</key>".utf8)
      case "array": try PropertyListSerialization.data(fromPropertyList: ["a"], format: .xml, options: 0)
      case "other-bundle":
        try PropertyListSerialization.data(
          fromPropertyList: ["CFBundleIdentifier": "com.example.other"], format: .xml, options: 0)
      case "modes":
        try PropertyListSerialization.data(fromPropertyList: ["UIBackgroundModes": "fetch"], format: .xml, options: 0)
      case "empty": Data()
      default: nil
      }
    if let contents { try contents.write(to: URL(fileURLWithPath: plist)) }
    if kind == "directory" { mkdir(plist, 0o755) }
    if kind == "fifo" { mkfifo(plist, 0o600) }
    let result = try await d.protfs(
      ["app", "launch", AppDevice.bundle, "--info-plist", plist, "--", try d.installExample("PortedMainApp")])
    #expect(result.status != 0)
    #expect(result.stderr.contains(message), "\(result.stderr)")
    #expect(result.stderr.contains(plist), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: d.root + "/Bundles"))
    #expect(d.record()["state"] as? String != "active")
  }

  /// Networking code as iOS apps write it (Examples/NetworkClient, Swift 5 mode, ported by its
  /// imports) runs as on a phone against a loopback server: its delegate answers the Basic
  /// challenge, the login's cookie goes back, the upload reports its progress, the body's lines
  /// arrive, the archive becomes a download, and every task's metrics come.
  @Test func networkingCodeAsIOSAppsWriteItRunsUnchanged() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let example = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().appendingPathComponent(
      "NetworkClient")
    let result = try await Protfs.runProgram(example.path, [server.url("").absoluteString])
    #expect(result.status == 0, "\(result)")
    let lines = result.stdout.split(separator: "\n").map(String.init)
    #expect(lines.first == "profile 200 after 1 challenge(s)", "\(lines)")
    #expect(lines.contains("cookie sent: session=s3cr3t"), "\(lines)")
    let uploaded = lines.first { $0.hasPrefix("uploaded ") } ?? ""
    let parts = uploaded.split(separator: " ")
    #expect(parts.count > 3 && parts[1] == parts[3] && uploaded.hasSuffix("progress 1.0"), "\(lines)")
    #expect(lines.contains("event lines: 1"), "\(lines)")
    #expect(lines.contains("became a download"), "\(lines)")
    #expect(lines.contains { $0.hasPrefix("archive ") && $0 != "archive 0 bytes" && $0 != "archive -1 bytes" })
    // The profile, login, me, upload and archive tasks (the data task that became a download ends
    // as the download); the lines were read through the shared session, which has no delegate.
    #expect(lines.last == "metrics for 5 tasks", "\(lines)")
    #expect(!lines.contains { $0.hasPrefix("failed") }, "\(lines)")
  }

  /// Xcode's UIKit template (Examples/SceneApp: an @main app delegate and a scene delegate its
  /// Info.plist names, `$(PRODUCT_MODULE_NAME)` and all) runs as a scene-based app on iOS 13 and
  /// later: launched in the foreground it connects its scene, whose delegate gets the lifecycle
  /// (the app delegate's active and background calls are not made); launched in the background
  /// (a fetch) it gets its scene only when it first comes to the foreground.
  @Test func xcodesSceneTemplateGetsTheSceneLifecycle() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let manifest: [String: Any] = [
      "UIApplicationSupportsMultipleScenes": false,
      "UISceneConfigurations": [
        "UIWindowSceneSessionRoleApplication": [
          [
            "UISceneConfigurationName": "Default Configuration",
            "UISceneDelegateClassName": "$(PRODUCT_MODULE_NAME).SceneDelegate",
          ]
        ]
      ],
    ]
    let plist = try d.infoPlist(modes: ["fetch"], ["UIApplicationSceneManifest": manifest])
    let example = try d.installExample("SceneApp")
    let app = try d.launch(["--info-plist", plist, "--suspend-after", "60s"], [example])
    defer { app.stop() }
    #expect(await app.line(containing: "sceneDidBecomeActive") != nil, "\(app.output)")
    let launch = app.output.filter { !$0.hasPrefix("device token") }
    #expect(
      launch == [
        "didFinishLaunching state=1", "configurationForConnecting",
        "willConnectTo UIWindowSceneSessionRoleApplication windows=1", "sceneWillEnterForeground",
        "sceneDidBecomeActive state=0",
      ], "\(app.output)")
    #expect(await app.line(containing: "device token of 32 bytes") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "saving, expired=false") != nil, "\(app.output)")
    let background = Array(app.output.drop { !$0.hasPrefix("sceneWillResignActive") }.prefix(3))
    #expect(
      background == ["sceneWillResignActive", "sceneDidEnterBackground", "notification didEnterBackground"],
      "\(app.output)")
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "sceneDidBecomeActive", after: "sceneWillEnterForeground") != nil)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "applicationWillTerminate") != nil, "\(app.output)")
    _ = await app.exit()
    #expect(!app.output.contains { $0.hasPrefix("application") && $0 != "applicationWillTerminate" }, "\(app.output)")

    // Launched in the background for a fetch: no scene until the app comes to the foreground.
    let fetched = try d.launch(
      ["--info-plist", plist, "--for-fetch", "--suspend-after", "60s"], [example])
    defer { fetched.stop() }
    #expect(await fetched.line(containing: "didFinishLaunching state=2") != nil, "\(fetched.output)")
    #expect(await d.waitForFetchResult() != nil, "\(d.record())")
    #expect(!fetched.output.contains { $0.hasPrefix("willConnectTo") || $0.hasPrefix("scene") }, "\(fetched.output)")
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await fetched.line(containing: "sceneDidBecomeActive") != nil, "\(fetched.output)")
    let connected = Array(fetched.output.drop { !$0.hasPrefix("configurationForConnecting") }.prefix(4))
    #expect(
      connected == [
        "configurationForConnecting", "willConnectTo UIWindowSceneSessionRoleApplication windows=1",
        "sceneWillEnterForeground", "sceneDidBecomeActive state=0",
      ], "\(fetched.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await fetched.exit()
  }

  /// An app delegate that inherits from NSObject, not UIResponder (Examples/LegacyDelegate, as
  /// code before Xcode's UIResponder template declares it), started by UIApplicationMain: UIKit
  /// makes it with its init(), and so does ProtFSKit. Its UILocalNotifications are shown as
  /// UserNotifications shows a notification (a line on standard error), once the user allowed them.
  @Test func anNSObjectDelegateIsMadeWithItsInitAndRunsAndItsLocalNotificationsAreShown() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let example = try d.installExample("LegacyDelegate")
    // The notifications are on the app's standard error: the test reads it with its output.
    let program = try d.script("legacy-delegate.sh", "#!/bin/sh\nexec \"\(example)\" \"$@\" 2>&1\n")
    let app = try d.launch([], [program])
    defer { app.stop() }
    #expect(await app.line(containing: "didBecomeActive state=0") != nil, "\(app.output)")
    #expect(app.output.first == "didFinishLaunching AppDelegate made by init(), launch 1", "\(app.output)")
    #expect(await app.line(containing: "none scheduled") != nil, "\(app.output)")
    let told = app.output.filter { !$0.hasPrefix("didBecomeActive") && !$0.hasPrefix("didFinishLaunching") }
    #expect(
      told == [
        "didRegister types=7", #"notification "Downloads": report.pdf finished"#, "scheduled 2",
        "scheduled after cancelling 1", "badge 3", #"notification "": reminder"#, "none scheduled",
      ], "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (status, _) = await app.exit()
    #expect(status == 0, "\(app.output)")
    #expect(app.output.last == "willTerminate", "\(app.output)")
  }
}
