import Foundation
import ProtFSSystem

/// The lock that serializes what changes a device's state as a whole: lock transitions, erases
/// and removals through the trash. Each holds an exclusive `flock` on `.protfs/lock` while it runs,
/// so that no two of them (in any processes) interleave: a transition's record is never written in
/// the middle of an erase, and two commands never empty the trash at the same time.
extension Device {
  /// The file under `.protfs/` that the `flock` is held on; it stays through an erase.
  package static let stateLockName = "lock"

  /// Runs `body` holding the exclusive `flock` on `stateLockName` in `state` (the device's
  /// `.protfs/`); waits for another holder to finish. Closing the file releases the lock, as does
  /// the process dying, so a `kill -9` never leaves it held.
  package static func exclusively<T>(
    in state: DirectoryHandle, _ body: () throws(ProtFSError) -> T
  ) throws(ProtFSError) -> T {
    let file = try state.openDescriptor(
      stateLockName, flags: O_RDWR | O_CREAT, permissions: FilePermissions(rawValue: 0o600))
    defer { file.close() }
    _ = try Kernel.flock(file.rawValue, LOCK_EX).orThrow("lock", path: state.pathOf(stateLockName))
    return try body()
  }
}
