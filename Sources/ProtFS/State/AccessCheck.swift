import Foundation
import ProtFSSystem

extension Device {
  /// The protection state now: lock state, passcode, CX expiry. A device never locked (or never
  /// initialised) is unlocked with a passcode, like a phone right after setup.
  public func protectionState() throws(ProtFSError) -> ProtectionState {
    guard isInitialized else { return LockRecord.initial(at: Date()).protection }
    return try LockStore(self).record(now: Date()).protection
  }

  /// iOS's `isProtectedDataAvailable`: true when unlocked or when no passcode is set.
  public var isProtectedDataAvailable: Bool { (try? protectionState().isProtectedDataAvailable) ?? false }

  /// As `checkAccess(_:for:)`, for an absolute path (or one relative to the current directory).
  public func checkAccess(atPath path: String, for access: ProtectedDataAccess) throws(ProtFSError) {
    try checkAccess(try resolve(path), for: access)
  }

  /// Throws when the class × state table of docs/semantics.md §3 forbids `access` to the item at `path` now;
  /// the ProtFS library calls this for its own callers, root included.
  ///
  /// For `.create`, `path` is the item about to be created and the class is its parent's (what it
  /// would inherit). For `.openHandle`, `path` is a file opened while its data was available:
  /// complete-unless-open handles keep working after a lock, complete ones do not.
  /// The error is `.protectedDataUnavailable` with errno `EPERM`, as iOS denies.
  public func checkAccess(_ path: DevicePath, for access: ProtectedDataAccess) throws(ProtFSError) {
    try checkAccess(path, for: access, in: try protectionState())
  }

  /// As `checkAccess(_:for:)`, in `state` rather than the one read from the device now.
  public func checkAccess(_ path: DevicePath, for access: ProtectedDataAccess, in state: ProtectionState)
    throws(ProtFSError)
  {
    guard !state.isProtectedDataAvailable else { return }
    let target = access == .create ? path.parent : path
    try checkAccess(path, class: try effectiveClass(of: target).protectionClass, for: access, in: state)
  }

  /// As `checkAccess(_:for:in:)` for an item (or, for `.create`, a parent) whose effective class
  /// `cls` the caller read from the item it holds open: the decision on a descriptor.
  public func checkAccess(
    _ path: DevicePath, class cls: ProtectionClass, for access: ProtectedDataAccess, in state: ProtectionState
  ) throws(ProtFSError) {
    guard !state.isProtectedDataAvailable, !state.allows(cls, access) else { return }
    let verb =
      switch access {
      case .read: "read"
      case .write: "write"
      case .create: "create"
      case .openHandle: "use the open file"
      }
    let classText = access == .create ? "its directory's protection class" : "its protection class"
    throw ProtFSError(
      .protectedDataUnavailable,
      "Cannot \(verb) '\(absolutePath(path))': \(classText) \(cls.name) is not available while the device is \(state.lockState)\(state.userInactive && cls == .completeWhenUserInactive ? " and the user inactive" : "").",
      path: absolutePath(path), errno: EPERM,
      remedy: state.lockState == .beforeFirstUnlock || state.lockState == .locked ? .unlock : nil)
  }
}
