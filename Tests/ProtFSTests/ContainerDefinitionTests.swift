import Foundation
import ProtFS
import ProtFSAudit
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// One definition of a container (a directory directly inside `Containers/` named by a valid
/// bundle id), and what each feature does with the entries that are not containers.
@Suite struct ContainerDefinitionTests {
  let app = "com.example.app"

  /// A device with one container, a directory whose name is not a bundle id, and a plain file, all
  /// directly inside `Containers/`.
  func strayDevice() throws -> TestDevice {
    let t = try TestDevice(containers: [app])
    try FileManager.default.createDirectory(
      atPath: t.path("Containers/Not A Bundle"), withIntermediateDirectories: false)
    try t.writeFile(t.path("Containers/Not A Bundle/secret.txt"), "stray")
    try t.writeFile(t.path("Containers/notes.txt"), "loose")
    return t
  }

  @Test func theModelListsOnlyDirectoriesNamedByBundleIDs() throws {
    let t = try strayDevice()
    #expect(try t.device.containers().map(\.bundleID.rawValue) == [app])
    let entries = try t.device.openDirectory(Device.containersPath).containersEntries()
    #expect(entries.map(\.name) == ["Not A Bundle", app, "notes.txt"])
    #expect(entries.map(\.isContainer) == [false, true, false])
    #expect(entries[0].notAContainerReason == "its name is not a valid bundle identifier")
    #expect(entries[2].notAContainerReason == "it is a file, not a directory")
    #expect(Device.isContainerRoot(try DevicePath("Containers/\(app)")))
    #expect(!Device.isContainerRoot(try DevicePath("Containers/Not A Bundle")))
  }

  @Test func onlyAContainerHasADefaultClass() throws {
    let t = try strayDevice()
    for name in [app, "Not A Bundle"] {
      try t.device.setAttribute(t.path("Containers/\(name)"), AttributeName.defaultClass, "NSFileProtectionNone")
    }
    try t.writeFile(t.containerPath(app, "loose.txt"))
    let inContainer = try t.device.effectiveClass(of: try DevicePath("Containers/\(app)/loose.txt"))
    #expect(inContainer.protectionClass == ProtectionClass.none)
    let stray = try t.device.effectiveClass(of: try DevicePath("Containers/Not A Bundle/secret.txt"))
    #expect(stray.protectionClass == .containerDefault)
  }

  @Test func theAuditReportsEntriesThatAreNotContainersAndStillWalksDirectories() throws {
    let t = try strayDevice()
    try t.device.setAttribute(t.path("Containers/Not A Bundle/secret.txt"), AttributeName.protectionClass, "garbage")
    let result = try runAudit(t.root)
    let stray = result.findings.filter { $0.ruleID == BuiltInCheck.notAContainer.rawValue }
    #expect(stray.map(\.container).sorted() == ["Not A Bundle", "notes.txt"])
    #expect(stray.allSatisfy { $0.level == .warning })
    #expect(stray.first { $0.container == "notes.txt" }?.message.contains("it is a file, not a directory") == true)
    // The stray directory is still walked: its corrupt class is found.
    #expect(
      result.findings.contains { $0.ruleID == BuiltInCheck.corruptClass.rawValue && $0.container == "Not A Bundle" })
    // Directories are counted, the loose file is not.
    #expect(result.summary?.containers == 2)
  }

  @Test func theLockProtectsEverythingBelowContainers() throws {
    let t = try strayDevice()
    try t.device.setClass(.complete, of: try DevicePath("Containers/Not A Bundle/secret.txt"))
    let controller = LockController(device: t.device)
    try controller.setPasscode("1234")
    _ = try controller.lock()
    #expect(t.mode(t.path("Containers/Not A Bundle/secret.txt")) & 0o777 == 0)
    _ = try controller.unlock(passcode: "1234")
    #expect(t.mode(t.path("Containers/Not A Bundle/secret.txt")) & 0o777 == 0o644)
  }
}
