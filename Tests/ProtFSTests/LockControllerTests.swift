import Foundation
import ProtFSLock
import ProtFSTestSupport
import Synchronization
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// A clock tests move by hand.
final class ManualClock: Sendable {
  private let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
  func read() -> Date { now.withLock { $0 } }
  func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
}

@Suite struct LockControllerTests {
  @Test func newDeviceIsUnlockedWithAPasscodeUnlockDoesNotAskFor() throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let controller = LockController(device: t.device)
    let record = try controller.record()
    #expect(record.state == .unlocked && record.passcodeEnabled && record.passcodeHash == nil)
    try controller.lock()
    try controller.unlock()  // no passcode asked
    #expect(try controller.record().state == .unlocked)
    #expect(try controller.record().generation == 2)
  }

  @Test func passcodeIsHashedCheckedAndBacksOffAfterFiveWrongOnes() throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let clock = ManualClock()
    let controller = LockController(device: t.device, clock: { clock.read() }, passcodeIterations: 1000)
    try controller.setPasscode("1234")
    let stored = try String(contentsOfFile: t.path(".protfs/lock-state.json"), encoding: .utf8)
    #expect(!stored.contains("1234") && stored.contains("pbkdf2-hmac-sha256"))
    try controller.lock()
    #expect(throws: ProtFSError.self) { try controller.unlock() }
    for attempt in 1...5 {
      let error = #expect(throws: ProtFSError.self) { try controller.unlock(passcode: "0000") }
      let attempts = attempt == 1 ? "1 failed attempt in a row" : "\(attempt) failed attempts in a row"
      #expect(error?.message.contains(attempts) == true, "\(String(describing: error))")
    }
    // Now even the right passcode is refused until the delay has passed.
    let refused = #expect(throws: ProtFSError.self) { try controller.unlock(passcode: "1234") }
    #expect(refused?.message.contains("refuses passcodes") == true)
    clock.advance(61)
    try controller.unlock(passcode: "1234")
    #expect(try controller.record().failedAttempts == 0)
    // Changing or removing it needs the current one.
    #expect(throws: ProtFSError.self) { try controller.setPasscode("5678", current: "bad") }
    try controller.setPasscode("5678", current: "1234")
    try controller.removePasscode(current: "5678")
    #expect(try controller.record().passcodeEnabled == false)
  }

  @Test func aGraceLocksAtOnceAndWithdrawsClassAOnlyWhenItEnds() throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let complete = t.containerPath("com.example.app", "Documents/a.txt")
    let unlessOpen = t.containerPath("com.example.app", "Documents/b.txt")
    try t.writeFile(complete)
    try t.writeFile(unlessOpen)
    try t.device.setClass(.complete, of: try t.device.resolve(complete))
    try t.device.setClass(.completeUnlessOpen, of: try t.device.resolve(unlessOpen))
    let clock = ManualClock()
    let controller = LockController(device: t.device, clock: { clock.read() })
    let report = try controller.lock(grace: 10)
    // Locked at once: protected data is unavailable, class B is closed; class A is not yet.
    #expect(report.to.lockState == .locked && !report.to.isProtectedDataAvailable && report.to.classKeysHeld)
    #expect(t.mode(unlessOpen) == 0 && t.mode(complete) == 0o644)
    #expect(try controller.endGraceIfDue() == nil)
    // Locking again during the grace does not lengthen it.
    clock.advance(6)
    try controller.lock(grace: 10)
    clock.advance(4)
    let ended = try controller.endGraceIfDue()
    #expect(ended?.to.classKeysHeld == false && t.mode(complete) == 0)
    #expect(try controller.record().classKeysUntil == nil)
    // An unlock during a grace ends it; a lock without one withdraws the keys at once.
    try controller.unlock()
    try controller.lock(grace: 10)
    try controller.unlock()
    #expect(try controller.record().classKeysUntil == nil && t.mode(complete) == 0o644)
    try controller.lock(grace: 10)
    try controller.lock()
    #expect(t.mode(complete) == 0)
  }

  @Test func inactiveExpiryLocksWhenInactiveClassUntilUnlock() throws {
    let t = try LockFixture(fileClass: .completeWhenUserInactive)
    let controller = LockController(device: t.device.device)
    try controller.lock()
    #expect(t.device.mode(t.file) == 0o640)
    try controller.lock(inactive: true)
    #expect(t.device.mode(t.file) == 0)
    try controller.unlock()
    try controller.lock()
    #expect(t.device.mode(t.file) == 0o640)  // the expiry ended with the unlock
  }

  @Test func filesCreatedMeanwhileAreReportedThenFollowTheTable() throws {
    let t = try LockFixture(fileClass: .complete)
    let controller = LockController(device: t.device.device)
    try controller.lock()
    // Root (another program) creates a file in the locked directory.
    let late = t.directory + "/late.txt"
    try t.device.writeFile(late, "x", mode: 0o604)
    let status = try controller.status()
    #expect(status.state == .locked && !status.protectedDataAvailable)
    #expect(status.inconsistencies.map(\.path) == [late])
    #expect(status.classes.first { $0.name == "complete" }?.files == 2)
    try controller.lock()  // again: applies the table to it
    #expect(t.device.mode(late) == 0)
    #expect(try controller.status().inconsistencyCount == 0)
    try controller.unlock()
    #expect(t.device.mode(late) == 0o604)
  }

  @Test func eventsFollowTransitionsFromAnyController() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let events = try t.device.protectedDataEvents()
    let controller = LockController(device: t.device)
    let collected = Task {
      var seen: [ProtectedDataEvent.Kind] = []
      for await event in events {
        seen.append(event.event)
        if seen.count == 2 { break }
      }
      return seen
    }
    try controller.lock()
    try controller.reboot()  // still unavailable: no event
    try controller.unlock()
    // Only a failure waits this long: the collector ends as soon as it has both events.
    let timeout = Task {
      try await Task.sleep(for: .seconds(30))
      collected.cancel()
    }
    let seen = await collected.value
    timeout.cancel()
    #expect(seen == [.protectedDataWillBecomeUnavailable, .protectedDataDidBecomeAvailable])
  }

}

/// Faults: each leaves everything as it was, with a clear error.
@Suite struct LockFaultTests {
  @Test func symlinksAndLoopsAreNeverFollowed() throws {
    let t = try LockFixture(fileClass: .complete)
    let outside = t.device.directory + "/outside.txt"
    try t.device.writeFile(outside, "x", mode: 0o644)
    symlink(outside, t.directory + "/out")
    symlink(t.directory + "/loop", t.directory + "/loop")
    symlink(t.device.directory, t.directory + "/up")
    let controller = LockController(device: t.device.device)
    try controller.lock()
    #expect(t.device.mode(outside) == 0o644)
    #expect(TestDevice.rawAttribute(outside, AttributeName.savedMode) == nil)
    #expect(t.device.mode(t.file) == 0)
    try controller.unlock()
    #expect(t.device.mode(t.file) == 0o640)
  }

  /// An app can write any bytes into its own file's class attribute: that must neither keep the
  /// device from locking nor leave the file readable under a weaker inherited class.
  @Test func garbageClassIsLockedAsCompleteAndReported() throws {
    let t = try LockFixture(fileClass: .none)
    let bad = t.directory + "/bad.txt"
    try t.device.writeFile(bad, "x", mode: 0o640)
    try DirectoryHandle(path: t.directory).setAttribute(
      AttributeName.protectionClass, to: Array("garbage!".utf8), of: "bad.txt")
    let controller = LockController(device: t.device.device)
    let report = try controller.lock()
    #expect(try controller.record().state == .locked)
    #expect(report.garbageClass == [bad])
    #expect(t.device.mode(bad) == 0)
    #expect(t.device.mode(t.file) == 0o640, "class none next to it stays available")
    #expect(try controller.status().inconsistencies.map(\.path) == [bad])
    try controller.unlock()
    #expect(t.device.mode(bad) == 0o640)
    #expect(TestDevice.rawAttribute(bad, AttributeName.savedMode) == nil)
  }

  /// An app can name its files with bytes that are not UTF-8; a lock reaches them by those bytes,
  /// a directory's subtree too, and never touches a decoded look-alike.
  @Test func namesThatAreNotUTF8AreLockedLikeAnyOther() throws {
    let t = try LockFixture(fileClass: .complete)
    func raw(_ parts: [UInt8]...) -> [CChar] { parts.joined().map { CChar(bitPattern: $0) } + [0] }
    let base = Array(t.directory.utf8)
    let file = raw(base, Array("/n".utf8), [0xFF])
    let directory = raw(base, Array("/dir".utf8), [0xFE])
    let inner = raw(base, Array("/dir".utf8), [0xFE], Array("/inner".utf8))
    let lookAlike = t.directory + "/n\u{FFFD}"
    try t.device.writeFile(lookAlike, "decoy", mode: 0o644)
    let fd = open(file, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
    #expect(fd >= 0)
    close(fd)
    #expect(mkdir(directory, 0o755) == 0)
    let innerFD = open(inner, O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
    #expect(innerFD >= 0)
    close(innerFD)
    try t.device.device.setClass(.none, of: try t.device.device.resolve(lookAlike), recursive: false)
    func mode(_ path: [CChar]) -> UInt32 {
      var s = stat()
      return lstat(path, &s) == 0 ? UInt32(s.st_mode) & 0o7777 : 0o7777
    }
    let controller = LockController(device: t.device.device)
    let report = try controller.lock()
    #expect(report.notUTF8.isEmpty)
    #expect(mode(file) == 0 && mode(inner) == 0)
    #expect(mode(directory) & 0o222 == 0, "a locked directory has no write bits")
    #expect(t.device.mode(lookAlike) == 0o644, "the look-alike is class none")
    #expect(try controller.status().inconsistencies.isEmpty)
    try controller.unlock()
    #expect(mode(file) == 0o644 && mode(inner) == 0o644 && mode(directory) == 0o755)
  }

  @Test(arguments: ["rw-r", "0644", "06777 0 0 " + String(repeating: "0", count: 64)])
  func aRecordProtfsDidNotWriteIsIgnoredReportedAndGivesASafeMode(planted: String) throws {
    let t = try LockFixture(fileClass: .complete)
    let controller = LockController(device: t.device.device)
    try controller.lock()
    try DirectoryHandle(path: t.directory).setAttribute(AttributeName.savedMode, to: Array(planted.utf8), of: "file")
    let problems = try controller.status().inconsistencies
    #expect(problems.map(\.path) == [t.file])
    #expect(problems.first?.problem.contains("not") == true && problems.first?.problem.contains("0600") == true)
    let report = try controller.unlock()
    #expect(report.unauthenticated == [t.file])
    // Neither the planted mode nor a guess: the owner's read and write only, and the record is gone.
    #expect(t.device.mode(t.file) == 0o600)
    #expect(TestDevice.rawAttribute(t.file, AttributeName.savedMode) == nil)
    #expect(t.device.mode(t.directory) == 0o751)
  }

  /// Records are not bound to their inode (ext4 shares one attribute block among equal values), so
  /// what keeps a copy from being applied is the item's state: a group member who can write an
  /// unlocked file's attributes copies a locked setuid file's record onto it.
  @Test func aRecordCopiedOntoAnItemInAnotherStateIsNotApplied() throws {
    let t = try LockFixture(fileClass: .complete)
    let other = t.directory + "/other"
    try t.device.writeFile(other, "x", mode: 0o4755)
    try t.device.device.setClass(.complete, of: try t.device.device.resolve(other))
    let shared = t.directory + "/shared"
    try t.device.writeFile(shared, "x", mode: 0o664)
    try t.device.device.setClass(ProtectionClass.none, of: try t.device.device.resolve(shared))
    let controller = LockController(device: t.device.device)
    try controller.lock()
    let copied = try #require(TestDevice.rawAttribute(other, AttributeName.savedMode))
    #expect(copied.hasPrefix("04755 0 0 "))
    try DirectoryHandle(path: t.directory).setAttribute(AttributeName.savedMode, to: Array(copied.utf8), of: "shared")
    #expect(try controller.status().inconsistencies.map(\.path).contains(shared))
    let report = try controller.unlock()
    #expect(report.unauthenticated == [shared])
    #expect(t.device.mode(shared) == 0o600, "never the copied 04755")
    #expect(t.device.mode(other) == 0o4755)
  }

  /// The same record is applied again after a crash at any step of a lock: each state between
  /// the steps is one a record fits.
  @Test func aRecordFitsTheItemAtEveryStepOfItsLock() throws {
    let status = { (uid: UInt32, mode: UInt32) in
      ItemHandle.Status(
        kind: .directory, permissions: mode, uid: uid, gid: 501, links: 2,
        identity: ItemIdentity(inode: 1, birthSeconds: 0, birthNanoseconds: 0, isDirectory: true))
    }
    let record = SavedModeRecord(mode: 0o2770, uid: 501, gid: 501)
    let restricted = ModeEnforcer.restrictedMode(0o2770, .directory, handedOver: ModeEnforcer.canChown)
    #expect(ModeEnforcer.fits(record, status(501, 0o2770)))
    #expect(ModeEnforcer.fits(record, status(501, restricted)))
    #expect(ModeEnforcer.fits(record, status(0, restricted)) == ModeEnforcer.canChown)
    #expect(!ModeEnforcer.fits(record, status(501, 0o2777)))
    #expect(!ModeEnforcer.fits(record, status(0, 0o2770)))
    #expect(!ModeEnforcer.fits(record, status(1000, restricted)))
  }

  @Test func aRecordCopiedToAnItemOfAnotherOwnerIsNotApplied() throws {
    let t = try LockFixture(fileClass: .complete)
    let apps = t.directory + "/apps"
    try t.device.writeFile(apps, "x", mode: 0o640)
    #expect(chown(apps, 501, 501) == 0)
    try t.device.device.setClass(.complete, of: try t.device.device.resolve(apps))
    let controller = LockController(device: t.device.device)
    try controller.lock()
    // root's own record copied onto the app's file: another inode, and another owner.
    let copied = try #require(TestDevice.rawAttribute(t.file, AttributeName.savedMode))
    #expect(copied.hasPrefix("0640 0 0 "))
    try DirectoryHandle(path: t.directory).setAttribute(AttributeName.savedMode, to: Array(copied.utf8), of: "apps")
    #expect(try controller.status().inconsistencies.map(\.path) == [apps])
    let report = try controller.unlock()
    #expect(report.unauthenticated == [apps])
    var s = stat()
    lstat(apps, &s)
    #expect(t.device.mode(apps) == 0o600 && s.st_uid == 0 && s.st_gid == 501)
    #expect(t.device.mode(t.file) == 0o640)
  }

  @Test func aLostSecretMakesEveryRecordUnauthentic() throws {
    let t = try LockFixture(fileClass: .complete)
    let controller = LockController(device: t.device.device)
    try controller.lock()
    #expect(unlink(t.device.path(".protfs/mode-key")) == 0)
    let report = try controller.unlock()
    #expect(report.unauthenticated == [t.directory, t.file])
    #expect(t.device.mode(t.file) == 0o600 && t.device.mode(t.directory) == 0o700)
  }

  @Test(arguments: [(Data(count: 5), 0o600), (Data(count: 32), 0o644)])
  func aDamagedSecretStopsTheTransitionAndSaysHowToFixIt(contents: Data, mode: Int) throws {
    let t = try LockFixture(fileClass: .complete)
    let key = t.device.path(".protfs/mode-key")
    #expect(FileManager.default.createFile(atPath: key, contents: contents))
    chmod(key, mode_t(mode))
    let controller = LockController(device: t.device.device)
    let error = #expect(throws: ProtFSError.self) { try controller.lock() }
    #expect(error?.path == key && error?.message.contains("is unusable") == true, "\(String(describing: error))")
    #expect(error?.hint?.contains("rm '\(key)'") == true)
    #expect(try controller.record().state == .unlocked)
    #expect(t.device.mode(t.file) == 0o640)
  }

  @Test func uninitialisedDeviceSaysHowToFixIt() throws {
    let t = try TestDevice(initialize: false)
    let error = #expect(throws: ProtFSError.self) { try LockController(device: t.device).lock() }
    #expect(error?.code == .notInitialized)
    #expect(!FileManager.default.fileExists(atPath: t.root))
  }
}

/// The walk's inherited classes agree with `Device.effectiveClass(of:)` on every item of a nested
/// tree, with one thread or two.
@Suite struct LockWalkTests {
  @Test(arguments: [1, 2])
  func everyItemFollowsItsEffectiveClass(threads: Int) throws {
    let t = try TestDevice()
    try t.device.createContainer(try BundleID("com.example.app"), defaultClass: .complete)
    try t.device.createContainer(try BundleID("com.example.other"))
    let fm = FileManager.default
    var items: [String] = []
    for container in ["com.example.app", "com.example.other"] {
      let documents = t.containerPath(container, "Documents")
      for (index, cls) in ProtectionClass.allCases.enumerated() {
        var directory = documents + "/d\(index)"
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try t.device.setClass(cls, of: try t.device.resolve(directory))
        items.append(directory)
        for depth in 0..<3 {
          directory += "/n\(depth)"  // no own class: inherits
          try fm.createDirectory(atPath: directory, withIntermediateDirectories: false)
          items.append(directory)
          for file in 0..<4 {
            let path = directory + "/f\(file)"
            try t.writeFile(path, "x", mode: 0o640 + file)
            if file == 3 {
              try t.device.setClass(ProtectionClass.allCases[(index + depth) % 5], of: try t.device.resolve(path))
            }
            items.append(path)
          }
        }
      }
      try t.writeFile(documents + "/top", "x")  // inherits Documents' class, the container default
      items.append(documents + "/top")
    }
    let before = Dictionary(uniqueKeysWithValues: items.map { ($0, t.mode($0)) })
    let controller = LockController(device: t.device, threads: threads)
    for (operation, state) in [
      ("lock", ProtectionState(lockState: .locked)),
      ("inactive", ProtectionState(lockState: .locked, userInactive: true)),
      ("reboot", ProtectionState(lockState: .beforeFirstUnlock)),
    ] {
      switch operation {
      case "lock": try controller.lock()
      case "inactive": try controller.lock(inactive: true)
      default: try controller.reboot()
      }
      for item in items {
        let path = try t.device.resolve(item)
        let cls = try t.device.effectiveClass(of: path).protectionClass
        let kind = try t.device.status(path).kind
        let allowed = state.allows(cls, kind == .directory ? .create : .read)
        let expected = allowed ? before[item]! : (kind == .directory ? before[item]! & ~0o222 : 0)
        #expect(t.mode(item) == expected, "\(operation) \(item) (\(cls))")
      }
      try controller.unlock()
      for item in items { #expect(t.mode(item) == before[item]!, "\(operation) \(item)") }
    }
  }
}

@Suite struct ProtectionStateProbeTests {
  /// Every transition is seen, whether the state file is trusted by its identity (a clock far
  /// ahead of its timestamps) or read again because it just changed (the real clock).
  @Test(arguments: [10, 0])
  func seesEveryTransition(clockAhead: Int) throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let controller = LockController(device: t.device)
    let probe = ProtectionStateProbe(device: t.device, now: { Int(time(nil)) + clockAhead })
    #expect(try probe.state().lockState == .unlocked)
    #expect(try probe.state().lockState == .unlocked)
    try controller.lock()
    #expect(try probe.state().lockState == .locked)
    try controller.unlock()
    #expect(try probe.state().lockState == .unlocked)
    try controller.reboot()
    #expect(try probe.state().lockState == .beforeFirstUnlock)
    try controller.unlock()
    try controller.lock(inactive: true)
    #expect(try probe.state() == ProtectionState(lockState: .locked, userInactive: true))
    try FileManager.default.removeItem(atPath: t.device.stateDirectory + "/lock-state.json")
    #expect(try probe.state().lockState == .unlocked)
  }

  /// Only root can put anything in `.protfs/`, but a FIFO there must give an error, not hang
  /// every command in `open`.
  @Test(.timeLimit(.minutes(1)), arguments: ["lock-state.json", "transition.json"])
  func aFIFOInPlaceOfAStateFileIsAnErrorNamingIt(name: String) throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let controller = LockController(device: t.device)
    try controller.lock()
    let path = t.device.stateDirectory + "/" + name
    unlink(path)
    #expect(mkfifo(path, 0o600) == 0)
    let error = #expect(throws: ProtFSError.self) { try controller.unlock() }
    #expect(error?.code == .malformed && error?.path == path, "\(String(describing: error))")
    #expect(error?.description.contains("not a regular file") == true)
  }
}
