import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// simctl's verbs for an app's container and the apps on the device: `protfs app container` prints
/// a path a script can `cd` into, `protfs app list` names every app with its state.
@Suite struct AppContainerTests {
  @Test func containerPrintsEachKindsPathAndOnlyThat() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let container = d.root + "/Containers/" + AppDevice.bundle
    let expected = [
      "": container, "data": container, "documents": container + "/Documents",
      "caches": container + "/Library/Caches", "tmp": container + "/tmp",
      "downloads": container + "/Library/Caches/com.apple.nsurlsessiond/Downloads/" + AppDevice.bundle,
    ]
    for (kind, path) in expected {
      let result = try await d.protfs(["app", "container", AppDevice.bundle] + (kind.isEmpty ? [] : [kind]))
      #expect(result.status == 0 && result.stdout == path + "\n" && result.stderr.isEmpty, "\(kind): \(result)")
    }
    // The path of a directory that does not exist yet is printed too; nothing is made.
    #expect(!FileManager.default.fileExists(atPath: expected["downloads"]!))
  }

  @Test func aKindOrAnAppThatIsNotThereIsOneClearError() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let kind = try await d.protfs(["app", "container", AppDevice.bundle, "document"])
    #expect(kind.status == 64 && kind.stdout.isEmpty, "\(kind)")
    #expect(kind.stderr.contains("'document' is not a kind of container directory"), "\(kind)")
    #expect(kind.stderr.contains("Did you mean 'documents'?"), "\(kind)")
    let app = try await d.protfs(["app", "container", "com.example.nope"])
    #expect(app.status == 1 && app.stdout.isEmpty, "\(app)")
    #expect(app.stderr.contains("The app com.example.nope has no container") && app.stderr.contains("init"), "\(app)")
    let bad = try await d.protfs(["app", "container", "not a bundle id"])
    #expect(bad.status == 64, "\(bad)")
  }

  @Test func listNamesEveryAppWithItsStateContainerBundleAndClass() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    #expect(try await d.protfs(["init", "com.example.other", "--default-class", "none"]).status == 0)
    // Launched once, the Swift app has its bundle; while it runs, it is active.
    let app = try d.launch([], [try d.installExample("BackgroundRunner")])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    let running = try await d.protfs(["app", "list"])
    #expect(running.stdout.contains("\(AppDevice.bundle)    active"), "\(running)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
    let text = try await d.protfs(["app", "list"])
    #expect(text.status == 0, "\(text)")
    let lines = text.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true) }
    #expect(
      lines.map { $0.map(String.init) } == [
        [AppDevice.bundle, "notRunning", d.root + "/Containers/" + AppDevice.bundle],
        ["com.example.other", "notRunning", d.root + "/Containers/com.example.other"],
      ], "\(text)")

    let json = try await d.protfs(["app", "list", "--json"])
    #expect(json.status == 0, "\(json)")
    let entries = try #require(try JSONSerialization.jsonObject(with: json.stdoutBytes) as? [[String: Any]])
    #expect(entries.map { $0["bundleID"] as? String } == [AppDevice.bundle, "com.example.other"])
    #expect(entries.allSatisfy { Set($0.keys) == ["bundleID", "state", "container", "bundle", "defaultClass"] })
    #expect(entries[0]["bundle"] as? String == d.root + "/Bundles/" + AppDevice.bundle + ".app", "\(json)")
    #expect(entries[1]["bundle"] is NSNull, "\(json)")
    #expect(entries[1]["defaultClass"] as? String == "none", "\(json)")
  }

  @Test func listOnADeviceWithoutAppsSaysHowToMakeOne() async throws {
    let t = try TestDevice()
    let result = try await Protfs.run(["--device", t.root, "app", "list"])
    #expect(result.status == 0 && result.stdout.contains("protfs init BUNDLE-ID"), "\(result)")
    let json = try await Protfs.run(["--device", t.root, "app", "list", "--json"])
    #expect(json.status == 0 && json.output.filter { !$0.isWhitespace } == "[]", "\(json)")
  }
}
