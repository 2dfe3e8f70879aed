import CAttr
import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

@Suite struct ClassStorageTests {
  let app = "com.example.app"

  @Test func effectiveClassComesFromOwnThenAncestorThenDefault() throws {
    let t = try TestDevice(containers: [app])
    let device = t.device
    let documents = try device.resolve(t.containerPath(app, "Documents"))
    try FileManager.default.createDirectory(
      atPath: t.containerPath(app, "Documents/a/b"), withIntermediateDirectories: true)
    try t.writeFile(t.containerPath(app, "Documents/a/b/f.txt"))
    let file = try device.resolve(t.containerPath(app, "Documents/a/b/f.txt"))
    #expect(try device.effectiveClass(of: file) == EffectiveClass(.completeUntilFirstUserAuthentication, .inherited))
    try device.setClass(.complete, of: documents.appending("a"))
    #expect(try device.effectiveClass(of: file) == EffectiveClass(.complete, .inherited))
    try device.setClass(.none, of: file)
    #expect(try device.effectiveClass(of: file) == EffectiveClass(.none, .own))
    #expect(t.rawClass(t.containerPath(app, "Documents/a/b/f.txt")) == "NSFileProtectionNone")
    try device.removeClass(of: file)
    #expect(try device.ownClass(of: file) == nil)
    // Without any labelled ancestor, the container default applies.
    try FileManager.default.createDirectory(atPath: t.containerPath(app, "Extra"), withIntermediateDirectories: true)
    let extra = try device.resolve(t.containerPath(app, "Extra"))
    #expect(try device.effectiveClass(of: extra) == EffectiveClass(.completeUntilFirstUserAuthentication, .default))
    try device.createContainer(try BundleID(app), defaultClass: .complete)
    #expect(try device.effectiveClass(of: extra) == EffectiveClass(.complete, .default))
    // Outside any container: class C by default.
    #expect(
      try device.effectiveClass(of: Device.containersPath)
        == EffectiveClass(.completeUntilFirstUserAuthentication, .default))
  }

  @Test func changingADirectoryDoesNotRelabelChildrenUnlessRecursive() throws {
    let t = try TestDevice(containers: [app])
    let documents = try t.device.resolve(t.containerPath(app, "Documents"))
    try t.device.createDirectory(documents.appending("sub"))
    try t.device.setClass(.complete, of: documents)
    #expect(t.rawClass(t.containerPath(app, "Documents/sub")) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    try FileManager.default.createSymbolicLink(
      atPath: t.containerPath(app, "Documents/link"), withDestinationPath: "/etc/passwd")
    let result = try t.device.setClass(.completeUnlessOpen, of: documents, recursive: true)
    #expect(result.changed == 2 && result.skipped == [documents.appending("link")])
    #expect(t.rawClass(t.containerPath(app, "Documents/sub")) == "NSFileProtectionCompleteUnlessOpen")
    #expect(TestDevice.rawAttribute("/etc/passwd", AttributeName.protectionClass) == nil)
  }

  @Test func createdDirectoriesInheritTheParentsClass() throws {
    let t = try TestDevice(containers: [app])
    let documents = try t.device.resolve(t.containerPath(app, "Documents"))
    try t.device.setClass(.complete, of: documents)
    try t.device.createDirectories(documents.appending("x").appending("y"))
    #expect(t.rawClass(t.containerPath(app, "Documents/x")) == "NSFileProtectionComplete")
    #expect(t.rawClass(t.containerPath(app, "Documents/x/y")) == "NSFileProtectionComplete")
    try t.device.createDirectory(documents.appending("z"), protectionClass: ProtectionClass.none)
    #expect(t.rawClass(t.containerPath(app, "Documents/z")) == "NSFileProtectionNone")
  }

  @Test func symlinksAreNeverFollowed() throws {
    let t = try TestDevice(containers: [app])
    let outside = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(outside) }
    try FileManager.default.createSymbolicLink(
      atPath: t.containerPath(app, "Documents/out"), withDestinationPath: outside)
    let link = try t.device.resolve(t.containerPath(app, "Documents/out"))
    #expect { try t.device.setClass(.none, of: link) } throws: {
      ($0 as! ProtFSError).message.contains("symbolic link")
    }
    #expect { try t.device.effectiveClass(of: link.appending("f")) } throws: { ($0 as! ProtFSError).code == .symlink }
    #expect { try t.device.createDirectory(link.appending("new")) } throws: { ($0 as! ProtFSError).code == .symlink }
    #expect(TestDevice.rawAttribute(outside, AttributeName.protectionClass) == nil)
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
  }

  @Test func corruptValuesAreReportedWithThePath() throws {
    let t = try TestDevice(containers: [app])
    let path = t.containerPath(app, "Documents/bad.txt")
    try t.writeFile(path)
    #expect(lsetxattr(path, AttributeName.protectionClass, "garbage", 7, 0) == 0)
    #expect { try t.device.effectiveClass(of: try t.device.resolve(path)) } throws: {
      let e = $0 as! ProtFSError
      return e.code == .corruptAttribute && e.message.contains(path) && e.message.contains("garbage")
    }
  }

  @Test func filesystemWithoutUserXattrsIsRefused() throws {
    let base = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(base) }
    // ramfs has no user extended attributes at all.
    try #require(mount("none", base, "ramfs", 0, nil) == 0, "mount ramfs: \(String(cString: strerror(errno)))")
    defer { umount(base) }
    let device = Device(root: base + "/device")
    #expect { try device.initialize() } throws: { error in
      let e = error as! ProtFSError
      return e.code == .xattrUnsupported && e.message.contains(base + "/device")
    }
    #expect(!FileManager.default.fileExists(atPath: base + "/device/.protfs"))
  }
}
