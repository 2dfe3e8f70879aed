import CAttr
import CProtFSSys
import Foundation
import Synchronization

/// An open directory that every operation below works relative to, never following a symlink.
///
/// Relative operations (`openat`, `fstatat`, `getxattrat`, `fchmodat2`) are both the fast path and
/// the safe one: a name is looked up in this directory only, and a final symlink is never followed.
/// On kernels older than 6.13 the `*xattrat` calls fall back to `l*xattr` on `/proc/self/fd/N/name`,
/// which has the same no-follow behaviour.
public final class DirectoryHandle: Sendable {
  /// The descriptor, open for reading with `O_DIRECTORY`.
  public let fd: Int32
  /// The directory's absolute path, for messages only.
  public let path: String
  /// The directory's device and inode once read: an open descriptor's never change.
  private let cachedIdentity = Mutex<DirectoryIdentity?>(nil)

  /// Opens `path` as a directory. The path's own symlinks are followed: this is for the device root.
  public init(path: String) throws(ProtFSError) {
    self.path = path
    fd = try valueOrErrno(.open) { open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }.orThrow(
      "open the directory", path: path)
  }

  /// Takes ownership of `fd`, an open directory; `path` is for messages only.
  package init(fd: Int32, path: String) {
    self.fd = fd
    self.path = path
  }

  // The handle owns `fd`, which every relative operation uses as a raw number: it closes it once, here.
  deinit { close(fd) }

  /// The path of `name` inside this directory, for messages.
  public func pathOf(_ name: String) -> String {
    path.hasSuffix("/") ? path + name : path + "/" + name
  }

  /// The path of the entry `name` inside this directory, for messages (shown escaped when it is
  /// not UTF-8).
  public func pathOf(_ name: FileName) -> String { pathOf(name.description) }

  /// Opens the subdirectory `name`, refusing a symlink (ELOOP) or a non-directory (ENOTDIR).
  public func openDirectory(_ name: String) throws(ProtFSError) -> DirectoryHandle {
    try openDirectory(cName: name, shown: pathOf(name)) { () throws(ProtFSError) in try status(name).kind }
  }

  /// Opens the subdirectory `name`, which may not be UTF-8, as `openDirectory(_:)` does.
  public func openDirectory(_ name: FileName) throws(ProtFSError) -> DirectoryHandle {
    try openDirectory(cName: name.cString, shown: pathOf(name)) { () throws(ProtFSError) in try status(name).kind }
  }

  /// Opens the subdirectory whose C name is `cName` (`shown` in messages); `kind` tells what the
  /// entry is when it is no directory.
  private func openDirectory(
    cName: UnsafePointer<CChar>, shown: String, kind: () throws(ProtFSError) -> FileKind
  ) throws(ProtFSError) -> DirectoryHandle {
    switch valueOrErrno(.open, { openat(fd, cName, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }) {
    case .success(let child):
      return DirectoryHandle(fd: child, path: shown)
    case .failure(let e) where e == .tooManySymlinks || e == .notDirectory:
      // O_DIRECTORY makes the kernel report a symlink as ENOTDIR; say which it really is.
      if (try? kind()) == .symlink {
        throw ProtFSError(
          .symlink, "Cannot open '\(shown)': it is a symbolic link, which protfs does not follow.", path: shown,
          errno: ELOOP)
      }
      throw ProtFSError(.invalidArgument, "Cannot open '\(shown)': it is not a directory.", path: shown, errno: ENOTDIR)
    case .failure(let e):
      throw ProtFSError.system("open the directory", path: shown, errno: e)
    }
  }

  /// A second handle on the same directory.
  public func duplicate() throws(ProtFSError) -> DirectoryHandle {
    let copy = try valueOrErrno(.fcntl) { fcntl(fd, F_DUPFD_CLOEXEC, 0) }.orThrow("duplicate", path: path)
    return DirectoryHandle(fd: copy, path: path)
  }

  /// `stat` of `name`, never following a symlink; `nil` name means the directory itself.
  public func status(_ name: String? = nil) throws(ProtFSError) -> FileStatus {
    var s = stat()
    if let name {
      _ = try valueOrErrno(.stat) { fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) }.orThrow("read", path: pathOf(name))
    } else {
      _ = try valueOrErrno(.stat) { fstat(fd, &s) }.orThrow("read", path: path)
    }
    return FileStatus(s)
  }

  /// `stat` of the entry `name`, which may not be UTF-8, never following a symlink.
  public func status(_ name: FileName) throws(ProtFSError) -> FileStatus {
    var s = stat()
    let cName = name.cString
    _ = try valueOrErrno(.stat) { fstatat(fd, cName, &s, AT_SYMLINK_NOFOLLOW) }.orThrow("read", path: pathOf(name))
    return FileStatus(s)
  }

  /// The device and inode of the directory this handle is open on, read with `fstat` the first
  /// time only: whatever happens to its path, the descriptor stays on the same inode.
  public func identity() throws(ProtFSError) -> DirectoryIdentity {
    if let known = cachedIdentity.withLock({ $0 }) { return known }
    var s = stat()
    _ = try valueOrErrno(.stat) { fstat(fd, &s) }.orThrow("read", path: path)
    let read = DirectoryIdentity(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    cachedIdentity.withLock { $0 = read }
    return read
  }

  /// `stat` of `name` as a raw result, for callers that treat errors themselves.
  public func statusResult(_ name: String) -> Result<FileStatus, Errno> {
    var s = stat()
    return valueOrErrno(.stat) { fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) }.map { _ in FileStatus(s) }
  }

  /// The entries of this directory (without `.` and `..`), with their `d_type`.
  public func entries() throws(ProtFSError) -> [(name: String, kind: FileKind)] {
    var result: [(name: String, kind: FileKind)] = []
    try forEachEntry { name, kind in result.append((name, kind)) }
    return result
  }

  /// Calls `body` for each entry of this directory (without `.` and `..`), in readdir order.
  public func forEachEntry(_ body: (String, FileKind) throws(ProtFSError) -> Void) throws(ProtFSError) {
    try forEachRawEntry { name, kind throws(ProtFSError) in try body(String(cString: name), kind) }
  }

  /// As `forEachEntry`, but hands out the name as the C string in the `dirent`, valid only during
  /// the call: hot loops that pass it straight to `*at` calls avoid making a `String` per entry.
  public func forEachRawEntry(_ body: (UnsafePointer<CChar>, FileKind) throws(ProtFSError) -> Void)
    throws(ProtFSError)
  {
    let copy = FileDescriptor(
      owning: try valueOrErrno(.open) { openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) }.orThrow(
        "list", path: path))
    guard let stream = fdopendir(copy.rawValue) else {
      let code = errno
      throw ProtFSError.system("list", path: path, errno: code)
    }
    // The stream owns the descriptor now: `closedir` closes it.
    _ = copy.take()
    defer { closedir(stream) }
    while true {
      errno = 0
      guard let entry = readdir(stream) else {
        if errno != 0 { throw ProtFSError.system("list", path: path, errno: errno) }
        return
      }
      let namePointer = protfs_dirent_name(entry)!
      if namePointer[0] == 0x2E && (namePointer[1] == 0 || (namePointer[1] == 0x2E && namePointer[2] == 0)) {
        continue
      }
      try body(namePointer, FileKind(direntType: protfs_dirent_type(entry)))
    }
  }

  /// The type of the entry `name` whose `d_type` was `direntKind`: that, unless the filesystem left
  /// it unknown, then a no-follow stat's (`.unknown` when the stat fails: the entry vanished).
  public func resolvedKind(_ name: UnsafePointer<CChar>, _ direntKind: FileKind) -> FileKind {
    guard direntKind == .unknown else { return direntKind }
    var s = stat()
    return fstatat(fd, name, &s, AT_SYMLINK_NOFOLLOW) == 0 ? FileKind(mode: s.st_mode) : .unknown
  }

  /// The names of the subdirectories (by `d_type`, else a stat), in readdir order.
  public func subdirectoryNames() throws(ProtFSError) -> [String] {
    var names: [String] = []
    try forEachRawEntry { name, kind in
      if resolvedKind(name, kind) == .directory { names.append(String(cString: name)) }
    }
    return names
  }

  /// Creates the subdirectory `name`; returns false when it already exists as a directory.
  @discardableResult
  public func makeDirectory(_ name: String, permissions: FilePermissions = FilePermissions(rawValue: 0o755))
    throws(ProtFSError) -> Bool
  {
    switch valueOrErrno(.mkdir, { mkdirat(fd, name, mode_t(permissions.rawValue)) }) {
    case .success: return true
    case .failure(let e) where e == .exists:
      let st = try status(name)
      guard st.kind == .directory else {
        throw ProtFSError(
          .alreadyExists, "Cannot create the directory '\(pathOf(name))': a \(st.kind.rawValue) is in the way.",
          path: pathOf(name), errno: EEXIST)
      }
      return false
    case .failure(let e): throw ProtFSError.system("create the directory", path: pathOf(name), errno: e)
    }
  }

  /// Opens the file `name` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` are always added), for a
  /// caller that hands the raw descriptor to an owner of its own; `openDescriptor` returns one
  /// that closes itself.
  public func openFile(_ name: String, flags: Int32, permissions: FilePermissions = FilePermissions(rawValue: 0o644))
    throws(ProtFSError) -> Int32
  {
    try valueOrErrno(.open) {
      protfs_openat(fd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode_t(permissions.rawValue))
    }.orThrow("open", path: pathOf(name))
  }

  /// Opens `relative` (names separated by `/`) below this directory with `flags` (`O_NOFOLLOW` and
  /// `O_CLOEXEC` are always added), for reading what someone else wrote: no component may be a
  /// symbolic link (`ELOOP`) nor lead out of this directory (`EXDEV`, which `..` and an absolute
  /// path get). The caller owns the descriptor returned.
  ///
  /// `openat2(2)` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`; where the
  /// kernel lacks it (before 5.6) or a seccomp filter refuses it, the components are opened one by
  /// one with `O_NOFOLLOW`, which answers the same.
  public func openBeneath(_ relative: String, flags: Int32) -> Result<Int32, Errno> {
    let flags = flags | O_NOFOLLOW | O_CLOEXEC
    let resolve: Kernel.Resolve = [.beneath, .noSymlinks, .noMagicLinks]
    switch valueOrErrno(.open, { Kernel.openAt2(fd, relative, flags, resolve: resolve) }) {
    case .failure(let e) where e == .noSystemCall || e.rawValue == E2BIG || e == .notPermitted:
      break
    case let result:
      return result
    }
    let parts = relative.split(separator: "/", omittingEmptySubsequences: false)
    guard !relative.hasPrefix("/"), !parts.contains("..") else { return .failure(.crossDevice) }
    var current: Int32 = -1
    defer { if current >= 0 { closeDescriptor(current) } }
    for part in parts.dropLast() where !part.isEmpty && part != "." {
      let from = current >= 0 ? current : fd
      switch valueOrErrno(.open, { openat(from, String(part), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }) {
      case .success(let next):
        if current >= 0 { closeDescriptor(current) }
        current = next
      case .failure(let e) where e == .notDirectory:
        // O_DIRECTORY reports a symlink as ENOTDIR; openat2 says ELOOP.
        var status = stat()
        let isLink =
          fstatat(from, String(part), &status, AT_SYMLINK_NOFOLLOW) == 0 && status.st_mode & S_IFMT == S_IFLNK
        return .failure(isLink ? .tooManySymlinks : e)
      case .failure(let e):
        return .failure(e)
      }
    }
    let from = current >= 0 ? current : fd
    let last = String(parts.last ?? "")
    return valueOrErrno(.open) { protfs_openat(from, last.isEmpty ? "." : last, flags, 0) }
  }

  /// Changes the permission bits of `name` (or of this directory when `name` is nil), never following a symlink.
  public func setPermissions(_ permissions: FilePermissions, of name: String?) throws(ProtFSError) {
    if let name {
      try Kernel.setPermissions(dirfd: fd, name: name, mode: mode_t(permissions.rawValue)).orThrow(
        "change the mode of", path: pathOf(name))
    } else {
      _ = try valueOrErrno(.chmod) { fchmod(fd, mode_t(permissions.rawValue)) }.orThrow(
        "change the mode of", path: path)
    }
  }

  // MARK: Extended attributes

  /// The value of attribute `attribute` of `name` (this directory when nil); `nil` when it has none.
  public func attribute(_ attribute: String, of name: String? = nil) throws(ProtFSError) -> [UInt8]? {
    try self.attribute(attribute, of: name.map(FileName.init))
  }

  /// The value of attribute `attribute` of the entry `name`, which may not be UTF-8 (this
  /// directory when nil); `nil` when it has none.
  public func attribute(_ attribute: String, of name: FileName?) throws(ProtFSError) -> [UInt8]? {
    switch attributeResult(attribute, of: name) {
    case .success(let value): return value
    case .failure(let e):
      throw ProtFSError.system("read the attributes of", path: name.map(pathOf) ?? path, errno: e)
    }
  }

  /// As `attribute(_:of:)`, returning the errno instead of throwing.
  public func attributeResult(_ attribute: String, of name: String? = nil) -> Result<[UInt8]?, Errno> {
    attributeResult(attribute, of: name.map(FileName.init))
  }

  /// As `attribute(_:of:)`, returning the errno instead of throwing.
  public func attributeResult(_ attribute: String, of name: FileName?) -> Result<[UInt8]?, Errno> {
    let target = Kernel.AttributeTarget(dirfd: fd, name: name)
    var buffer = [UInt8](repeating: 0, count: 128)
    while true {
      let result = buffer.withUnsafeMutableBytes { raw in
        Kernel.getAttribute(target, attribute: attribute, into: raw)
      }
      switch result {
      case .success(let size): return .success(Array(buffer.prefix(size)))
      case .failure(let e) where e == .noData: return .success(nil)
      case .failure(let e) where e == .range && buffer.count < 65536: buffer = [UInt8](repeating: 0, count: 65536)
      case .failure(let e): return .failure(e)
      }
    }
  }

  /// Sets attribute `attribute` of `name` (this directory when nil).
  public func setAttribute(_ attribute: String, to value: [UInt8], of name: String? = nil) throws(ProtFSError) {
    try setAttribute(attribute, to: value, of: name.map(FileName.init))
  }

  /// Sets attribute `attribute` of the entry `name`, which may not be UTF-8 (this directory when nil).
  public func setAttribute(_ attribute: String, to value: [UInt8], of name: FileName?) throws(ProtFSError) {
    try value.withUnsafeBytes { raw in
      Kernel.setAttribute(Kernel.AttributeTarget(dirfd: fd, name: name), attribute: attribute, value: raw)
    }.orThrow("set the attributes of", path: name.map(pathOf) ?? path)
  }

  /// Removes attribute `attribute` of `name` (this directory when nil); no error when it is absent.
  public func removeAttribute(_ attribute: String, of name: String? = nil) throws(ProtFSError) {
    try removeAttribute(attribute, of: name.map(FileName.init))
  }

  /// Removes attribute `attribute` of the entry `name`, which may not be UTF-8 (this directory when
  /// nil); no error when it is absent.
  public func removeAttribute(_ attribute: String, of name: FileName?) throws(ProtFSError) {
    switch Kernel.removeAttribute(Kernel.AttributeTarget(dirfd: fd, name: name), attribute: attribute) {
    case .success, .failure(.noData): return
    case .failure(let e):
      throw ProtFSError.system("remove the attributes of", path: name.map(pathOf) ?? path, errno: e)
    }
  }

  /// Removes the file `name` (not a directory); no error when it is absent. `action` names the
  /// removal in the error ("remove the keybag").
  public func removeFileIfPresent(_ name: String, action: String = "remove") throws(ProtFSError) {
    switch Kernel.unlinkat(fd, name, 0) {
    case .success, .failure(.noSuchFile): return
    case .failure(let e): throw ProtFSError.system(action, path: pathOf(name), errno: e)
    }
  }
}

/// Which directory a handle is open on: its device and inode.
public struct DirectoryIdentity: Equatable, Sendable {
  /// The device the directory is on (`st_dev`).
  public var device: UInt64
  /// The directory's inode number (`st_ino`).
  public var inode: UInt64
}
