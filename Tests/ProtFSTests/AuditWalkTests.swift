import Foundation
import ProtFS
import ProtFSAudit
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Owns a fixed set of temp download names, standing in for the downloader's task store.
struct FixedOwners: DownloadTaskDirectory {
  var names: Set<String>
  func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask] {
    names.map {
      AttachedTask(
        id: $0, session: "s", state: "running", url: "https://example.com/", bytesReceived: 0,
        temporaryFileName: $0, isRunning: true, isResumable: false)
    }
  }
}

@Suite("Audit walk and checks")
struct AuditWalkTests {
  let app = "com.example.app"

  @Test func aFreshContainerIsClean() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    _ = try device.initCache(try BundleID(app))
    let result = try runAudit(device.root)
    #expect(result.findings.isEmpty, "\(result.findings)")
    #expect(result.summary?.containers == 1)
    #expect(result.summary?.items == 9)
    #expect(result.containers == [app])
  }

  @Test func policyRulesUseTheEffectiveClassAndTheLastMatchingRule() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/ok.txt", class: .complete)
    try device.writeFile(app, "Library/Caches/cache.bin", class: ProtectionClass.none)  // allowed by DP002
    try device.writeFile(app, "tmp/scratch", class: ProtectionClass.none)  // allowed by DP003
    try device.writeFile(app, "Library/Application Support/state.json", class: ProtectionClass.none)
    try device.makeDirectory(app, "Library/Caches/com.apple.nsurlsessiond/Downloads", class: .complete)
    let result = try runAudit(device.root)
    #expect(
      result.significant == [
        "DP001 Library/Application Support/state.json", "DP004 Documents/open.txt",
        "DP005 Library/Caches/com.apple.nsurlsessiond/Downloads",
        // The app's directory below it, made later, would inherit complete.
        "PFS014 Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app",
      ])
    let documents = try #require(result.findings.first { $0.ruleID == "DP004" })
    #expect(documents.level == .error)
    #expect(documents.expected == ">= until-first-auth")
    #expect(documents.actual == "none (own)")
    #expect(documents.path == "Containers/\(app)/Documents/open.txt")
    #expect(documents.message.contains("User documents"))
  }

  @Test func inheritedClassesCountAndAreNoted() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.makeDirectory(app, "Documents/inbox", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/inbox/letter.txt", class: nil)
    let result = try runAudit(device.root)
    #expect(result.significant == ["DP004 Documents/inbox", "DP004 Documents/inbox/letter.txt"])
    let letter = try #require(
      result.findings.first { $0.ruleID == "DP004" && $0.containerPath.hasSuffix("letter.txt") })
    #expect(letter.actual == "none (inherited)")
    #expect(result.paths("PFS006") == ["Documents/inbox/letter.txt"])
    #expect(result.findings.first { $0.ruleID == "PFS006" }?.level == .note)
  }

  @Test func databaseSideFilesMustMatchTheDatabase() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/good.sqlite", class: .complete)
    try device.writeFile(app, "Documents/good.sqlite-wal", class: .complete)
    try device.writeFile(app, "Documents/bad.sqlite", class: .complete)
    try device.writeFile(app, "Documents/bad.sqlite-wal", class: .completeUntilFirstUserAuthentication)
    try device.writeFile(app, "Documents/bad.sqlite-shm", class: ProtectionClass.none)
    try device.writeFile(app, "Library/x.db-journal", class: .complete)  // x.db inherits until-first-auth
    try device.writeFile(app, "Library/x.db", class: nil)
    try device.writeFile(app, "Library/orphan-wal", class: .complete)  // no database "orphan": nothing to compare
    let result = try runAudit(device.root)
    #expect(result.paths("DP006") == ["Documents/bad.sqlite-wal"])
    #expect(result.paths("DP007") == ["Documents/bad.sqlite-shm"])
    #expect(result.paths("DP008") == ["Library/x.db-journal"])
    let wal = try #require(result.findings.first { $0.ruleID == "DP006" })
    #expect(wal.expected == "= complete (as bad.sqlite)")
  }

  @Test func corruptClassesAreErrors() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/a", class: nil)
    try device.setAttribute(
      device.containerPath(app, "Documents/a"), AttributeName.protectionClass, "NSFileProtectionBogus")
    try device.setAttribute(device.containerPath(app), AttributeName.defaultClass, "garbage")
    let result = try runAudit(device.root)
    #expect(result.paths("PFS001") == [".", "Documents/a"])
    #expect(result.paths("PFS006").isEmpty, "a corrupt class is still a class of its own")
  }

  @Test func itemsLockedOutWhileTheirClassIsAvailableAreReported() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    func lockedOut(_ name: String, _ cls: ProtectionClass, saved: Bool) throws {
      try device.writeFile(app, "Documents/\(name)", class: cls, mode: 0o000)
      if saved {
        try device.setAttribute(device.containerPath(app, "Documents/\(name)"), AttributeName.savedMode, "0600")
      }
    }
    try lockedOut("a-saved", .complete, saved: true)
    try lockedOut("a-stripped", .completeUnlessOpen, saved: false)
    try lockedOut("c-saved", .completeUntilFirstUserAuthentication, saved: true)
    try device.makeDirectory(app, "Documents/a-dir", class: .complete)
    try device.setAttribute(device.containerPath(app, "Documents/a-dir"), AttributeName.savedMode, "0755")
    func audit(_ state: AuditLockState) throws -> [String] {
      try runAudit(device.root, AuditConfiguration(policies: [.builtInDefault], lockState: state)).paths("PFS002")
    }
    let everything = ["Documents/a-dir", "Documents/a-saved", "Documents/a-stripped", "Documents/c-saved"]
    #expect(try audit(.unknown) == everything)
    #expect(try audit(.unlocked) == everything)
    #expect(try audit(.locked) == ["Documents/c-saved"], "class C stays available while locked")
    #expect(try audit(.beforeFirstUnlock).isEmpty)
  }

  @Test func anInterruptedLockTransitionIsReported() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/half", class: .completeUntilFirstUserAuthentication, mode: 0o000)
    try device.setAttribute(device.containerPath(app, "Documents/half"), AttributeName.savedMode, "0600")
    let clean = try runAudit(device.root)
    #expect(clean.paths("PFS002") == ["Documents/half"], "the device is unlocked: a saved mode is a leftover")
    _ = FileManager.default.createFile(atPath: device.stateDirectory + "/transition.json", contents: Data("{}".utf8))
    let interrupted = try runAudit(device.root)
    #expect(interrupted.paths("PFS002") == ["."], "mid-transition, only the transition itself is reported")
  }

  @Test func lockStatesFollowSpecSection3() {
    #expect(!AuditLockState.locked.mayBeLockedOut(.directory, .completeUnlessOpen), "B allows creation while locked")
    #expect(AuditLockState.locked.mayBeLockedOut(.file, .completeUnlessOpen))
    #expect(!AuditLockState.locked.mayBeLockedOut(.file, .none))
    #expect(AuditLockState.beforeFirstUnlock.mayBeLockedOut(.file, .completeUntilFirstUserAuthentication))
    #expect(!AuditLockState.beforeFirstUnlock.mayBeLockedOut(.directory, .none))
    #expect(ProtectionClass.allCases.allSatisfy { !AuditLockState.unlocked.mayBeLockedOut(.file, $0) })
  }

  @Test func protectedFilesReadableByOthersAreWarnings() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try device.writeFile(app, "Documents/group", class: .completeUnlessOpen, mode: 0o640)
    try device.writeFile(app, "Documents/private", class: .complete, mode: 0o600)
    try device.writeFile(app, "Documents/c-class", class: .completeUntilFirstUserAuthentication, mode: 0o644)
    let result = try runAudit(device.root)
    #expect(result.paths("PFS003") == ["Documents/group", "Documents/world"])
    #expect(result.findings.first { $0.ruleID == "PFS003" }?.level == .warning)
  }

  @Test func symlinksLeavingTheContainerOrLoopingAreReported() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device(containers: [app, "com.example.other"])
    let documents = device.containerPath(app, "Documents")
    let links = [
      ("abs-out", "/etc/passwd"), ("rel-out", "../../com.example.other/Documents"), ("rel-in", "../Library"),
      ("dangling-in", "missing"), ("dangling-out", "../../../nowhere"), ("loop-a", "loop-b"), ("loop-b", "loop-a"),
      ("abs-in", device.containerPath(app, "tmp")),
    ]
    for (name, target) in links {
      try FileManager.default.createSymbolicLink(atPath: documents + "/" + name, withDestinationPath: target)
    }
    let result = try runAudit(device.root)
    #expect(result.paths("PFS004") == ["Documents/abs-out", "Documents/dangling-out", "Documents/rel-out"])
    #expect(result.paths("PFS010") == ["Documents/loop-a", "Documents/loop-b"])
    #expect(
      result.findings.first { $0.ruleID == "PFS004" && $0.containerPath == "Documents/abs-out" }?.actual
        == "/etc/passwd")
  }

  @Test func temporaryDownloadsWithoutATaskAreOrphans() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    _ = try device.initCache(try BundleID(app))
    let downloads = "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)"
    try device.writeFile(app, "\(downloads)/CFNetworkDownload_owned.tmp", class: ProtectionClass.none)
    try device.writeFile(app, "\(downloads)/CFNetworkDownload_stale.tmp", class: ProtectionClass.none)
    try device.writeFile(app, "\(downloads)/notes.txt", class: ProtectionClass.none)
    let noStore = try runAudit(device.root)
    #expect(
      noStore.paths("PFS005") == [
        "\(downloads)/CFNetworkDownload_owned.tmp", "\(downloads)/CFNetworkDownload_stale.tmp",
      ])
    let withStore = try runAudit(
      device.root,
      AuditConfiguration(
        policies: [.builtInDefault], downloadTasks: { _ in FixedOwners(names: ["CFNetworkDownload_owned.tmp"]) }))
    #expect(withStore.paths("PFS005") == ["\(downloads)/CFNetworkDownload_stale.tmp"])
  }

  @Test func entitlementsDefaultIsComparedWithTheContainers() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    let result = try runAudit(
      device.root, AuditConfiguration(policies: [.builtInDefault], entitlementsDefault: .complete))
    #expect(result.paths("PFS007") == ["."])
    let same = try runAudit(
      device.root,
      AuditConfiguration(policies: [.builtInDefault], entitlementsDefault: .completeUntilFirstUserAuthentication))
    #expect(same.paths("PFS007").isEmpty)
  }

  @Test func namesThatAreNotUTF8AreReportedAndStillAudited() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.makeDirectory(app, "Documents/raw", class: ProtectionClass.none)
    let name = Array(device.containerPath(app, "Documents/raw/bad").utf8) + [0xFF, 0x41, 0]
    let fd = name.withUnsafeBufferPointer { pointer in
      pointer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o600) }
    }
    #expect(fd >= 0)
    close(fd)
    let result = try runAudit(device.root)
    #expect(result.paths("PFS009") == ["Documents/raw/bad\\xFFA"])
    #expect(result.paths("DP004") == ["Documents/raw", "Documents/raw/bad\\xFFA"])
    #expect(result.paths("PFS006") == ["Documents/raw/bad\\xFFA"])
    let finding = try #require(result.findings.first { $0.ruleID == "PFS009" })
    #expect(finding.pathBytes.suffix(5) == [0x62, 0x61, 0x64, 0xFF, 0x41])
  }

  @Test func pathsLongerThanPathMaxAreWalked() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    var directory = try DirectoryHandle(path: device.containerPath(app, "Documents"))
    var relative = "Documents"
    for level in 0..<30 {  // 30 × 201 bytes: well over PATH_MAX (4096)
      let name = "d\(level)" + String(repeating: "x", count: 200 - "\(level)".count)
      try directory.makeDirectory(name)
      directory = try directory.openDirectory(name)
      relative += "/" + name
    }
    let fd = try directory.openFile("leaf", flags: O_CREAT | O_WRONLY)
    close(fd)
    try directory.setProtectionClass(ProtectionClass.none, of: "leaf")
    let result = try runAudit(device.root)
    #expect(result.paths("DP004") == [relative + "/leaf"])
    #expect(result.paths("PFS008").isEmpty)
  }

  @Test func aSingleContainerDirectoryCanBeAudited() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device(containers: [app, "com.example.other"])
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let result = try runAudit(device.containerPath(app))
    #expect(result.containers == [app])
    #expect(result.findings.map(\.path) == ["Documents/open.txt"])
    let all = try runAudit(device.root)
    #expect(all.containers == [app, "com.example.other"])
  }

  @Test func severalPathsShareTheirCommonRoot() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device(containers: [app, "com.example.other"])
    try device.writeFile(app, "Documents/a", class: ProtectionClass.none)
    try device.writeFile("com.example.other", "Documents/b", class: ProtectionClass.none)
    let target = try AuditTarget.resolve([
      device.containerPath(app), device.containerPath("com.example.other"), device.containerPath(app),
    ])
    #expect(target.root == device.root + "/Containers")
    #expect(target.units.map(\.displayPrefix) == ["\(app)/", "com.example.other/"])
    let reporter = CollectingReporter()
    _ = try Auditor(AuditConfiguration(policies: [.builtInDefault])).run(target, reporter: reporter)
    #expect(reporter.findings.map(\.path).sorted() == ["\(app)/Documents/a", "com.example.other/Documents/b"])
  }

  @Test func anExportedTreeOutsideADeviceIsAuditedAsAContainer() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let root = scratch.path + "/export"
    try FileManager.default.createDirectory(atPath: root + "/Documents", withIntermediateDirectories: true)
    _ = FileManager.default.createFile(atPath: root + "/Documents/a", contents: Data())
    try Device(root: "/").setAttribute(
      root + "/Documents/a", AttributeName.protectionClass, ProtectionClass.none.rawValue)
    let result = try runAudit(root)
    #expect(result.significant == ["DP004 Documents/a"])
  }

  @Test(arguments: [1, 2, 4])
  func theResultDoesNotDependOnTheNumberOfThreads(_ threads: Int) throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    for d in 0..<20 {
      try device.makeDirectory(app, "Documents/d\(d)", class: d % 2 == 0 ? .complete : nil)
      for f in 0..<30 {
        let cls: ProtectionClass? = [nil, ProtectionClass.none, .complete, .completeUntilFirstUserAuthentication][f % 4]
        try device.writeFile(app, "Documents/d\(d)/f\(f)", class: cls)
      }
    }
    let one = try runAudit(device.root, AuditConfiguration(policies: [.builtInDefault], threads: 1))
    let many = try runAudit(device.root, AuditConfiguration(policies: [.builtInDefault], threads: threads))
    let key = { (f: AuditFinding) in "\(f.ruleID) \(f.path)" }
    #expect(one.findings.map(key).sorted() == many.findings.map(key).sorted())
    #expect(one.summary == many.summary)
    #expect(one.summary?.items == 20 * 31 + 6)
  }

  @Test func aMissingPathCannotBeAudited() {
    #expect(throws: ProtFSError.self) { _ = try AuditTarget.resolve("/nonexistent/protfs/device") }
  }

  @Test func setIDAndHardLinkedFilesAreReported() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    for (name, mode) in [("setuid", 0o4755), ("setgid", 0o2750), ("plain", 0o755)] {
      try device.writeFile(app, "Documents/\(name)", class: ProtectionClass.none, mode: mode)
      chmod(device.containerPath(app, "Documents/\(name)"), mode_t(mode))
    }
    #expect(link(device.containerPath(app, "Documents/plain"), device.containerPath(app, "tmp/plain-link")) == 0)
    let result = try runAudit(device.root)
    #expect(result.paths("PFS012") == ["Documents/setgid", "Documents/setuid"])
    #expect(
      result.findings.first { $0.ruleID == "PFS012" && $0.containerPath == "Documents/setuid" }?.actual == "04755")
    #expect(result.paths("PFS011") == ["Documents/plain", "tmp/plain-link"])
    #expect(result.findings.first { $0.ruleID == "PFS011" }?.level == .warning)
  }
}
