import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// Drives a device's lock state: lock, unlock, reboot, passcode changes, and recovery of a
/// transition a crash interrupted (docs/semantics.md §3–4).
///
/// Every transition holds the `flock` on `.protfs/lock`, writes the journal, walks every container
/// applying the new state's table to permission bits, writes the new state, then removes the
/// journal. When an item cannot be brought into line the walk is undone and nothing changes.
public struct LockController: Sendable {
  /// The device.
  public let device: Device
  /// The clock (tests inject one).
  public var clock: @Sendable () -> Date
  /// How many threads walk the device.
  public var threads: Int
  /// The crash test hook (`PROTFS_CRASH_AFTER`).
  public var crashHook: CrashHook
  /// PBKDF2 rounds for passcodes set through this controller.
  public var passcodeIterations: Int
  /// Called with the state every transition committed (or went back to), once its record is
  /// written and the device's mounts enforce it (`mountSync`).
  public var afterCommit: @Sendable (ProtectionState) -> Void = { _ in }
  /// How a transition waits for the device's mounts to enforce the state it committed.
  public var mountSync = MountSync()

  /// A controller for `device`.
  public init(
    device: Device, clock: @escaping @Sendable () -> Date = { Date() }, threads: Int = 2,
    crashHook: CrashHook = .none, passcodeIterations: Int = PasscodeHash.defaultIterations
  ) {
    self.device = device
    self.clock = clock
    self.threads = threads
    self.crashHook = crashHook
    self.passcodeIterations = passcodeIterations
  }

  /// The current record (a new device's when none was written).
  public func record() throws(ProtFSError) -> LockRecord {
    try LockStore(device).record(now: clock())
  }

  // MARK: Transitions

  /// Locks the device; from before-first-unlock it stays there. `inactive` also makes the CX
  /// inactivity expiry happen, so complete-when-user-inactive behaves like complete until unlock.
  /// Locking a locked device applies the table again to items created meanwhile.
  ///
  /// With a `grace` (seconds), an unlocked device locks at once (protected data becomes
  /// unavailable, class B closes) but keeps the class A keys (and those of an expired CX) until
  /// the grace ends, as iOS keeps them about 10 s: `endGraceIfDue()` withdraws them then, and
  /// whoever locks must have it called (`startGraceEnder()` leaves a process that waits for it).
  /// Locking again during a grace does not lengthen it; locking again without one ends it now.
  @discardableResult
  public func lock(grace: TimeInterval = 0, inactive: Bool = false) throws(ProtFSError) -> TransitionReport {
    try transaction("lock") { (current: LockRecord) throws -> LockRecord in
      var next = current
      if current.state == .unlocked {
        next.state = .locked
        next.since = clock()
        next.classKeysUntil = grace > 0 ? clock().addingTimeInterval(grace) : nil
      } else if grace <= 0 {
        next.classKeysUntil = nil
      }
      if inactive && next.state == .locked { next.userInactive = true }
      return next
    }
  }

  /// Withdraws the class A keys once the lock's grace has ended: the table of the locked state
  /// then applies in full. Nil when there is nothing to do (no grace, not ended yet, or another
  /// transition came first).
  @discardableResult
  public func endGraceIfDue() throws(ProtFSError) -> TransitionReport? {
    // Read without the flock first: nearly always there is no grace, and nothing to wait for.
    guard let until = try record().classKeysUntil, until <= clock() else { return nil }
    return try transactionUnlessChanged("end of the lock's grace") { (current: LockRecord) throws -> LockRecord? in
      guard current.state == .locked, let until = current.classKeysUntil, until <= clock() else { return nil }
      var next = current
      next.classKeysUntil = nil
      return next
    }
  }

  /// Unlocks the device. When a passcode was set with `protfs passcode set`, `passcode` must match;
  /// after five wrong ones in a row attempts are refused for growing delays.
  @discardableResult
  public func unlock(passcode: String? = nil) throws(ProtFSError) -> TransitionReport {
    try transaction("unlock") { (current: LockRecord) throws -> LockRecord in
      if current.state != .unlocked, let hash = current.passcodeHash {
        try check(passcode, against: hash, current)
      }
      // A sealed device's class keys reach the keyring before the state commits, so that a mount
      // applying the unlocked state finds them; a transition that fails takes them back.
      if current.state != .unlocked {
        try releaseSealedKeys(passcode: passcode, recorded: current.passcodeHash != nil)
      }
      var next = current
      if current.state != .unlocked { next.since = clock() }
      next.state = .unlocked
      next.userInactive = false
      next.classKeysUntil = nil
      next.failedAttempts = 0
      next.retryAfter = nil
      return next
    }
  }

  /// Reboots the device: before-first-unlock, whatever the state was.
  @discardableResult
  public func reboot() throws(ProtFSError) -> TransitionReport {
    try transaction("reboot") { (current: LockRecord) throws -> LockRecord in
      var next = current
      next.state = .beforeFirstUnlock
      next.since = clock()
      next.userInactive = false
      next.classKeysUntil = nil
      return next
    }
  }

  /// Sets a passcode that unlock will ask for. The device must be unlocked; when a passcode was
  /// already set, `current` must match it.
  public func setPasscode(_ passcode: String, current: String? = nil) throws(ProtFSError) {
    guard !passcode.isEmpty else {
      throw ProtFSError(
        .invalidArgument, "The passcode must not be empty.", remedy: .advice("give at least one character"))
    }
    let hash = try PasscodeHash.make(passcode, iterations: passcodeIterations)
    _ = try replacePasscode(
      with: hash, current: current, operation: "passcode set", purpose: "set a passcode", sealedPasscode: passcode)
  }

  /// Removes the passcode: data protection goes off and every class stays available in every state.
  @discardableResult
  public func removePasscode(current: String? = nil) throws(ProtFSError) -> TransitionReport {
    try replacePasscode(
      with: nil, current: current, operation: "passcode remove", purpose: "remove the passcode", sealedPasscode: nil)
  }

  /// Sets (`hash`) or removes (nil) the passcode on an unlocked device; an existing passcode must
  /// be given as `current`. A sealed device's class keys are wrapped with `sealedPasscode` into a
  /// pending keybag before the record changes, and that keybag is committed after.
  private func replacePasscode(
    with hash: PasscodeHash?, current: String?, operation: String, purpose: String, sealedPasscode: String?
  ) throws(ProtFSError) -> TransitionReport {
    let report = try transaction(operation) { (record: LockRecord) throws -> LockRecord in
      try requireUnlocked(record, to: purpose)
      if let old = record.passcodeHash { try check(current, against: old, record) }
      try prepareSealedKeys(passcode: sealedPasscode)
      var next = record
      next.passcodeEnabled = hash != nil
      next.passcodeHash = hash
      return next
    }
    try commitSealedKeys()
    return report
  }

  /// Finishes a transition that a crash interrupted, if the journal says there was one; nil otherwise.
  ///
  /// Costs one `stat` when there is no journal, so the command line runs it before every command.
  @discardableResult
  public func recoverInterruptedTransition() throws(ProtFSError) -> TransitionReport? {
    guard LockStore.hasJournal(device) else { return nil }
    let store = try LockStore(device)
    return try store.exclusively { () throws(ProtFSError) -> TransitionReport? in
      try recover(store)
    }
  }

  // MARK: Machinery

  func recover(_ store: LockStore) throws(ProtFSError) -> TransitionReport? {
    guard let journal = try store.journal() else { return nil }
    var report = try walk(store, journal.operation, from: journal.previous, to: journal.next, fullCheck: true)
    report.recovered = true
    return report
  }

  /// Runs a transition under the flock: recovers first, asks `decide` for the next record, walks.
  private func transaction(_ operation: String, _ decide: (LockRecord) throws -> LockRecord)
    throws(ProtFSError) -> TransitionReport
  {
    guard let report = try transactionUnlessChanged(operation, decide) else {
      preconditionFailure("a transition whose decision is never nil returned nothing")
    }
    return report
  }

  /// As `transaction`, except that `decide` may return nil to change nothing (and return nil).
  private func transactionUnlessChanged(_ operation: String, _ decide: (LockRecord) throws -> LockRecord?)
    throws(ProtFSError) -> TransitionReport?
  {
    let store = try LockStore(device)
    return try store.exclusively { () throws(ProtFSError) -> TransitionReport? in
      _ = try recover(store)
      let current = try store.record(now: clock())
      var next: LockRecord
      do {
        guard let decided = try decide(current) else { return nil }
        next = decided
      } catch let failure as PasscodeFailure {
        try store.write(failure.record)
        throw failure.error
      } catch let error as ProtFSError {
        throw error
      } catch {
        throw ProtFSError(.io, "Cannot \(operation): \(error).")
      }
      next.generation = current.generation + 1
      next.logAvailabilityChange(from: current, at: clock())
      let strengthening = next.protection.restrictsAtLeast(current.protection) && next.protection != current.protection
      // Whatever the walk leaves committed, a sealed device's keyring then holds only the keys its
      // state allows. Dropping a failure here is safe: a mount never takes a key the state
      // withdraws, and the next transition evicts it again.
      defer { try? withdrawSealedKeys(for: store.record(now: clock()).protection) }
      return try walk(store, operation, from: current, to: next, fullCheck: !strengthening)
    }
  }

  /// Journal, walk, commit; on failure, walk back and commit the previous record.
  private func walk(
    _ store: LockStore, _ operation: String, from previous: LockRecord, to next: LockRecord,
    fullCheck: Bool
  ) throws(ProtFSError) -> TransitionReport {
    // A sealed device's lock is its keys (evicted after the commit), not its files' modes: it walks
    // nothing, so its cost does not grow with the number of files, and the record's atomic write is
    // the whole transition (no journal, no mode key, no libcrypto: each a cost of every lock).
    if try SealStore(device: device).isSealed() {
      crashHook.step()
      try store.write(next)
      committed(next.protection)
      crashHook.step()
      return TransitionReport(
        operation: operation, from: previous.protection, to: next.protection, visited: 0, restricted: 0, restored: 0,
        recovered: false, hardLinked: [], unauthenticated: [], garbageClass: [])
    }
    // The saved modes are authenticated with libcrypto: without it, nothing is begun.
    try ProtFSError.requireLibcrypto()
    let journal = TransitionJournal(
      operation: operation, previous: previous, next: next, pid: Kernel.getpid(), started: clock())
    try store.write(journal)
    crashHook.step()
    let ownerAccess = OwnerAccessLog(directory: store.directory, crash: crashHook)
    let key = try ModeKey.loadOrCreate(in: store.directory)
    let tally = try enforce(next.protection, fullCheck: fullCheck, ownerAccess: ownerAccess, key: key)
    if !tally.failures.isEmpty {
      let undo = TransitionJournal(
        operation: "undo \(operation)", previous: next, next: previous, pid: Kernel.getpid(), started: clock())
      try store.write(undo)
      // The transition's failures are the error to report: the undo walks the same items again.
      _ = try? enforce(previous.protection, fullCheck: true, ownerAccess: ownerAccess, key: key)
      try store.write(previous)
      committed(previous.protection)
      ownerAccess.clear()
      try store.removeJournal()
      throw Self.failure(operation, tally.failures)
    }
    try store.write(next)
    committed(next.protection)
    crashHook.step()
    ownerAccess.clear()
    try store.removeJournal()
    crashHook.step()
    return TransitionReport(
      operation: operation, from: previous.protection, to: next.protection, visited: tally.visited,
      restricted: tally.restricted, restored: tally.restored, recovered: false, hardLinked: tally.hardLinked.sorted(),
      unauthenticated: tally.unauthenticated.sorted(), garbageClass: tally.garbageClass.sorted())
  }

  /// Applies `target`'s table to every item of every container (of `containers` instead of
  /// `Containers/` when given: containers staged outside it).
  package func enforce(
    _ target: ProtectionState, fullCheck: Bool, ownerAccess: OwnerAccessLog, key: ModeKey,
    containers: DirectoryHandle? = nil
  ) throws(ProtFSError) -> ModeEnforcer.Tally {
    // After a crash while an item was widened, every item must be looked at to find it.
    let enforcer = ModeEnforcer(
      target: target, checksAvailableItems: fullCheck || !ownerAccess.isEmpty, crash: crashHook,
      ownerAccess: ownerAccess, key: key)
    let walker = DeviceWalker(
      device: device, readsClasses: !target.restrictsNothing, threads: threads, ownerAccess: ownerAccess,
      containers: containers)
    let (tallies, summary) = try walker.walk(make: { ModeEnforcer.Tally() }) { tally, entry in
      enforcer.apply(entry, &tally)
    }
    var total = ModeEnforcer.Tally()
    for tally in tallies { total.add(tally) }
    total.failures += summary.failures
    // An item removed while the walk ran is no failure: there is nothing left to protect.
    total.failures.removeAll { $0.errno == ENOENT }
    return total
  }

  static func failure(_ operation: String, _ failures: [ProtFSError]) -> ProtFSError {
    let first = failures.sorted { ($0.path ?? "") < ($1.path ?? "") }[0]
    let more = failures.count > 1 ? " (and \(failures.count - 1) more)" : ""
    var base = first.message.hasSuffix(".") ? String(first.message.dropLast()) : first.message
    if let initial = base.first, base.hasPrefix("Cannot ") || base.hasPrefix("The ") {
      base = initial.lowercased() + base.dropFirst()
    }
    return ProtFSError(
      first.code, "Cannot \(operation) the device: \(base)\(more). Nothing was changed.", path: first.path,
      errno: first.errno,
      remedy: first.remedy ?? .retry(operation: operation))
  }

  private func requireUnlocked(_ record: LockRecord, to action: String) throws(ProtFSError) {
    guard record.state == .unlocked else {
      throw ProtFSError(
        .protectedDataUnavailable, "Cannot \(action) while the device '\(device.root)' is \(record.state).",
        errno: EPERM, remedy: .unlock)
    }
  }

  /// Checks a passcode against the stored hash, counting failures and enforcing the backoff.
  func check(_ passcode: String?, against hash: PasscodeHash, _ record: LockRecord) throws {
    let now = clock()
    if let retryAfter = record.retryAfter, retryAfter > now {
      let seconds = Int(retryAfter.timeIntervalSince(now).rounded(.up))
      throw ProtFSError(
        .permissionDenied,
        "The device '\(device.root)' refuses passcodes for \(Counted.text(seconds, "more second")) after \(Counted.text(record.failedAttempts, "wrong one")).",
        errno: EPERM, remedy: .advice("wait, then try again"))
    }
    guard let passcode else {
      throw ProtFSError(
        .invalidArgument, "The device '\(device.root)' has a passcode, and none was given.",
        remedy: .advice("give it with --passcode-file FILE (- for standard input), --passcode CODE or PROTFS_PASSCODE"))
    }
    guard try hash.matches(passcode) else {
      var updated = record
      updated.failedAttempts += 1
      let delay = PasscodeBackoff.delay(afterFailures: updated.failedAttempts)
      updated.retryAfter = delay > 0 ? now.addingTimeInterval(delay) : nil
      let wait = delay > 0 ? " Further attempts are refused for \(Int(delay)) seconds." : ""
      throw PasscodeFailure(
        record: updated,
        error: ProtFSError(
          .permissionDenied,
          "The passcode is wrong (\(Counted.text(updated.failedAttempts, "failed attempt")) in a row).\(wait)",
          errno: EPERM, remedy: .advice("check the passcode and try again")))
    }
  }
}

/// A wrong passcode: the record with the failure counted, to be written before the error is thrown.
struct PasscodeFailure: Error {
  var record: LockRecord
  var error: ProtFSError
}

/// What a transition did.
public struct TransitionReport: Sendable, Equatable {
  /// `lock`, `unlock`, `reboot`, `passcode remove`, …
  public var operation: String
  /// The protection state before.
  public var from: ProtectionState
  /// The protection state after.
  public var to: ProtectionState
  /// Files and directories looked at.
  public var visited: Int
  /// Items whose permission bits were removed.
  public var restricted: Int
  /// Items whose original mode came back.
  public var restored: Int
  /// Whether this finished a transition a crash had interrupted.
  public var recovered: Bool
  /// Files left unchanged because they have more than one link (one may be outside the device).
  public var hardLinked: [String] = []
  /// Items whose saved-mode record protfs had not written: it was ignored, and at unlock the
  /// item got mode 0600 (0700 for a directory) instead.
  public var unauthenticated: [String] = []
  /// Items left unchanged because their name is not UTF-8 (shown escaped). Always empty: such
  /// items are locked like any other; kept for the readers of `lock --json`.
  public var notUTF8: [String] = []
  /// Items whose class attribute holds garbage (a value no class has): a lock treats them as
  /// class complete, the strictest, instead of refusing to lock.
  public var garbageClass: [String] = []
}
