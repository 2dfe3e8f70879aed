import CProtFSSys
import Foundation

/// What identifies an inode for as long as it exists: its number and its birth time (a number
/// reused after a delete comes with a new birth time), and whether it is a directory. Records
/// authenticate only the type (see `SavedModeRecord`).
package struct ItemIdentity: Equatable, Sendable {
  package var inode: UInt64
  package var birthSeconds: Int64
  package var birthNanoseconds: UInt32
  package var isDirectory: Bool

  /// Creates a value from its parts.
  package init(inode: UInt64, birthSeconds: Int64, birthNanoseconds: UInt32, isDirectory: Bool) {
    self.inode = inode
    self.birthSeconds = birthSeconds
    self.birthNanoseconds = birthNanoseconds
    self.isDirectory = isDirectory
  }
}

/// One file or directory of the device held open, so that every check and change a lock makes
/// lands on the same inode: a name swapped for a hard link or a symlink meanwhile changes nothing.
///
/// The descriptor is a plain read-only one where the caller may open the item (root always can),
/// else an `O_PATH` one, whose attributes `Kernel` then reaches through `/proc/self/fd/N`.
package final class ItemHandle {
  /// The descriptor; closed with the handle.
  package let fd: Int32
  /// Whether `fd` is an `O_PATH` descriptor.
  private let isPathOnly: Bool

  /// What a lock needs to know about the item: its type, bits, owner, link count and identity.
  package struct Status {
    package var kind: FileKind
    package var permissions: UInt32
    package var uid: UInt32
    package var gid: UInt32
    package var links: UInt64
    package var identity: ItemIdentity
  }

  /// Opens `name` in `parent` without following a symlink (ELOOP when it is one).
  package convenience init(_ parent: DirectoryHandle, _ name: String) throws(ProtFSError) {
    try self.init(parent, FileName(name))
  }

  /// Opens `name`, which may not be UTF-8, in `parent` without following a symlink (ELOOP when
  /// it is one).
  ///
  /// `O_NONBLOCK` keeps a FIFO swapped in for the file from blocking the open; the type is checked
  /// on the descriptor right after.
  package init(_ parent: DirectoryHandle, _ name: FileName) throws(ProtFSError) {
    let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC
    let opened = name.withCString { raw in valueOrErrno(.open, { protfs_openat(parent.fd, raw, flags, 0) }) }
    switch opened {
    case .success(let fd):
      self.fd = fd
      isPathOnly = false
    case .failure(let e) where e == .noSuchFile || e == .tooManySymlinks:
      throw ProtFSError.system("open", path: parent.pathOf(name), errno: e)
    case .failure:
      // An unprivileged owner's locked item (EACCES), a socket (ENXIO), a lease (EWOULDBLOCK):
      // O_PATH needs no permission on the item and never runs a driver's or a lease's code.
      let pathFlags = PROTFS_O_PATH | O_NOFOLLOW | O_CLOEXEC
      fd = try name.withCString { raw in valueOrErrno(.open) { protfs_openat(parent.fd, raw, pathFlags, 0) } }
        .orThrow("open", path: parent.pathOf(name))
      isPathOnly = true
    }
  }

  deinit { close(fd) }

  /// The item's status (statx(2) with the birth time).
  package func status(path: @autoclosure () -> String) throws(ProtFSError) -> Status {
    var raw = protfs_item_status()
    _ = try valueOrErrno(.stat) { protfs_item_status(fd, &raw) }.orThrow("inspect", path: path())
    let kind = FileKind(mode: mode_t(raw.mode))
    return Status(
      kind: kind, permissions: raw.mode & 0o7777, uid: raw.uid, gid: raw.gid,
      links: raw.links,
      identity: ItemIdentity(
        inode: raw.inode, birthSeconds: raw.birth_seconds, birthNanoseconds: raw.birth_nanoseconds,
        isDirectory: kind == .directory))
  }

  /// Reads `attribute` into `buffer`; returns its length.
  package func attribute(_ attribute: String, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
    Kernel.getAttribute(target, attribute: attribute, into: buffer)
  }

  /// Writes `attribute`; with `createOnly` it fails with EEXIST when there is one (XATTR_CREATE).
  package func setAttribute(_ attribute: String, _ value: [UInt8], createOnly: Bool) -> Result<Void, Errno> {
    let flags: Int32 = createOnly ? 1 : 0  // XATTR_CREATE
    return value.withUnsafeBytes { raw in Kernel.setAttribute(target, attribute: attribute, value: raw, flags: flags) }
  }

  /// Removes `attribute`.
  package func removeAttribute(_ attribute: String) -> Result<Void, Errno> {
    Kernel.removeAttribute(target, attribute: attribute)
  }

  /// The descriptor as the attribute calls take it.
  private var target: Kernel.AttributeTarget { .descriptor(fd, pathOnly: isPathOnly) }

  /// Changes the permission bits.
  package func setPermissions(_ mode: UInt32) -> Result<Void, Errno> {
    valueOrErrno(.chmod) { protfs_item_chmod(fd, mode_t(mode)) }.map { _ in () }
  }

  /// Changes the owner and group (the corresponding C function is `fchownat(2)` with `AT_EMPTY_PATH`).
  package func setOwner(uid: UInt32, gid: UInt32) -> Result<Void, Errno> {
    valueOrErrno(.chown) { protfs_item_chown(fd, uid, gid) }.map { _ in () }
  }
}
