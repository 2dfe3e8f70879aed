import CProtFSSys
import Foundation

/// One file or directory of the device held open, so that every check and change a lock makes
/// lands on the same inode: a name swapped for a hard link or a symlink meanwhile changes nothing.
///
/// The descriptor is a plain read-only one where the caller may open the item (root always can),
/// else an `O_PATH` one, whose attributes are then reached through `/proc/self/fd/N`.
final class ItemHandle {
  /// The descriptor; closed with the handle.
  let fd: Int32
  /// Whether `fd` is an `O_PATH` descriptor.
  private let isPathOnly: Bool

  /// What a lock needs to know about the item: its type, bits, owner, link count and identity.
  struct Status {
    var kind: FileKind
    var permissions: UInt32
    var uid: UInt32
    var gid: UInt32
    var links: UInt64
    var identity: ItemIdentity
  }

  /// Opens `name` in `parent` without following a symlink (ELOOP when it is one).
  ///
  /// `O_NONBLOCK` keeps a FIFO swapped in for the file from blocking the open; the type is checked
  /// on the descriptor right after.
  init(_ parent: DirectoryHandle, _ name: String) throws(ProtFSError) {
    let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC
    switch valueOrErrno({ protfs_openat(parent.fd, name, flags, 0) }) {
    case .success(let fd):
      self.fd = fd
      isPathOnly = false
    case .failure(let e) where e == .noSuchFile || e == .tooManySymlinks:
      throw ProtFSError.system("open", path: parent.pathOf(name), errno: e.rawValue)
    case .failure:
      // An unprivileged owner's locked item (EACCES), a socket (ENXIO), a lease (EWOULDBLOCK):
      // O_PATH needs no permission on the item and never runs a driver's or a lease's code.
      fd = try valueOrErrno { protfs_openat(parent.fd, name, PROTFS_O_PATH | O_NOFOLLOW | O_CLOEXEC, 0) }.orThrow(
        "open", path: parent.pathOf(name))
      isPathOnly = true
    }
  }

  // The handle owns `fd` (its raw number feeds every *at call): it closes it once, here.
  deinit { close(fd) }

  /// The item's status (statx(2) with the birth time).
  func status(path: @autoclosure () -> String) throws(ProtFSError) -> Status {
    var raw = protfs_item_status()
    _ = try valueOrErrno { protfs_item_status(fd, &raw) }.orThrow("inspect", path: path())
    let kind = FileKind(mode: mode_t(raw.mode))
    return Status(
      kind: kind, permissions: raw.mode & 0o7777, uid: raw.uid, gid: raw.gid,
      links: raw.links,
      identity: ItemIdentity(
        inode: raw.inode, birthSeconds: raw.birth_seconds, birthNanoseconds: raw.birth_nanoseconds,
        isDirectory: kind == .directory))
  }

  /// Reads `attribute` into `buffer`; returns its length.
  func attribute(_ attribute: String, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
    if isPathOnly {
      return valueOrErrno { protfs_path_fd_getxattr(fd, attribute, buffer.baseAddress, buffer.count) }.map { Int($0) }
    }
    return valueOrErrno { fgetxattr(fd, attribute, buffer.baseAddress, buffer.count) }.map { Int($0) }
  }

  /// Writes `attribute`; with `createOnly` it fails with EEXIST when there is one (XATTR_CREATE).
  func setAttribute(_ attribute: String, _ value: [UInt8], createOnly: Bool) -> Result<Void, Errno> {
    let flags: Int32 = createOnly ? 1 : 0  // XATTR_CREATE
    return value.withUnsafeBytes { raw in
      if isPathOnly {
        return valueOrErrno { protfs_path_fd_setxattr(fd, attribute, raw.baseAddress, raw.count, flags) }.map { _ in ()
        }
      }
      return valueOrErrno { fsetxattr(fd, attribute, raw.baseAddress, raw.count, flags) }.map { _ in () }
    }
  }

  /// Removes `attribute`.
  func removeAttribute(_ attribute: String) -> Result<Void, Errno> {
    if isPathOnly { return valueOrErrno { protfs_path_fd_removexattr(fd, attribute) }.map { _ in () } }
    return valueOrErrno { fremovexattr(fd, attribute) }.map { _ in () }
  }

  /// Changes the permission bits.
  func setPermissions(_ mode: UInt32) -> Result<Void, Errno> {
    valueOrErrno { protfs_item_chmod(fd, mode_t(mode)) }.map { _ in () }
  }

  /// Changes the owner and group (the corresponding C function is `fchownat(2)` with `AT_EMPTY_PATH`).
  func setOwner(uid: UInt32, gid: UInt32) -> Result<Void, Errno> {
    valueOrErrno { protfs_item_chown(fd, uid, gid) }.map { _ in () }
  }
}
