import CProtFSSys
import Foundation

/// The lock simulator's files under `<device>/.protfs/`: the state record, the transition journal,
/// and the `flock` that serializes transitions between protfs processes.
struct LockStore {
  static let stateFileName = "lock-state.json"
  static let journalFileName = "transition.json"
  static let lockFileName = "lock"

  let device: Device
  let directory: DirectoryHandle

  /// Opens the state directory of an initialised device.
  init(_ device: Device) throws(ProtFSError) {
    try device.requireInitialized()
    self.device = device
    directory = try device.openDirectory(DevicePath(validated: [Device.stateDirectoryName]))
  }

  /// The stored record, or the new-device record when none was written yet.
  func record(now: Date) throws(ProtFSError) -> LockRecord {
    guard let record: LockRecord = try read(Self.stateFileName) else { return .initial(at: now) }
    return record
  }

  func write(_ record: LockRecord) throws(ProtFSError) { try write(record, to: Self.stateFileName) }

  func journal() throws(ProtFSError) -> TransitionJournal? { try read(Self.journalFileName) }

  func write(_ journal: TransitionJournal) throws(ProtFSError) { try write(journal, to: Self.journalFileName) }

  func removeJournal() throws(ProtFSError) {
    switch valueOrErrno({ unlinkat(directory.fd, Self.journalFileName, 0) }) {
    case .success, .failure(.noSuchFile): return
    case .failure(let e):
      throw ProtFSError.system(
        "remove the transition journal", path: directory.pathOf(Self.journalFileName), errno: e.rawValue)
    }
  }

  /// Whether a journal exists: one `fstatat`, what every command pays when nothing was interrupted.
  static func hasJournal(_ device: Device) -> Bool {
    var s = stat()
    return stat(device.stateDirectory + "/" + journalFileName, &s) == 0
  }

  /// Runs `body` holding the exclusive `flock` on `.protfs/lock`; waits for another holder to finish.
  func exclusively<T>(_ body: () throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    let file = try directory.openDescriptor(
      Self.lockFileName, flags: O_RDWR | O_CREAT, permissions: FilePermissions(rawValue: 0o600))
    defer { file.close() }  // closing releases the lock, as does dying
    _ = try valueOrErrno { flock(file.rawValue, LOCK_EX) }.orThrow("lock", path: directory.pathOf(Self.lockFileName))
    return try body()
  }

  private func read<T: Decodable>(_ name: String) throws(ProtFSError) -> T? {
    let bytes: [UInt8]
    do {
      bytes = try AtomicFile.read(named: name, in: directory, limit: 64 << 10)
    } catch  where error.code == .notFound {
      return nil
    }
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .iso8601
    do {
      return try decoder.decode(T.self, from: Data(bytes))
    } catch {
      let path = directory.pathOf(name)
      throw ProtFSError(
        .malformed, "The lock simulator's file '\(path)' is not valid JSON of the expected shape: \(error).",
        path: path,
        hint: name == Self.stateFileName
          ? "restore it from a backup, or remove it to start over as a new, unlocked device"
          : "inspect it; removing it abandons the interrupted transition (run `protfs unlock` afterwards)")
    }
  }

  private func write<T: Encodable>(_ value: T, to name: String) throws(ProtFSError) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .iso8601
    let data: Data
    do {
      data = try encoder.encode(value)
    } catch {
      throw ProtFSError(.io, "Cannot encode '\(directory.pathOf(name))': \(error).", path: directory.pathOf(name))
    }
    try Self.replace(name, in: directory, with: Array(data) + [0x0A])
  }

  /// Temp file, `fdatasync`, rename: readers and a `kill -9` see the old or the new file, never a mix.
  ///
  /// Unlike `AtomicFile.write`, the directory is not synced (nor is the journal's removal): a
  /// transition's item changes are not synced either, and on filesystems that journal metadata in
  /// order (ext4, xfs) this rename reaches the disk before any item change made after it. The file
  /// itself is synced so that a power cut cannot leave it empty. Under I/O load each directory
  /// fsync costs tens of milliseconds, a large part of a transition.
  static func replace(_ name: String, in directory: DirectoryHandle, with bytes: [UInt8]) throws(ProtFSError) {
    let temporary = ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let file = try directory.openDescriptor(
      temporary, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o600))
    do throws(ProtFSError) {
      defer { file.close() }
      try AtomicFile.writeAll(file.rawValue, bytes, path: directory.pathOf(temporary))
      _ = try valueOrErrno { fdatasync(file.rawValue) }.orThrow("sync", path: directory.pathOf(temporary))
    } catch {
      unlinkat(directory.fd, temporary, 0)
      throw error
    }
    switch valueOrErrno({ renameat(directory.fd, temporary, directory.fd, name) }) {
    case .success: return
    case .failure(let e):
      unlinkat(directory.fd, temporary, 0)
      throw ProtFSError.system("replace", path: directory.pathOf(name), errno: e.rawValue)
    }
  }
}
