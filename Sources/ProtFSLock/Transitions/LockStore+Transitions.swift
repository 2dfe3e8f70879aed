import Foundation
import ProtFS
import ProtFSSystem

/// What only the lock simulator does with its files: writing the state record and the
/// transition journal, and holding the `flock` on `.protfs/lock` that serializes transitions.
extension LockStore {
  package static let lockFileName = Device.stateLockName

  package func write(_ record: LockRecord) throws(ProtFSError) { try write(record, to: Self.stateFileName) }

  package func journal() throws(ProtFSError) -> TransitionJournal? {
    try read(Self.journalFileName, remedy: .inspectJournal)
  }

  package func write(_ journal: TransitionJournal) throws(ProtFSError) { try write(journal, to: Self.journalFileName) }

  package func removeJournal() throws(ProtFSError) {
    try directory.removeFileIfPresent(Self.journalFileName, action: "remove the transition journal")
  }

  /// Runs `body` holding the exclusive `flock` on `.protfs/lock` (`Device.exclusively`); waits for
  /// another holder to finish.
  package func exclusively<T>(_ body: () throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    try Device.exclusively(in: directory, body)
  }

  /// Replaces the file `name` with `value` encoded (`JSONStateFile`).
  private func write<T: Encodable>(_ value: T, to name: String) throws(ProtFSError) {
    try Self.replace(name, in: directory, with: JSONStateFile.encode(value, path: directory.pathOf(name)))
  }

  /// Temp file, `fdatasync`, rename (`AtomicFile.write`): readers and a `kill -9` see the old or
  /// the new file, never a mix.
  ///
  /// The directory is not synced (nor is the journal's removal): a transition's item changes are
  /// not synced either, and on filesystems that journal metadata in order (ext4, xfs) this rename
  /// reaches the disk before any item change made after it. The file itself is synced so that a
  /// power cut cannot leave it empty. Under I/O load each directory fsync costs tens of
  /// milliseconds, a large part of a transition.
  package static func replace(_ name: String, in directory: DirectoryHandle, with bytes: [UInt8]) throws(ProtFSError) {
    try AtomicFile.write(bytes, named: name, in: directory, options: AtomicFile.Options(durability: .contents))
  }
}
