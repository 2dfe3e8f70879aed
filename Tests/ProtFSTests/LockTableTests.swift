import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// the table of docs/semantics.md §3, cell by cell: the pure rule, then the same cell on disk.
@Suite struct LockTableTests {
  /// The states of the table's columns (locked twice: before and after the CX expiry).
  enum Column: String, CaseIterable, CustomTestStringConvertible {
    case beforeFirstUnlock, unlocked, locked, lockedInactive
    var state: ProtectionState {
      switch self {
      case .beforeFirstUnlock: ProtectionState(lockState: .beforeFirstUnlock)
      case .unlocked: ProtectionState(lockState: .unlocked)
      case .locked: ProtectionState(lockState: .locked)
      case .lockedInactive: ProtectionState(lockState: .locked, userInactive: true)
      }
    }
    var testDescription: String { rawValue }
  }

  /// Expected (read, openHandle, create) per class and column, transcribed from docs/semantics.md §3.
  static func expected(_ cls: ProtectionClass, _ column: Column) -> (read: Bool, handle: Bool, create: Bool) {
    switch (cls, column) {
    case (.none, _), (_, .unlocked): (true, true, true)
    case (_, .beforeFirstUnlock): (false, false, false)
    case (.complete, _): (false, false, false)
    case (.completeUnlessOpen, _): (false, true, true)
    case (.completeUntilFirstUserAuthentication, _): (true, true, true)
    case (.completeWhenUserInactive, .locked): (true, true, true)
    case (.completeWhenUserInactive, _): (false, false, false)
    }
  }

  @Test(arguments: ProtectionClass.allCases, Column.allCases)
  func ruleMatchesTheTable(cls: ProtectionClass, column: Column) {
    let want = Self.expected(cls, column)
    let state = column.state
    #expect(state.allows(cls, .read) == want.read)
    #expect(state.allows(cls, .write) == want.read)
    #expect(state.allows(cls, .openHandle) == want.handle)
    #expect(state.allows(cls, .create) == want.create)
    // Without a passcode data protection is off: every cell is yes.
    var off = state
    off.passcodeEnabled = false
    for access in ProtectedDataAccess.allCases { #expect(off.allows(cls, access)) }
    #expect(off.isProtectedDataAvailable)
    #expect(state.isProtectedDataAvailable == (column == .unlocked))
  }

  @Test(arguments: ProtectionClass.allCases, Column.allCases)
  func cellOnDiskAndEveryModeComesBack(cls: ProtectionClass, column: Column) throws {
    let t = try LockFixture(fileClass: cls)
    let controller = LockController(device: t.device.device, threads: 2)
    switch column {
    case .unlocked: try controller.lock(); try controller.unlock()
    case .locked: try controller.lock()
    case .lockedInactive: try controller.lock(inactive: true)
    case .beforeFirstUnlock: try controller.reboot()
    }
    let want = Self.expected(cls, column)
    #expect(t.device.mode(t.file) == (want.read ? 0o640 : 0))
    #expect(t.device.mode(t.directory) == (want.create ? 0o751 : 0o551))
    // The record starts with the original mode, owner and group (root's file: no handover).
    #expect(
      TestDevice.rawAttribute(t.file, AttributeName.savedMode)?.split(separator: " ").prefix(3).joined(separator: " ")
        == (want.read ? nil : "0640 0 0"))
    // The library enforces the same cell for its own callers, root included.
    let path = try t.device.device.resolve(t.file)
    if want.read {
      try t.device.device.checkAccess(path, for: .read)
    } else {
      let error = #expect(throws: ProtFSError.self) { try t.device.device.checkAccess(path, for: .read) }
      #expect(error?.code == .protectedDataUnavailable && error?.errno == EPERM)
    }
    let newItem = try t.device.device.resolve(t.directory + "/new.txt")
    #expect(((try? t.device.device.checkAccess(newItem, for: .create)) != nil) == want.create)
    #expect(((try? t.device.device.checkAccess(path, for: .openHandle)) != nil) == want.handle)
    #expect(((try? t.device.device.checkAccess(atPath: t.file, for: .write)) != nil) == want.read)
    try controller.unlock()
    #expect(t.device.mode(t.file) == 0o640)
    #expect(t.device.mode(t.directory) == 0o751)
    #expect(TestDevice.rawAttribute(t.file, AttributeName.savedMode) == nil)
    #expect(t.device.rawClass(t.file) == cls.rawValue)
  }

  @Test func withoutPasscodeNothingIsEverStripped() throws {
    let t = try LockFixture(fileClass: .complete)
    let controller = LockController(device: t.device.device)
    try controller.removePasscode()
    try controller.lock()
    #expect(t.device.mode(t.file) == 0o640)
    try controller.reboot()
    #expect(t.device.mode(t.file) == 0o640)
    #expect(t.device.device.isProtectedDataAvailable)
    try t.device.device.checkAccess(try t.device.device.resolve(t.file), for: .read)
  }
}

/// A device with one container holding `Documents/dir` (mode 0751) and `Documents/dir/file`
/// (mode 0640), both of one class.
struct LockFixture {
  let device: TestDevice
  let file: String
  let directory: String

  init(fileClass: ProtectionClass) throws {
    device = try TestDevice(containers: ["com.example.app"])
    directory = device.containerPath("com.example.app", "Documents/dir")
    file = directory + "/file"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
    chmod(directory, 0o751)
    try device.writeFile(file, "secret", mode: 0o640)
    try device.device.setClass(fileClass, of: try device.device.resolve(directory), recursive: true)
  }
}
