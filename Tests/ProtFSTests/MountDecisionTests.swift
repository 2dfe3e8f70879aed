import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFSMount

/// The mount's decisions (docs/semantics.md §7), asked of `MountFileSystem` directly: no FUSE
/// session, no kernel, only the device's state and classes as the daemon reads them.
@Suite struct MountDecisionTests {
  let app = "com.example.app"

  /// A device with the app's container, its file system, and the node of the app's Documents.
  func setUp() throws -> (TestDevice, MountFileSystem, MountNode) {
    let t = try TestDevice(containers: [app])
    let fileSystem = try MountFileSystem(device: t.device)
    let root = try fileSystem.nodes.node(1)
    let (container, _) = try fileSystem.lookup(root, app)
    let (documents, _) = try fileSystem.lookup(container, "Documents")
    return (t, fileSystem, documents)
  }

  /// Writes `name` in Documents with class `cls` and returns its node.
  func file(
    _ name: String, _ cls: ProtectionClass, _ t: TestDevice, _ fileSystem: MountFileSystem, _ documents: MountNode
  )
    throws -> MountNode
  {
    let path = t.containerPath(app, "Documents/" + name)
    try t.writeFile(path)
    try t.device.setClass(cls, of: try t.device.resolve(path))
    return try fileSystem.lookup(documents, name).0
  }

  /// Whether `body` was refused with EPERM (false when it succeeded; any other error fails).
  func refused(_ body: () throws(Errno) -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    do throws(Errno) {
      try body()
      return false
    } catch {
      #expect(error == .notPermitted, "refused with \(error), not EPERM", sourceLocation: sourceLocation)
      return true
    }
  }

  @Test func everyClassAndAccessIsDecidedByTheTableInTheDevicesState() throws {
    let (t, fileSystem, _) = try setUp()
    let controller = LockController(device: t.device)
    for step in ["unlocked", "locked", "beforeFirstUnlock"] {
      if step == "locked" { _ = try controller.lock() }
      if step == "beforeFirstUnlock" { _ = try controller.reboot() }
      let state = fileSystem.protectionState()
      #expect(state.lockState.rawValue == step)
      for cls in ProtectionClass.allCases {
        for access in ProtectedDataAccess.allCases {
          let allowed = !refused { () throws(Errno) in try fileSystem.decide(cls, access) }
          #expect(allowed == state.allows(cls, access), "\(cls) \(access) while \(step)")
        }
      }
    }
  }

  @Test func whileLockedACompleteFileIsRefusedAndAnUnlessOpenFileCanStillBeCreated() throws {
    let (t, fileSystem, documents) = try setUp()
    let complete = try file("a.txt", .complete, t, fileSystem, documents)
    let unlessOpen = try file("b.txt", .completeUnlessOpen, t, fileSystem, documents)
    let none = try file("c.txt", .none, t, fileSystem, documents)
    _ = try LockController(device: t.device).lock()
    #expect(refused { () throws(Errno) in _ = try fileSystem.open(complete, flags: O_RDONLY) })
    #expect(refused { () throws(Errno) in _ = try fileSystem.open(unlessOpen, flags: O_RDONLY) })
    #expect(!refused { () throws(Errno) in _ = try fileSystem.open(none, flags: O_RDWR) })
    #expect(!refused { () throws(Errno) in try fileSystem.decide(.completeUnlessOpen, .create) })
    #expect(refused { () throws(Errno) in try fileSystem.decide(.complete, .create) })
  }

  @Test func aHandleOpenedBeforeTheLockKeepsOnlyWhatItsClassAllowsAnOpenFile() throws {
    let (t, fileSystem, documents) = try setUp()
    let complete = try fileSystem.open(try file("a.txt", .complete, t, fileSystem, documents), flags: O_RDWR)
    let unlessOpen = try fileSystem.open(
      try file("b.txt", .completeUnlessOpen, t, fileSystem, documents), flags: O_RDWR)
    // Both are read through the daemon at every I/O, as neither class is available in every state.
    #expect(complete.directIO && unlessOpen.directIO)
    #expect(!refused { () throws(Errno) in try fileSystem.decideIO(complete.handle) })
    _ = try LockController(device: t.device).lock()
    #expect(refused { () throws(Errno) in try fileSystem.decideIO(complete.handle) })
    #expect(!refused { () throws(Errno) in try fileSystem.decideIO(unlessOpen.handle) })
  }

  @Test func aClassSetBehindTheMountDecidesTheNextIOWhileLocked() throws {
    let (t, fileSystem, documents) = try setUp()
    let node = try file("a.txt", .none, t, fileSystem, documents)
    let opened = try fileSystem.open(node, flags: O_RDONLY)
    #expect(!opened.directIO)
    // Another program sets the class on the backing file, not through the mount.
    try t.device.setClass(.complete, of: try t.device.resolve(t.containerPath(app, "Documents/a.txt")))
    _ = try LockController(device: t.device).lock()
    #expect(refused { () throws(Errno) in try fileSystem.decideIO(opened.handle) })
  }

  /// An app may write any bytes into its own file's class attribute in the backing directory:
  /// garbage is the strictest class through the mount, as it is for the lock, never the weaker
  /// one the file would inherit.
  @Test func garbageInAnItemsClassIsClassComplete() throws {
    let (t, fileSystem, documents) = try setUp()
    let path = t.containerPath(app, "Documents/a.txt")
    try t.writeFile(path)
    try t.device.setClass(.none, of: try t.device.resolve(t.containerPath(app, "Documents")))
    try DirectoryHandle(path: t.containerPath(app, "Documents")).setAttribute(
      AttributeName.protectionClass, to: Array("garbage!".utf8), of: "a.txt")
    let node = try fileSystem.lookup(documents, "a.txt").0
    _ = try LockController(device: t.device).lock()
    // Unchanged by the lock (class none inherited then), it would open; its class is read at open.
    chmod(path, 0o644)
    #expect(refused { () throws(Errno) in _ = try fileSystem.open(node, flags: O_RDONLY) })
    #expect(fileSystem.nodes.effectiveClass(of: node) == .complete)
  }

  @Test func aStateThatCannotBeReadAllowsLeast() throws {
    let (t, fileSystem, _) = try setUp()
    #expect(fileSystem.protectionState().lockState == .unlocked)
    try Data("garbage{".utf8).write(
      to: URL(fileURLWithPath: t.device.stateDirectory + "/" + LockStore.stateFileName), options: .atomic)
    #expect(fileSystem.protectionState().lockState == .beforeFirstUnlock)
    #expect(refused { () throws(Errno) in try fileSystem.decide(.completeUntilFirstUserAuthentication, .read) })
    #expect(!refused { () throws(Errno) in try fileSystem.decide(.none, .write) })
  }
}
