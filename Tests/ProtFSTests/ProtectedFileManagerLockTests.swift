import Foundation
import ProtFS
import ProtFSFoundation
import ProtFSLock
import ProtFSTestSupport
import Testing

/// the table of docs/semantics.md §3 through the Foundation-shaped API, for every class: what a locked device (after a
/// first unlock) and a rebooted one allow. The test runs as root, so only protfs's own check can deny.
@Suite struct ProtectedFileManagerLockTests {
  struct Row: Sendable, CustomTestStringConvertible {
    var protectionClass: ProtectionClass
    var lockedRead: Bool
    var lockedCreate: Bool
    var lockedOpenHandle: Bool
    var testDescription: String { protectionClass.name }
  }

  static let table: [Row] = [
    Row(protectionClass: .complete, lockedRead: false, lockedCreate: false, lockedOpenHandle: false),
    Row(protectionClass: .completeUnlessOpen, lockedRead: false, lockedCreate: true, lockedOpenHandle: true),
    Row(
      protectionClass: .completeUntilFirstUserAuthentication, lockedRead: true, lockedCreate: true,
      lockedOpenHandle: true),
    Row(protectionClass: .completeWhenUserInactive, lockedRead: true, lockedCreate: true, lockedOpenHandle: true),
    Row(protectionClass: .none, lockedRead: true, lockedCreate: true, lockedOpenHandle: true),
  ]

  func setUp(_ cls: ProtectionClass) throws -> (TestDevice, ProtectedFileManager, String) {
    let t = try TestDevice(containers: ["com.example.app"])
    let fm = ProtectedFileManager(device: t.device)
    let directory = t.containerPath("com.example.app", "Documents/\(cls.name)")
    try fm.createDirectory(
      atPath: directory, withIntermediateDirectories: false, attributes: [.protectionKey: cls.fileProtectionType])
    try fm.write(Data("secret".utf8), toPath: directory + "/file", options: [.atomic, cls.writingOption])
    return (t, fm, directory)
  }

  func code(_ body: () throws -> Void) -> Int? {
    do {
      try body()
      return nil
    } catch let error as CocoaError {
      return error.code.rawValue
    } catch {
      return -1
    }
  }

  @Test(arguments: table)
  func lockedAfterFirstUnlock(row: Row) throws {
    let (t, fm, directory) = try setUp(row.protectionClass)
    let handle = try fm.fileHandle(forUpdatingAtPath: directory + "/file")
    _ = try LockController(device: t.device).lock()
    #expect(code { _ = try fm.contents(ofItemAtPath: directory + "/file") } == (row.lockedRead ? nil : 257))
    #expect(code { try fm.write(Data("x".utf8), toPath: directory + "/file") } == (row.lockedRead ? nil : 513))
    #expect(code { try fm.write(Data("n".utf8), toPath: directory + "/new") } == (row.lockedCreate ? nil : 513))
    #expect(fm.createFile(atPath: directory + "/new2", contents: nil) == row.lockedCreate)
    #expect(
      code {
        try handle.seek(toOffset: 0); _ = try handle.read(upToCount: 6)
      } == (row.lockedOpenHandle ? nil : 257))
    // Metadata is never gated.
    #expect(try fm.attributesOfItem(atPath: directory + "/file")[.protectionKey] != nil)
    try fm.moveItem(atPath: directory + "/file", toPath: directory + "/renamed")
    // After unlock everything works again.
    _ = try LockController(device: t.device).unlock()
    #expect(try fm.contents(ofItemAtPath: directory + "/renamed") != Data())
    try handle.seek(toOffset: 0)
    #expect(try handle.read(upToCount: 1) == Data((row.lockedRead ? "x" : "s").utf8))
  }

  @Test(arguments: table)
  func beforeFirstUnlockOnlyNoneIsAvailable(row: Row) throws {
    let (t, fm, directory) = try setUp(row.protectionClass)
    _ = try LockController(device: t.device).reboot()
    let available = row.protectionClass == .none
    #expect(code { _ = try fm.contents(ofItemAtPath: directory + "/file") } == (available ? nil : 257))
    #expect(code { try fm.write(Data("n".utf8), toPath: directory + "/new") } == (available ? nil : 513))
    #expect(code { _ = try fm.fileHandle(forReadingAtPath: directory + "/file") } == (available ? nil : 257))
  }

  @Test func deniedErrorsCarryEPERMAndTheFix() throws {
    let (t, fm, directory) = try setUp(.complete)
    _ = try LockController(device: t.device).lock()
    do {
      _ = try fm.contents(ofItemAtPath: directory + "/file")
      Issue.record("read succeeded on a locked complete file")
    } catch let error as CocoaError {
      #expect(error.code == .fileReadNoPermission)
      #expect((error.userInfo[NSUnderlyingErrorKey] as? NSError)?.code == Int(EPERM))
      #expect((error.userInfo[NSFilePathErrorKey] as? String)?.hasSuffix("/file") == true)
      #expect(error.localizedDescription.contains("unlock the device first"))
    }
    #expect(!t.device.isProtectedDataAvailable)
  }
}
