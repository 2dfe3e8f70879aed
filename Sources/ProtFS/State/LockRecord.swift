import Foundation

/// What `<device>/.protfs/lock-state.json` holds: the device's lock state and passcode.
///
/// When the file is absent the device is new: unlocked, with a passcode set that unlock does not
/// ask for (a phone right after its owner set it up).
public struct LockRecord: Sendable, Equatable, Codable {
  /// The file format, for future changes.
  public var format = 1
  /// The lock state.
  public var state: LockState
  /// When the device entered `state`.
  public var since: Date
  /// Whether a passcode is set (data protection on).
  public var passcodeEnabled: Bool
  /// The passcode's salted slow hash; nil while the passcode is the device's built-in one that
  /// unlock does not ask for.
  public var passcodeHash: PasscodeHash?
  /// Whether the CX inactivity expiry happened since the last unlock.
  public var userInactive: Bool
  /// Wrong passcodes since the last successful unlock.
  public var failedAttempts: Int
  /// Unlock attempts are refused until then (after five wrong passcodes).
  public var retryAfter: Date?
  /// While locked: the end of the lock's grace, until which the class A keys (and those of an
  /// expired CX) are still held (`protfs lock --grace`); nil when they are not.
  public var classKeysUntil: Date?
  /// Increases with every transition, so watchers and graceful locks can tell them apart.
  public var generation: Int
  /// The latest changes of protected-data availability, oldest first, at most
  /// `availabilityLogLimit`: a watcher that wakes after several quick transitions posts every
  /// notification they caused, not only the difference between the first and the last state.
  /// Absent in files written before it existed.
  public var availabilityChanges: [AvailabilityChange]?

  /// How many availability changes a record keeps.
  public static let availabilityLogLimit = 32

  /// The record of a new device.
  public static func initial(at date: Date) -> LockRecord {
    LockRecord(
      state: .unlocked, since: date, passcodeEnabled: true, passcodeHash: nil, userInactive: false,
      failedAttempts: 0, retryAfter: nil, classKeysUntil: nil, generation: 0)
  }

  /// The state whose table applies to files.
  public var protection: ProtectionState {
    ProtectionState(
      lockState: state, passcodeEnabled: passcodeEnabled, userInactive: userInactive,
      classKeysHeld: state == .locked && classKeysUntil != nil)
  }

  /// Logs the availability change from `previous` to this record, made at `time`, if there is one.
  package mutating func logAvailabilityChange(from previous: LockRecord, at time: Date) {
    let available = protection.isProtectedDataAvailable
    guard available != previous.protection.isProtectedDataAvailable else { return }
    var log = availabilityChanges ?? []
    log.append(AvailabilityChange(generation: generation, available: available, state: state, time: time))
    availabilityChanges = Array(log.suffix(Self.availabilityLogLimit))
  }
}

/// One change of protected-data availability, as a transition committed it.
public struct AvailabilityChange: Sendable, Equatable, Codable {
  /// The generation of the record the transition committed.
  public var generation: Int
  /// Whether protected data became available (true) or unavailable (false).
  public var available: Bool
  /// The lock state the transition went to.
  public var state: LockState
  /// When the transition decided on the change.
  public var time: Date
}

/// A passcode stored as PBKDF2-HMAC-SHA256 with a random salt.
public struct PasscodeHash: Sendable, Equatable, Codable {
  /// Always `pbkdf2-hmac-sha256`.
  public var algorithm: String
  /// PBKDF2 rounds.
  public var iterations: Int
  /// The salt, base64.
  public var salt: String
  /// The derived key, base64.
  public var hash: String

  /// Creates a value from its parts.
  package init(algorithm: String, iterations: Int, salt: String, hash: String) {
    self.algorithm = algorithm
    self.iterations = iterations
    self.salt = salt
    self.hash = hash
  }
}
