import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFSBackup

/// The import's failures that are the device's (a full disk, a rename refused): the whole import
/// fails, no container appears, and staging is left empty; entries' own problems only skip them.
@Suite struct BackupImportFaultTests {
  /// A backup written by scripts/make-backup.py into `t`'s directory.
  func backup(in t: TestDevice) throws -> BackupManifest {
    let path = t.directory + "/backup"
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = [RepositoryLayout.packageRoot + "/scripts/make-backup.py", path]
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    return try BackupManifest(folder: BackupFolder(path: path))
  }

  func leftInStaging(_ t: TestDevice) -> [String] {
    (try? FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs/staging")) ?? []
  }

  @Test func aFullDiskFailsTheWholeImportAndLeavesNothing() throws {
    let t = try TestDevice()
    let manifest = try backup(in: t)
    let faults = SyscallFaults()
    faults.fail(.copyFileRange, with: ENOSPC, times: 1_000)
    faults.fail(.write, with: ENOSPC, times: 1_000)
    let outcome = faults.during {
      Result { () throws(ProtFSError) in
        try BackupImport(device: t.device, manifest: manifest, admission: LockController(device: t.device)).run()
      }
    }
    guard case .failure(let error) = outcome else {
      Issue.record("the import succeeded on a full disk")
      return
    }
    #expect(error.errno == ENOSPC, "\(error)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.notes")))
    #expect(leftInStaging(t).isEmpty, "\(leftInStaging(t))")
  }

  @Test func aRenameRefusedLeavesNoContainerAndTheNextImportSucceeds() throws {
    let t = try TestDevice()
    let manifest = try backup(in: t)
    let faults = SyscallFaults()
    faults.fail(.rename, with: EIO, times: 1)
    let outcome = faults.during {
      Result { () throws(ProtFSError) in
        try BackupImport(device: t.device, manifest: manifest, admission: LockController(device: t.device)).run()
      }
    }
    #expect((try? outcome.get()) == nil)
    #expect(leftInStaging(t).isEmpty, "\(leftInStaging(t))")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.notes")))
    let report = try BackupImport(device: t.device, manifest: manifest, admission: LockController(device: t.device))
      .run()
    #expect(report.containers.map(\.bundleID) == ["com.example.notes", "group.com.example.shared"])
  }

  @Test func pathsThatLeaveTheContainerAreNotComponents() {
    for hostile in [
      "/etc/passwd", "../x", "a/../../b", "a//b", "./a", "a/.", "a\u{0}b", String(repeating: "x", count: 256),
    ] {
      #expect(BackupImport.components(hostile) == nil, "\(hostile)")
    }
    #expect(BackupImport.components("") == [])
    #expect(BackupImport.components("Library/Caches/x.db") == ["Library", "Caches", "x.db"])
    #expect(BackupImport.containerID(ofDomain: "AppDomainPlugin-com.x.widget") == "com.x.widget")
    #expect(BackupImport.containerID(ofDomain: "HomeDomain") == nil)
  }
}
