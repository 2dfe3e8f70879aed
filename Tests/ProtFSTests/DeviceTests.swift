import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

@Suite struct DeviceLocationTests {
  @Test func explicitWinsThenEnvironmentThenXDG() {
    let env = ["PROTFS_DEVICE": "/env/dev", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"]
    #expect(Device.locate(explicit: "/cli/dev", environment: env).root == "/cli/dev")
    #expect(Device.locate(explicit: nil, environment: env).root == "/env/dev")
    #expect(
      Device.locate(explicit: nil, environment: ["XDG_DATA_HOME": "/xdg", "HOME": "/home/u"]).root
        == "/xdg/protfs/device")
    #expect(Device.locate(explicit: nil, environment: ["HOME": "/home/u"]).root == "/home/u/.local/share/protfs/device")
    // XDG says a relative XDG_DATA_HOME is invalid and must be ignored.
    #expect(
      Device.locate(explicit: nil, environment: ["XDG_DATA_HOME": "rel", "HOME": "/h"]).root
        == "/h/.local/share/protfs/device")
  }

  @Test func resolvesPathsInsideAndRefusesOutside() throws {
    let device = Device(root: "/d/dev")
    #expect(try device.resolve("/d/dev/Containers/x").components == ["Containers", "x"])
    #expect(try device.resolve("Containers/./x/../y", currentDirectory: "/d/dev").components == ["Containers", "y"])
    #expect(try device.resolve("/d/dev").isRoot)
    for outside in ["/d/dev/../etc", "/d/devices", "/etc/passwd", "../x"] {
      #expect(throws: ProtFSError.self) { try device.resolve(outside, currentDirectory: "/d/dev") }
    }
    #expect(throws: ProtFSError.self) { try DevicePath("a/../b") }
    for path in [
      "/d/dev", "/d/dev/", "/d/dev/a/b", "/d/dev/a/../../dev/b", "/d/dev/..", "/d/devices", "/d", "/", "/etc",
    ] {
      #expect(device.contains(path) == ((try? device.resolve(path)) != nil), "\(path)")
    }
    #expect(Device(root: "/").contains("/etc"))
  }

  @Test(arguments: [
    ("/", "/"), ("/a", "/a"), ("/a/b", "/a/b"), ("/a/", "/a"), ("//a//b//", "/a/b"), ("/a/./b", "/a/b"),
    ("/a/.", "/a"), ("/a/..", "/"), ("/..", "/"), ("/a/../b", "/b"), ("/.a/..b/...", "/.a/..b/..."),
    ("a/b", "/base/a/b"), ("", "/base"),
  ])
  func normalizesLexically(path: String, expected: String) {
    #expect(Device.normalize(path, relativeTo: "/base") == expected)
  }
}

@Suite struct ContainerTests {
  @Test func initCreatesTheStandardLayoutWithTheDefaultClass() throws {
    let t = try TestDevice()
    let result = try t.device.createContainer(try BundleID("com.example.app"))
    #expect(result.created && result.defaultClass == .completeUntilFirstUserAuthentication)
    for dir in Container.standardDirectories {
      let path = t.containerPath("com.example.app", dir)
      var isDirectory: ObjCBool = false
      #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
      #expect(t.rawClass(path) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    }
    #expect(
      TestDevice.rawAttribute(t.containerPath("com.example.app"), AttributeName.defaultClass)
        == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    // Nothing is left in staging.
    #expect(try FileManager.default.contentsOfDirectory(atPath: t.path(".protfs/staging")).isEmpty)
  }

  @Test func secondInitKeepsContentsAndChangesOnlyAnExplicitDefault() throws {
    let t = try TestDevice(containers: ["com.example.app"])
    try t.writeFile(t.containerPath("com.example.app", "Documents/keep.txt"))
    let again = try t.device.createContainer(try BundleID("com.example.app"))
    #expect(!again.created && again.previousDefault == nil)
    let changed = try t.device.createContainer(try BundleID("com.example.app"), defaultClass: .complete)
    #expect(changed.previousDefault == .completeUntilFirstUserAuthentication && changed.defaultClass == .complete)
    #expect(FileManager.default.fileExists(atPath: t.containerPath("com.example.app", "Documents/keep.txt")))
  }

  @Test func staleStagingFromACrashedProcessIsRemoved() throws {
    let t = try TestDevice(containers: ["com.example.a"])
    // A pid that cannot be alive: above pid_max's default.
    let stale = t.path(".protfs/staging/com.example.b.99999999.1")
    try FileManager.default.createDirectory(atPath: stale + "/Documents", withIntermediateDirectories: true)
    try t.device.createContainer(try BundleID("com.example.c"))
    #expect(!FileManager.default.fileExists(atPath: stale))
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.b")))
  }

  @Test func initCacheMakesTheDownloadsDirectoryUnprotected() throws {
    let t = try TestDevice()
    let result = try t.device.initCache(try BundleID("com.example.app"))
    let expected =
      t.root + "/Containers/com.example.app/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"
    #expect(result.path == expected && result.containerCreated && result.created)
    #expect(t.rawClass(expected) == "NSFileProtectionNone")
    // Directories created on the way take their parent's class.
    #expect(
      t.rawClass(t.containerPath("com.example.app", "Library/Caches/com.apple.nsurlsessiond"))
        == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    let again = try t.device.initCache(try BundleID("com.example.app"))
    #expect(!again.created && !again.containerCreated && again.previousClass == nil)
    let changed = try t.device.initCache(
      try BundleID("com.example.app"), protectionClass: .completeUntilFirstUserAuthentication)
    #expect(changed.previousClass == EffectiveClass(.none, .own))
    #expect(t.rawClass(expected) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
  }

  /// nsurlsessiond's Downloads directory itself: made with the class, and given it when it had
  /// taken one too strong for background downloads (a container whose default is complete,
  /// where a download made the directories before init-cache ran).
  @Test func initCacheUnprotectsTheDownloadsDirectoryAboveTheSessionDirectory() throws {
    let t = try TestDevice()
    let app = try BundleID("com.example.app")
    let downloads = "Library/Caches/com.apple.nsurlsessiond/Downloads"
    let fresh = try t.device.initCache(app)
    #expect(t.rawClass(t.containerPath(app.rawValue, downloads)) == "NSFileProtectionNone")
    #expect(fresh.downloadsParentPreviousClass == nil)
    let other = try BundleID("com.example.complete")
    try t.device.createContainer(other, defaultClass: .complete)
    _ = try t.device.createDirectories(t.device.container(other).downloadsPath)
    let fixed = try t.device.initCache(other)
    #expect(fixed.downloadsParentPreviousClass?.protectionClass == .complete)
    #expect(t.rawClass(t.containerPath(other.rawValue, downloads)) == "NSFileProtectionNone")
    // A class that is weak enough stays.
    let weak = try BundleID("com.example.weak")
    try t.device.createContainer(weak, defaultClass: .completeUntilFirstUserAuthentication)
    _ = try t.device.createDirectories(t.device.container(weak).downloadsPath)
    #expect(try t.device.initCache(weak).downloadsParentPreviousClass == nil)
  }

  @Test func entitlementsInXMLAndBinary() throws {
    let t = try TestDevice()
    let plist: [String: Any] = [
      Entitlements.defaultDataProtectionKey: "NSFileProtectionComplete", "aps-environment": "development",
    ]
    for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
      let data = try PropertyListSerialization.data(fromPropertyList: plist, format: format, options: 0)
      let path = t.directory + "/app-\(format.rawValue).entitlements"
      try data.write(to: URL(fileURLWithPath: path))
      #expect(try Entitlements(contentsOf: path).defaultDataProtection == .complete)
    }
    let empty = try PropertyListSerialization.data(fromPropertyList: [String: Any](), format: .xml, options: 0)
    #expect(try Entitlements(data: empty, path: "e").defaultDataProtection == nil)
  }

  @Test func malformedEntitlementsAreRefused() throws {
    #expect { try Entitlements(data: Data("not a plist".utf8), path: "bad.plist") } throws: {
      ($0 as! ProtFSError).code == .malformed && ($0 as! ProtFSError).message.contains("'bad.plist'")
    }
    let wrong = try PropertyListSerialization.data(
      fromPropertyList: [Entitlements.defaultDataProtectionKey: "NSFileProtectionSometimes"], format: .xml, options: 0)
    #expect { try Entitlements(data: wrong, path: "w.plist") } throws: {
      ($0 as! ProtFSError).message.contains("NSFileProtectionSometimes")
    }
    let array = try PropertyListSerialization.data(fromPropertyList: ["a"], format: .xml, options: 0)
    #expect(throws: ProtFSError.self) { try Entitlements(data: array, path: "a.plist") }
    #expect { try Entitlements(contentsOf: "/nonexistent/x.entitlements") } throws: {
      ($0 as! ProtFSError).message.contains("/nonexistent/x.entitlements")
    }
  }
}
