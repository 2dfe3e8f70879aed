import Foundation
import ProtFSSystem

/// The lock simulator's files under `<device>/.protfs/`: the state record, the transition journal,
/// and the `flock` that serializes transitions between protfs processes.
package struct LockStore {
  package static let stateFileName = "lock-state.json"
  package static let journalFileName = "transition.json"
  package static let lockFileName = "lock"

  package let device: Device
  package let directory: DirectoryHandle

  /// Opens the state directory of an initialised device.
  package init(_ device: Device) throws(ProtFSError) {
    try device.requireInitialized()
    self.device = device
    directory = try device.openDirectory(DevicePath(validated: [Device.stateDirectoryName]))
  }

  /// The stored record, or the new-device record when none was written yet.
  package func record(now: Date) throws(ProtFSError) -> LockRecord {
    guard let record: LockRecord = try read(Self.stateFileName) else { return .initial(at: now) }
    return record
  }

  package func write(_ record: LockRecord) throws(ProtFSError) { try write(record, to: Self.stateFileName) }

  package func journal() throws(ProtFSError) -> TransitionJournal? { try read(Self.journalFileName) }

  package func write(_ journal: TransitionJournal) throws(ProtFSError) { try write(journal, to: Self.journalFileName) }

  package func removeJournal() throws(ProtFSError) {
    switch valueOrErrno(.unlink, { unlinkat(directory.fd, Self.journalFileName, 0) }) {
    case .success, .failure(.noSuchFile): return
    case .failure(let e):
      throw ProtFSError.system(
        "remove the transition journal", path: directory.pathOf(Self.journalFileName), errno: e)
    }
  }

  /// Whether a journal exists: one `fstatat`, what every command pays when nothing was interrupted.
  package static func hasJournal(_ device: Device) -> Bool {
    var s = stat()
    return (try? valueOrErrno(.stat, { stat(device.stateDirectory + "/" + journalFileName, &s) }).get()) != nil
  }

  /// Runs `body` holding the exclusive `flock` on `.protfs/lock`; waits for another holder to finish.
  package func exclusively<T>(_ body: () throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    let file = try directory.openDescriptor(
      Self.lockFileName, flags: O_RDWR | O_CREAT, permissions: FilePermissions(rawValue: 0o600))
    defer { file.close() }  // closing releases the lock, as does dying
    _ = try valueOrErrno(.flock) { flock(file.rawValue, LOCK_EX) }.orThrow(
      "lock", path: directory.pathOf(Self.lockFileName))
    return try body()
  }

  /// The file `name` decoded (`JSONStateFile`); nil when there is none.
  private func read<T: Decodable>(_ name: String) throws(ProtFSError) -> T? {
    try JSONStateFile.read(
      T.self, named: name, in: directory, limit: 64 << 10, what: "lock simulator's file",
      remedy: name == Self.stateFileName
        ? .advice("restore it from a backup, or remove it to start over as a new, unlocked device")
        : .inspectJournal)
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
