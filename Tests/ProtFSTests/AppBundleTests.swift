import Foundation
import ProtFS
import ProtFSApp
import ProtFSTestSupport
import Testing

/// The app's bundle on the device: the Info.plist it was installed with serves its later launches,
/// read through descriptors that follow no link.
@Suite struct AppBundleTests {
  let t: TestDevice
  let bundleID: BundleID

  init() throws {
    t = try TestDevice(containers: ["com.example.app"])
    bundleID = try BundleID("com.example.app")
  }

  /// Writes `info` as an XML property list at `path`.
  func writePlist(_ info: [String: Any], to path: String) throws {
    try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)
      .write(to: URL(fileURLWithPath: path))
  }

  @Test func anInstalledInfoPlistServesTheNextLaunch() throws {
    let shipped = t.directory + "/Info.plist"
    try writePlist(["UIBackgroundModes": ["fetch"]], to: shipped)
    try AppBundle(bundleID: bundleID, infoPlist: shipped, device: t.device).install(nil, on: t.device)
    let later = try AppBundle(bundleID: bundleID, infoPlist: nil, device: t.device)
    #expect(later.backgroundModes == ["fetch"])
    #expect(later.info["CFBundleIdentifier"] as? String == "com.example.app")
  }

  /// The installed Info.plist is written by protfs's own encoder (the static Foundation protfs
  /// ships with could not write an array through PropertyListSerialization;
  /// `scripts/release-check.sh` runs that build): every kind of value comes back as given, and a
  /// 1 stays an integer, never a `<true/>`.
  @Test func everyKindOfValueIsInstalledAsGiven() throws {
    let shipped = t.directory + "/Info.plist"
    let when = Date(timeIntervalSince1970: 1_767_225_600)
    let info: [String: Any] = [
      "UIBackgroundModes": ["fetch", "processing"], "CFBundleURLTypes": [["CFBundleURLSchemes": ["x"]]],
      "One": 1, "Zero": 0, "Ratio": 1.5, "Flag": true, "Off": false, "When": when, "Blob": Data([0, 1, 2]),
      "Empty": [Any](),
    ]
    try writePlist(info, to: shipped)
    try AppBundle(bundleID: bundleID, infoPlist: shipped, device: t.device).install(nil, on: t.device)
    let installed = try String(contentsOfFile: t.root + "/Bundles/com.example.app.app/Info.plist", encoding: .utf8)
    #expect(installed.contains("<key>One</key>\n\t<integer>1</integer>"), "\(installed)")
    #expect(installed.contains("<key>Flag</key>\n\t<true/>"), "\(installed)")
    let later = try AppBundle(bundleID: bundleID, infoPlist: nil, device: t.device).info
    #expect(later["UIBackgroundModes"] as? [String] == ["fetch", "processing"])
    #expect((later["CFBundleURLTypes"] as? [[String: Any]])?.first?["CFBundleURLSchemes"] as? [String] == ["x"])
    #expect(
      (later["One"] as? NSNumber)?.int64Value == 1 && !(later["One"] is Bool && type(of: later["One"]!) == Bool.self))
    #expect(later["Ratio"] as? Double == 1.5 && later["Flag"] as? Bool == true && later["Off"] as? Bool == false)
    #expect(later["When"] as? Date == when && later["Blob"] as? Data == Data([0, 1, 2]))
    #expect((later["Empty"] as? [Any])?.isEmpty == true)
  }

  @Test func anInstalledInfoPlistSwappedForASymlinkIsNotFollowed() throws {
    let shipped = t.directory + "/Info.plist"
    try writePlist(["UIBackgroundModes": ["fetch"]], to: shipped)
    try AppBundle(bundleID: bundleID, infoPlist: shipped, device: t.device).install(nil, on: t.device)
    // A property list outside the device, granting what the app never declared.
    let outside = t.directory + "/granted.plist"
    try writePlist(["UIBackgroundModes": ["audio", "location"]], to: outside)
    let installed = t.path("Bundles/com.example.app.app/Info.plist")
    try FileManager.default.removeItem(atPath: installed)
    try #require(symlink(outside, installed) == 0)
    let later = try AppBundle(bundleID: bundleID, infoPlist: nil, device: t.device)
    #expect(later.backgroundModes == [], "\(later.info)")
    #expect(later.info["CFBundleIdentifier"] as? String == "com.example.app")
  }

  @Test func aBundleDirectorySwappedForASymlinkIsNotFollowed() throws {
    let elsewhere = t.directory + "/elsewhere.app"
    try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
    try writePlist(["UIBackgroundModes": ["audio"]], to: elsewhere + "/Info.plist")
    try FileManager.default.createDirectory(atPath: t.path("Bundles"), withIntermediateDirectories: false)
    try #require(symlink(elsewhere, t.path("Bundles/com.example.app.app")) == 0)
    let launched = try AppBundle(bundleID: bundleID, infoPlist: nil, device: t.device)
    #expect(launched.backgroundModes == [], "\(launched.info)")
  }

  /// A FIFO swapped in for the program (its directory is the app user's) is no Swift program,
  /// and the check never waits for a writer: root's launch would hang in the open.
  @Test func aFIFOInThePlaceOfTheProgramIsNoSwiftProgramAndIsNotWaitedFor() async throws {
    let fifo = t.directory + "/program"
    #expect(mkfifo(fifo, 0o644) == 0)
    // Bounded: a check that waits is ended by opening the FIFO for writing after 10 s, which
    // the test then reports.
    let checked = DispatchSemaphore(value: 0)
    let rescued = DispatchSemaphore(value: 0)
    Thread {
      if checked.wait(timeout: .now() + 10) == .timedOut {
        let fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
        if fd >= 0 { close(fd) }
        rescued.signal()
      }
    }.start()
    let swift = await offPool { AppBundle.isSwiftProgram(fifo) }
    checked.signal()
    #expect(!swift)
    #expect(rescued.wait(timeout: .now()) == .timedOut, "the check waited for a writer")
  }
}
