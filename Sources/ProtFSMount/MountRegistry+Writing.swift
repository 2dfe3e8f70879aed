import Foundation
import ProtFS
import ProtFSSystem

/// What only the mount daemon does with the registry: adding its entry once the mount answers,
/// and removing it when the daemon ends.
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
      record, named: "\(record.pid).json", in: directory, options: AtomicFile.Options(durability: .unsynced))
  }

  /// Removes the entry of the daemon `pid`, if there is one.
  package func remove(pid: Int32) {
    _ = valueOrErrno(.unlink) { unlink(entryPath(pid: pid)) }
  }
}
