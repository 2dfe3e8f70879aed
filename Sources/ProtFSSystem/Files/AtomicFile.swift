import CProtFSSys
import Foundation

/// The one atomic write: temp file, sync, rename into place, sync of the directory (fscrypt's
/// way), with one temp-name scheme; and the small-file reads and full writes that go with it.
public enum AtomicFile {
  /// How much `write` syncs.
  public enum Durability: Sendable {
    /// `fsync` the file, then the directory after the rename: both survive a power cut.
    case full
    /// `fdatasync` the file only: a power cut cannot leave it empty, but the rename may be lost.
    /// Enough where the directory's metadata is journalled in order (ext4, xfs) and syncing it
    /// would cost more than the guarantee is worth (the lock simulator's state).
    case contents
    /// Nothing synced: for a record of running processes, rewritten at every change of their state
    /// (an app's). A `kill -9` still sees the old or the new file; a power cut, which ends the
    /// processes too, may keep the old one (or, where the file system does not flush a file
    /// renamed over another as ext4 does, leave it empty, which its readers take as damaged).
    case unsynced
  }

  /// How `write` creates the file.
  public struct Options: Sendable {
    /// Whether an existing file of that name is replaced; when false, it stands and the write
    /// returns false (`renameat2` with `RENAME_NOREPLACE`).
    public var replacing: Bool
    /// The new file's permission bits.
    public var permissions: FilePermissions
    /// How much is synced.
    public var durability: Durability
    /// The owner and group given to the file before it appears, when not the caller's.
    public var owner: (uid: uid_t, gid: gid_t)?

    /// Options; by default the file replaces any old one, is private to its owner and fully synced.
    public init(
      replacing: Bool = true, permissions: FilePermissions = FilePermissions(rawValue: 0o600),
      durability: Durability = .full, owner: (uid: uid_t, gid: gid_t)? = nil
    ) {
      self.replacing = replacing
      self.permissions = permissions
      self.durability = durability
      self.owner = owner
    }
  }

  /// Puts `bytes` at `name` in `directory`, so that readers (and a `kill -9`) see the old or the
  /// new content, never a mix, and no temp file stays behind when it fails.
  ///
  /// Returns false when `options.replacing` is false and `name` already existed (it is left alone).
  @discardableResult
  public static func write(
    _ bytes: [UInt8], named name: String, in directory: DirectoryHandle, options: Options = Options()
  ) throws(ProtFSError) -> Bool {
    let temporary = temporaryName(for: name)
    let file = try directory.openDescriptor(
      temporary, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: options.permissions)
    let fd = file.rawValue
    var placed = false
    do throws(ProtFSError) {
      defer { file.close() }
      try writeAll(fd, bytes, path: directory.pathOf(temporary))
      if let owner = options.owner {
        _ = try valueOrErrno(.chown) { fchown(fd, owner.uid, owner.gid) }.orThrow(
          "change the owner of", path: directory.pathOf(temporary))
      }
      switch options.durability {
      case .full: _ = try valueOrErrno(.fsync) { fsync(fd) }.orThrow("sync", path: directory.pathOf(temporary))
      case .contents:
        _ = try valueOrErrno(.fdatasync) { fdatasync(fd) }.orThrow("sync", path: directory.pathOf(temporary))
      case .unsynced: break
      }
      let renamed =
        options.replacing
        ? valueOrErrno(.rename) { renameat(directory.fd, temporary, directory.fd, name) }
        : valueOrErrno(.rename) { protfs_rename_noreplace(directory.fd, temporary, directory.fd, name) }
      switch renamed {
      case .success: placed = true
      case .failure(.exists) where !options.replacing: break
      case .failure(let e):
        throw ProtFSError.system(
          options.replacing ? "replace" : "create", path: directory.pathOf(name), errno: e)
      }
    } catch {
      unlinkat(directory.fd, temporary, 0)
      throw error
    }
    guard placed else {
      unlinkat(directory.fd, temporary, 0)
      return false
    }
    if options.durability == .full { _ = fsync(directory.fd) }
    return true
  }

  /// Replaces `name` in `directory` with `bytes` (fully synced), so that readers see the old or
  /// the new content, never a mix.
  public static func write(
    _ bytes: [UInt8], named name: String, in directory: DirectoryHandle, permissions: FilePermissions
  ) throws(ProtFSError) {
    try write(bytes, named: name, in: directory, options: Options(permissions: permissions))
  }

  /// The one temp-name scheme: a hidden name made of `name` (its first 200 bytes at most, so the
  /// result stays a valid name), `protfs-tmp`, the process id and a random number, all separated
  /// by dots: `.lock-state.json.protfs-tmp.4242.93810`. The pid is the second-to-last field, so a
  /// cleanup can tell whether the process that made it is gone.
  public static func temporaryName(for name: String) -> String {
    var stem = ""
    var length = 0
    for scalar in name.unicodeScalars {
      length += String(scalar).utf8.count
      if length > 200 { break }
      stem.unicodeScalars.append(scalar)
    }
    return ".\(stem).protfs-tmp.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
  }

  /// Writes all of `bytes` to `fd`.
  public static func writeAll(_ fd: Int32, _ bytes: some ContiguousBytes, path: String) throws(ProtFSError) {
    let result: Result<Void, Errno> = bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        switch valueOrErrno(.write, { Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset) }) {
        case .success(let written): offset += written
        case .failure(let e): return .failure(e)
        }
      }
      return .success(())
    }
    _ = try result.orThrow("write", path: path)
  }

  /// Reads a whole small file, refusing symlinks and anything over `limit` bytes.
  public static func read(
    named name: String, in directory: DirectoryHandle, limit: Int = 1 << 20, stateFile: Bool = false
  ) throws(ProtFSError) -> [UInt8] {
    // A state file (`stateFile`) is one protfs wrote, so only a regular file is one; opened
    // O_NONBLOCK, a FIFO put in its place cannot hang every command in `open`. Other files (a
    // policy given as `<(...)`) may be pipes.
    let file = try directory.openDescriptor(name, flags: O_RDONLY | (stateFile ? O_NONBLOCK : 0))
    defer { file.close() }
    if stateFile {
      var s = stat()
      _ = try valueOrErrno(.stat) { fstat(file.rawValue, &s) }.orThrow("inspect", path: directory.pathOf(name))
      guard s.st_mode & S_IFMT == S_IFREG else {
        throw ProtFSError(
          .malformed,
          "'\(directory.pathOf(name))' is not a regular file, which protfs writes there; put the file it should be in its place, or remove it.",
          path: directory.pathOf(name))
      }
    }
    guard let bytes = try Kernel.readToEnd(file.rawValue, limit: limit).orThrow("read", path: directory.pathOf(name))
    else {
      throw ProtFSError(
        .malformed, "The file '\(directory.pathOf(name))' is larger than \(limit) bytes.",
        path: directory.pathOf(name))
    }
    return bytes
  }
}
