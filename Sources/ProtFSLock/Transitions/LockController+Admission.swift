import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// Containers built outside `Containers/` (an import's) meet the device's state as if they had
/// been there at the last transition: a lock's table applied by the lock's own code
/// (`ModeEnforcer`), so that the unlock gives back what it took, as it does for every item.
extension LockController: ContainerAdmission {
  /// Under the transition lock: finishes a transition a crash interrupted, applies the current
  /// state's table to every item of the containers in `staged` (restricting what the state makes
  /// unavailable, its original mode and owner recorded as a lock records them), then calls `move`.
  /// A state that restricts nothing (unlocked, or no passcode) changes nothing, nor does a sealed
  /// device's, whose lock is its keys and whose unlock gives back no mode. Throws, without calling
  /// `move`, when an item cannot be brought into line.
  public func admit(_ staged: DirectoryHandle, move: () throws(ProtFSError) -> Void) throws(ProtFSError) {
    let store = try LockStore(device)
    try store.exclusively { () throws(ProtFSError) in
      _ = try recover(store)
      let state = try store.record(now: clock()).protection
      if !state.restrictsNothing, try !SealStore(device: device).isSealed() {
        // The saved modes are authenticated with libcrypto, as a lock's are.
        try ProtFSError.requireLibcrypto()
        let ownerAccess = OwnerAccessLog(directory: store.directory, crash: crashHook)
        defer { ownerAccess.clear() }
        let key = try ModeKey.loadOrCreate(in: store.directory)
        let tally = try enforce(state, fullCheck: false, ownerAccess: ownerAccess, key: key, containers: staged)
        if !tally.failures.isEmpty { throw Self.failure("admit the imported containers to", tally.failures) }
      }
      try move()
    }
  }
}
