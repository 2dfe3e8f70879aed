import CAttr
import Foundation
import ProtFS
import ProtFSFoundation
import ProtFSSystem
import ProtFSTestSupport
import Testing

@Suite struct ProtectedFileManagerTests {
  let app = "com.example.app"

  func protection(_ fm: ProtectedFileManager, _ path: String) throws -> String? {
    (try fm.attributesOfItem(atPath: path)[.protectionKey] as? FileProtectionType)?.rawValue
  }

  @Test func protectionKeyIsSetAndReported() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let path = t.containerPath(app, "Documents/secret.txt")
    #expect(fm.createFile(atPath: path, contents: Data("s".utf8)))
    #expect(try protection(fm, path) == FileProtectionType.completeUntilFirstUserAuthentication.rawValue)
    try fm.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: path)
    #expect(t.rawClass(path) == "NSFileProtectionComplete")
    #expect(try protection(fm, path) == FileProtectionType.complete.rawValue)
    try fm.setAttributes([.protectionKey: "NSFileProtectionCompleteUnlessOpen"], ofItemAtPath: path)
    #expect(try fm.fileProtection(ofItemAtPath: path) == .completeUnlessOpen)
    #expect(try fm.attributesOfItem(atPath: path)[.size] as? NSNumber == 1)
    // Linux Foundation itself never reports the class: the gap protfs fills.
    #expect(try FileManager.default.attributesOfItem(atPath: path)[.protectionKey] == nil)
  }

  @Test func writingOptionsSelectTheClass() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let cases: [(Data.WritingOptions, String)] = [
      (.noFileProtection, "NSFileProtectionNone"), (.completeFileProtection, "NSFileProtectionComplete"),
      (.completeFileProtectionUnlessOpen, "NSFileProtectionCompleteUnlessOpen"),
      (.completeFileProtectionUntilFirstUserAuthentication, "NSFileProtectionCompleteUntilFirstUserAuthentication"),
      (.completeFileProtectionWhenUserInactive, "NSFileProtectionCompleteWhenUserInactive"),
    ]
    for (index, (option, raw)) in cases.enumerated() {
      for atomic in [true, false] {
        let url = URL(fileURLWithPath: t.containerPath(app, "Documents/f\(index)-\(atomic).bin"))
        try Data("x".utf8).write(to: url, options: atomic ? [option, .atomic] : option, using: fm)
        #expect(t.rawClass(url.path) == raw)
        #expect(try Data(contentsOf: url, using: fm) == Data("x".utf8))
      }
    }
    // No option: a new file inherits, an existing one keeps its own class.
    let url = URL(fileURLWithPath: t.containerPath(app, "Documents/plain.txt"))
    try Data("1".utf8).write(to: url, using: fm)
    #expect(t.rawClass(url.path) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    try fm.setAttributes([.protectionKey: FileProtectionType.complete], ofItemAtPath: url.path)
    try Data("2".utf8).write(to: url, options: .atomic, using: fm)
    #expect(t.rawClass(url.path) == "NSFileProtectionComplete")
    #expect(throws: CocoaError.self) { try Data("3".utf8).write(to: url, options: .withoutOverwriting, using: fm) }
    // No temporary files are left behind.
    #expect(
      try FileManager.default.contentsOfDirectory(atPath: t.containerPath(app, "Documents")).allSatisfy {
        !$0.hasPrefix(".")
      })
  }

  @Test func directoriesHonourProtectionAttributes() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let cache = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    try fm.createDirectory(
      atPath: cache, withIntermediateDirectories: true, attributes: [.protectionKey: FileProtectionType.none])
    #expect(t.rawClass(cache) == "NSFileProtectionNone")
    #expect(
      t.rawClass(t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond"))
        == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    #expect { try fm.createDirectory(atPath: cache, withIntermediateDirectories: false) } throws: {
      ($0 as! CocoaError).code == .fileWriteFileExists
    }
    // A file created inside takes the directory's class.
    #expect(fm.createFile(atPath: cache + "/CFNetworkDownload_abc123.tmp", contents: nil))
    #expect(t.rawClass(cache + "/CFNetworkDownload_abc123.tmp") == "NSFileProtectionNone")
  }

  @Test func moveKeepsTheClassAndCopyCanChangeIt() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let source = t.containerPath(app, "tmp/a.txt")
    try Data("a".utf8).write(to: URL(fileURLWithPath: source), options: .completeFileProtection, using: fm)
    let moved = t.containerPath(app, "Documents/a.txt")
    try fm.moveItem(atPath: source, toPath: moved)
    #expect(t.rawClass(moved) == "NSFileProtectionComplete" && !FileManager.default.fileExists(atPath: source))
    try fm.copyItem(atPath: moved, toPath: t.containerPath(app, "Documents/b.txt"))
    #expect(t.rawClass(t.containerPath(app, "Documents/b.txt")) == "NSFileProtectionComplete")
    try fm.copyItem(atPath: moved, toPath: t.containerPath(app, "Documents/c.txt"), protection: FileProtectionType.none)
    #expect(t.rawClass(t.containerPath(app, "Documents/c.txt")) == "NSFileProtectionNone")
    #expect { try fm.moveItem(atPath: moved, toPath: t.containerPath(app, "Documents/b.txt")) } throws: {
      ($0 as! CocoaError).code == .fileWriteFileExists
    }
  }

  @Test func crossFilesystemMoveCopiesTheAttributes() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let mountPoint = t.containerPath(app, "Library/Caches/ram")
    try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: false)
    try #require(mount("none", mountPoint, "tmpfs", 0, nil) == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    defer { umount2(mountPoint, Int32(MNT_DETACH)) }
    let source = mountPoint + "/download"
    try fm.createDirectory(
      atPath: source, withIntermediateDirectories: false, attributes: [.protectionKey: FileProtectionType.none])
    try Data("payload".utf8).write(
      to: URL(fileURLWithPath: source + "/file.bin"), options: .completeFileProtectionUnlessOpen, using: fm)
    #expect(lsetxattr(source + "/file.bin", "user.other", "kept", 4, 0) == 0)
    let destination = t.containerPath(app, "Documents/download")
    try fm.moveItem(atPath: source, toPath: destination)
    #expect(!FileManager.default.fileExists(atPath: source))
    #expect(t.rawClass(destination) == "NSFileProtectionNone")
    #expect(t.rawClass(destination + "/file.bin") == "NSFileProtectionCompleteUnlessOpen")
    #expect(TestDevice.rawAttribute(destination + "/file.bin", "user.other") == "kept")
    #expect(try String(contentsOfFile: destination + "/file.bin", encoding: .utf8) == "payload")
  }

  @Test func errorsAreCocoaErrorsWithThePath() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    #expect { try fm.attributesOfItem(atPath: t.containerPath(app, "Documents/missing")) } throws: {
      let e = $0 as! CocoaError
      return e.code == .fileReadNoSuchFile && (e.userInfo[NSFilePathErrorKey] as? String)?.hasSuffix("missing") == true
    }
    #expect { try fm.setAttributes([.protectionKey: FileProtectionType.none], ofItemAtPath: "/etc/passwd") } throws: {
      ($0 as! CocoaError).code == .fileWriteInvalidFileName
    }
    #expect(TestDevice.rawAttribute("/etc/passwd", AttributeName.protectionClass) == nil)
    #expect(!fm.createFile(atPath: "/tmp/outside-\(getpid())", contents: nil))
    #expect(!FileManager.default.fileExists(atPath: "/tmp/outside-\(getpid())"))
    let denied = ProtFSError(.protectedDataUnavailable, "x", path: "/p", errno: EPERM)
    #expect(denied.cocoaError(writing: false).code.rawValue == 257)
    #expect(denied.cocoaError(writing: true).code.rawValue == 513)
  }
}
