import Foundation
import ProtFSSystem

/// The lock state of a simulated device (docs/semantics.md §3).
public enum LockState: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
  /// After boot or `protfs reboot`, before the first unlock: only class D is available.
  case beforeFirstUnlock
  /// Unlocked: every class is available.
  case unlocked
  /// Locked after a first unlock: classes A and B (and CX once the user is inactive) are unavailable.
  case locked

  /// The words `protfs status` prints, for example `before first unlock`.
  public var description: String {
    switch self {
    case .beforeFirstUnlock: "before first unlock"
    case .unlocked: "unlocked"
    case .locked: "locked"
    }
  }
}

/// Everything that decides which data is available: the lock state, whether a passcode is set,
/// and whether the user-inactivity expiry of class CX has happened.
///
/// The class × state table of docs/semantics.md §3 lives in `allows(_:_:)`, and only there.
public struct ProtectionState: Sendable, Hashable, Codable {
  /// The lock state.
  public var lockState: LockState
  /// Whether a passcode is set; without one, data protection is off and everything stays available.
  public var passcodeEnabled: Bool
  /// Whether the CX expiry has happened (`protfs lock --inactive`); cleared by the next unlock.
  public var userInactive: Bool
  /// Whether the class A keys (and those of an expired CX) are still held: the grace after a lock,
  /// during which the device is locked and everything else of the lock applies (iOS drops them
  /// about 10 s after the lock).
  public var classKeysHeld: Bool

  /// Creates a state.
  public init(
    lockState: LockState, passcodeEnabled: Bool = true, userInactive: Bool = false, classKeysHeld: Bool = false
  ) {
    self.lockState = lockState
    self.passcodeEnabled = passcodeEnabled
    self.userInactive = userInactive
    self.classKeysHeld = classKeysHeld
  }

  private enum CodingKeys: String, CodingKey { case lockState, passcodeEnabled, userInactive, classKeysHeld }

  /// Decodes a state; one written before the grace existed holds no keys.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    lockState = try container.decode(LockState.self, forKey: .lockState)
    passcodeEnabled = try container.decode(Bool.self, forKey: .passcodeEnabled)
    userInactive = try container.decode(Bool.self, forKey: .userInactive)
    classKeysHeld = try container.decodeIfPresent(Bool.self, forKey: .classKeysHeld) ?? false
  }

  /// iOS's `UIApplication.isProtectedDataAvailable`: true when unlocked or when no passcode is set.
  public var isProtectedDataAvailable: Bool { !passcodeEnabled || lockState == .unlocked }

  /// Whether an item of class `protectionClass` allows `access` in this state (the table of docs/semantics.md §3).
  public func allows(_ protectionClass: ProtectionClass, _ access: ProtectedDataAccess) -> Bool {
    if !passcodeEnabled || protectionClass == .none { return true }
    switch lockState {
    case .unlocked:
      return true
    case .beforeFirstUnlock:
      return false
    case .locked:
      switch protectionClass {
      case .none, .completeUntilFirstUserAuthentication: return true
      case .complete: return classKeysHeld
      case .completeUnlessOpen: return access == .create || access == .openHandle
      case .completeWhenUserInactive: return !userInactive || classKeysHeld
      }
    }
  }

  /// Whether permission bits must be removed from an item of `kind` and class `protectionClass`:
  /// a file when it cannot be opened, a directory when nothing can be created in it.
  package func restricts(_ kind: FileKind, _ protectionClass: ProtectionClass) -> Bool {
    kind == .directory ? !allows(protectionClass, .create) : !allows(protectionClass, .read)
  }

  /// Whether every item is available, so that no permission bit may stay removed.
  package var restrictsNothing: Bool { isProtectedDataAvailable }

  /// Whether everything `other` restricts, this state restricts too: then a transition from `other`
  /// only adds restrictions, and items this state leaves alone need no look at their saved mode.
  package func restrictsAtLeast(_ other: ProtectionState) -> Bool {
    for cls in ProtectionClass.allCases {
      for kind in [FileKind.file, .directory] where other.restricts(kind, cls) && !restricts(kind, cls) {
        return false
      }
    }
    return true
  }
}

/// What a caller wants to do with protected data; each column of the table of docs/semantics.md §3.
public enum ProtectedDataAccess: String, Sendable, Codable, CaseIterable {
  /// Open an existing file and read it.
  case read
  /// Open an existing file and write it.
  case write
  /// Create a new file in a directory of the class.
  case create
  /// Read or write through a descriptor opened while the data was available.
  case openHandle

  /// The NSCocoaErrorDomain code Foundation reports for a denial: 257 (`NSFileReadNoPermissionError`)
  /// for reads, 513 (`NSFileWriteNoPermissionError`) for writes and creation.
  public var cocoaErrorCode: Int {
    switch self {
    case .read: 257
    case .write, .create: 513
    case .openHandle: 257
    }
  }
}

extension ProtectionState {
  /// The state as a mount's root reports it in `user.protfs.mount-state`: JSON with sorted keys,
  /// so that the daemon's answer and a command's expectation compare byte for byte.
  public func mountStateValue() throws -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return try encoder.encode(self)
  }
}
