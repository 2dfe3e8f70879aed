import Foundation
import ProtFS
import ProtFSSystem

/// What only the mount daemon does with the registry: adding its entry once the mount answers
/// (and removing those of daemons that were killed, which could not remove their own), and
/// removing it when the daemon ends. Every change is relative to the registry's directory.
extension MountRegistry {
  /// Records `record`, replacing an entry of the same daemon (unsynced: it describes a running
  /// daemon, and an app's launch waits for it).
  package func register(_ record: MountRecord) throws(ProtFSError) {
    let state = try DirectoryHandle(path: device.stateDirectory)
    try state.makeDirectory(Self.directoryName, permissions: FilePermissions(rawValue: 0o700))
    let directory: DirectoryHandle
    do {
      directory = try state.openDirectory(Self.directoryName)
    } catch  where error.code == .notFound {
      return
    }
    try JSONStateFile.write(
      record, named: Self.entryName(pid: record.pid), in: directory, options: AtomicFile.Options(durability: .unsynced))
    for dead in records() where dead.pid != record.pid && !ProcessIdentity.isRunning(dead.pid) {
      Self.removeEntry(pid: dead.pid, in: directory)
    }
  }

  /// Removes the entry of the daemon `pid`, if there is one.
  package func remove(pid: Int32) {
    guard let directory = try? openDirectory() else { return }
    Self.removeEntry(pid: pid, in: directory)
  }

  private static func removeEntry(pid: Int32, in directory: DirectoryHandle) {
    _ = Kernel.unlinkat(directory.fd, entryName(pid: pid), 0)
  }
}
