import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// What `protfs status` shows: the state, the passcode, and per class how many items there are
/// and whether they are available now, plus anything out of line with the state.
public struct LockStatus: Sendable, Codable {
  /// The lock state.
  public var state: LockState
  /// When the device entered it.
  public var since: Date
  /// Whether data protection is on: true on a new device, false after `protfs passcode remove`
  /// (then every class stays available in every state).
  public var dataProtection: Bool
  /// Whether a passcode is set (with `protfs passcode set`), as `status` says it: unlock asks for it.
  public var passcode: Bool
  /// The same as `passcode`, under the name it had when `passcode` meant data protection on.
  public var passcodeRequired: Bool
  /// iOS's `isProtectedDataAvailable`.
  public var protectedDataAvailable: Bool
  /// Whether the CX inactivity expiry happened since the last unlock.
  public var userInactive: Bool
  /// Wrong passcodes in a row.
  public var failedAttempts: Int
  /// Unlock attempts are refused until then.
  public var retryAfter: Date?
  /// While locked, the end of the lock's grace: until then class A (and an expired CX) stays
  /// available.
  public var classKeysUntil: Date?
  /// A transition a crash interrupted and no command finished yet.
  public var interruptedTransition: String?
  /// One row per class, weakest first.
  public var classes: [ClassStatus]
  /// Items whose permission bits do not match the state (at most 100 are listed).
  public var inconsistencies: [Inconsistency]
  /// How many inconsistencies there are in all.
  public var inconsistencyCount: Int
  /// Files with more than one link: a lock leaves them unchanged, since a link may be outside the
  /// device (at most 100 are listed).
  public var hardLinked: [String] = []
  /// How many such files there are in all.
  public var hardLinkedCount = 0
  /// Items an unprivileged protfs could not inspect because their mode hides their attributes
  /// (locked files of the caller, or items of other users); run as root to see them.
  public var uninspectable: Int
  /// The device's active mounts (`protfs mount`).
  public var mounts: [MountRecord] = []
  /// Whether the device is sealed (docs/sealed.md): its files are encrypted with keys of their own,
  /// and the lock evicts class keys instead of changing modes.
  public var sealed = false
  /// Whether a `protfs seal` began and did not finish: the next protfs command finishes it.
  public var beingSealed = false

  /// A class's row.
  public struct ClassStatus: Sendable, Codable {
    /// The protfs name, for example `complete`.
    public var name: String
    /// The raw value.
    public var rawValue: String
    /// Files of this class.
    public var files: Int
    /// Directories of this class.
    public var directories: Int
    /// Whether closed files can be opened now.
    public var available: Bool
    /// Whether new files can be created in its directories now.
    public var creatable: Bool
    /// Whether handles opened before the lock still work.
    public var openHandlesWork: Bool

    /// The class is `className` and `classRawValue` here, as in `ls --json` and `get-class --json`.
    private enum CodingKeys: String, CodingKey {
      case name = "className", rawValue = "classRawValue", files, directories, available, creatable, openHandlesWork
    }
  }

  /// An item out of line with the state.
  public struct Inconsistency: Sendable, Codable, Equatable {
    /// The item's absolute path.
    public var path: String
    /// What is wrong, as a sentence.
    public var problem: String
  }
}

extension LockController {
  /// The status, walking every container to count items and find inconsistencies.
  public func status() throws(ProtFSError) -> LockStatus {
    let store = try LockStore(device)
    let record = try store.record(now: clock())
    let journal = try? store.journal()
    let state = record.protection
    var keyProblem: String?
    var key: ModeKey?
    var verifies = true
    do {
      key = try ModeKey.load(from: store.directory)
    } catch {
      // Unreadable for this user: records cannot be checked, which is no sign of forgery.
      verifies = false
      if error.errno != EACCES { keyProblem = error.description }
    }
    // A sealed device's lock leaves modes as they are: there is nothing to check them against.
    let sealed = try SealStore(device: device).isSealed()
    let walker = DeviceWalker(device: device, readsClasses: true, threads: threads)
    let (tallies, summary) = try walker.walk(make: { Inspection() }) { [key, verifies] inspection, entry in
      inspection.inspect(entry, state, key: key, verifies: verifies, checksModes: !sealed)
    }
    var total = Inspection()
    if let keyProblem {
      total.problems.append(.init(path: store.directory.pathOf(ModeKey.fileName), problem: keyProblem))
    }
    for tally in tallies { total.add(tally) }
    for failure in summary.failures {
      total.problems.append(.init(path: failure.path ?? device.root, problem: failure.description))
    }
    let classes = ProtectionClass.byStrength.map { cls in
      LockStatus.ClassStatus(
        name: cls.name, rawValue: cls.rawValue, files: total.files[cls, default: 0],
        directories: total.directories[cls, default: 0], available: state.allows(cls, .read),
        creatable: state.allows(cls, .create), openHandlesWork: state.allows(cls, .openHandle))
    }
    let sorted = total.problems.sorted { $0.path < $1.path }
    var status = LockStatus(
      state: record.state, since: record.since, dataProtection: record.passcodeEnabled,
      passcode: record.passcodeHash != nil, passcodeRequired: record.passcodeHash != nil,
      protectedDataAvailable: state.isProtectedDataAvailable,
      userInactive: record.userInactive, failedAttempts: record.failedAttempts, retryAfter: record.retryAfter,
      classKeysUntil: record.state == .locked ? record.classKeysUntil : nil, interruptedTransition: journal?.operation,
      classes: classes,
      inconsistencies: Array(sorted.prefix(100)), inconsistencyCount: sorted.count,
      hardLinked: Array(total.hardLinked.sorted().prefix(100)), hardLinkedCount: total.hardLinked.count,
      uninspectable: total.uninspectable)
    status.mounts = MountRegistry(device: device).active()
    status.sealed = sealed
    status.beingSealed = isBeingSealed
    return status
  }
}

/// Counts and checks of a status walk, per worker.
private struct Inspection: Sendable {
  var files: [ProtectionClass: Int] = [:]
  var directories: [ProtectionClass: Int] = [:]
  var problems: [LockStatus.Inconsistency] = []
  var hardLinked: [String] = []
  var uninspectable = 0

  mutating func add(_ other: Inspection) {
    uninspectable += other.uninspectable
    hardLinked += other.hardLinked
    files.merge(other.files, uniquingKeysWith: +)
    directories.merge(other.directories, uniquingKeysWith: +)
    problems += other.problems
  }

  mutating func inspect(_ entry: WalkEntry, _ state: ProtectionState, key: ModeKey?, verifies: Bool, checksModes: Bool)
  {
    let path = entry.path
    if let error = entry.classError {
      if error.errno == EACCES {
        uninspectable += 1
        return
      }
      let treatment = error.code == .corruptAttribute ? " Transitions treat it as class complete; set its class." : ""
      problems.append(.init(path: path, problem: error.description + treatment))
    }
    guard let cls = entry.protectionClass else { return }
    if entry.kind == .directory { directories[cls, default: 0] += 1 } else { files[cls, default: 0] += 1 }
    guard checksModes else { return }
    let observed: ObservedMode
    do {
      guard let read = try observe(entry, key: key, verifies: verifies) else { return }
      observed = read
    } catch {
      if error.errno == EACCES {
        uninspectable += 1
      } else if error.errno != ENOENT {
        problems.append(.init(path: path, problem: error.description))
      }
      return
    }
    check(observed, of: entry, cls, state)
  }

  /// What the walk read of an item's mode.
  private struct ObservedMode {
    /// The mode it has.
    var mode: UInt32
    /// Its saved-mode record, when it has an authentic one (or any, when records are not verified).
    var saved: SavedModeRecord?
    /// Whether a lock hands the item to root.
    var handedOver = false
    /// Whether it is a file with more than one link (which transitions leave alone).
    var isHardLinked = false
  }

  /// Reads the mode and saved-mode record of `entry`; nil when the record is refused (the problem
  /// is recorded).
  private mutating func observe(_ entry: WalkEntry, key: ModeKey?, verifies: Bool) throws(ProtFSError)
    -> ObservedMode?
  {
    let path = entry.path
    let status = try entry.parent.status(entry.name)
    var observed = ObservedMode(mode: status.permissions.rawValue)
    if entry.kind != .directory, status.linkCount > 1 {
      observed.isHardLinked = true
      hardLinked.append(path)
    }
    guard FastAttributes.hasSavedMode(entry.parent, entry.name) else { return observed }
    let item = try ItemHandle(entry.parent, entry.name)
    let held = try item.status(path: path)
    let safeMode = "0" + String(ModeEnforcer.safeMode(entry.kind), radix: 8)
    switch try ModeEnforcer.readRecord(item, held, path, key: key, nil) {
    case .authentic(let record),
      .unauthenticated(let record, legacy: _) where !verifies:
      observed.saved = record
      observed.handedOver = ModeEnforcer.handsOver(originalOwner: record.uid)
    case .unauthenticated(let claimed, let legacy):
      let origin =
        legacy
        ? "it holds a bare mode (0\(String(claimed.mode, radix: 8))) as an older protfs wrote it, without authentication"
        : key == nil
          ? "this device has no secret to check it with (it was removed)"
          : "protfs did not write it for this item as it is now (planted, or copied from another item)"
      problems.append(
        .init(
          path: path,
          problem:
            "Its saved-mode record is not authentic: \(origin). Unlock ignores it and gives the item mode \(safeMode); set the mode you want afterwards."
        ))
      return nil
    case .garbage:
      problems.append(
        .init(
          path: path,
          problem:
            "Its saved-mode record is not a record protfs writes. Unlock ignores it and gives the item mode \(safeMode); set the mode you want afterwards."
        ))
      return nil
    case nil: break
    }
    return observed
  }

  /// Records a problem when the mode `observed` of `entry` is not what its class `cls` has in
  /// `state`.
  private mutating func check(
    _ observed: ObservedMode, of entry: WalkEntry, _ cls: ProtectionClass, _ state: ProtectionState
  ) {
    let (path, mode) = (entry.path, observed.mode)
    let octal = { (m: UInt32) in "0" + String(m, radix: 8) }
    let restricted = state.restricts(entry.kind, cls)
    if restricted, observed.saved == nil, ModeEnforcer.restrictedMode(mode, entry.kind, handedOver: false) != mode,
      !observed.isHardLinked
    {
      problems.append(
        .init(
          path: path,
          problem:
            "Its class \(cls.name) is unavailable while \(state.lockState), but its mode \(octal(mode)) still allows access (created after the last transition?); run the last transition again to apply it."
        ))
    } else if !restricted, let saved = observed.saved?.mode {
      problems.append(
        .init(
          path: path,
          problem:
            "It is still locked out (mode \(octal(mode)), original \(octal(saved))) although its class \(cls.name) is available; unlocking the device restores it."
        ))
    } else if restricted, let saved = observed.saved?.mode,
      ModeEnforcer.restrictedMode(saved, entry.kind, handedOver: observed.handedOver) != mode
    {
      problems.append(
        .init(
          path: path,
          problem:
            "Its mode changed to \(octal(mode)) while locked (original \(octal(saved))); the next transition sets it right."
        ))
    }
  }
}
