import CFuse3
import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// An open file or directory of the mount: the backing descriptor and the node whose class decides
/// what the handle may still do (docs/semantics.md §7: per handle, at each read and write).
///
/// `@unchecked Sendable`: `directory` and `offset` are used only by the readdir and releasedir
/// requests of this handle, which the kernel sends one at a time (it holds the open file's
/// position lock across getdents); the rest is immutable.
final class MountHandle: @unchecked Sendable {
  /// The backing descriptor, opened as the caller asked (without following links).
  let fd: Int32
  /// The item.
  let node: MountNode
  /// A directory stream, for directory handles.
  var directory: OpaquePointer?
  /// Where the stream stands, as the kernel counts offsets (`telldir` values).
  var offset: Int = 0
  /// Whether this handle's listing has gone out from its start, entry after entry.
  var listedFromStart = false
  /// When the oldest entry of that listing was sent to the kernel (`DispatchTime` nanoseconds).
  var oldestEntrySent: UInt64 = .max
  /// Whether the kernel takes this handle's writes into its page cache (a class-none file opened
  /// for writing), where no write request reaches the daemon until the pages are written back.
  let writesThroughCache: Bool
  /// A sealed file's key (unwrapped at the open, dropped by a state that withdraws its class);
  /// nil on an unsealed device.
  private let key: HandleKey?
  /// Where a sealed file's handle counts itself open, until it is released.
  private let pages: SealedPages?
  /// The registry `key` is in, until the handle is released.
  private let keys: OpenFileKeys?

  /// A handle owning `fd`; a sealed file's (`sealed`, its key) counts itself open in `seal`.
  init(
    fd: Int32, node: MountNode, writesThroughCache: Bool = false, sealed key: HandleKey? = nil,
    seal: MountSeal? = nil
  ) {
    self.fd = fd
    self.node = node
    self.writesThroughCache = writesThroughCache
    self.key = key
    self.pages = key == nil ? nil : seal?.pages
    self.keys = key == nil ? nil : seal?.openKeys
    self.pages?.opened(node.id)
  }

  /// Whether the handle is a sealed file's.
  var isSealed: Bool { key != nil }

  /// A sealed file's plaintext I/O, nil on an unsealed device: with the key the handle holds, or
  /// unwrapped again when a state took it (EPERM while its class key is evicted).
  func sealedIO() throws(Errno) -> SealedFileIO? {
    guard let key else { return nil }
    return SealedFileIO(fd: fd, cipher: try key.cipher(fd), path: "(a sealed file)")
  }

  deinit {
    if let key { keys?.remove(key) }
    pages?.closed(node.id)
    if let directory { Kernel.closedir(directory) } else { closeDescriptor(fd) }
  }
}

/// How a handle is opened: whether the kernel may serve it from its page cache.
struct OpenedHandle {
  /// The handle.
  var handle: MountHandle
  /// True when reads must reach the daemon every time (the class can lose access while open).
  var directIO: Bool
}

extension MountFileSystem {
  /// What the table is asked for an open with `flags`.
  private func access(for flags: Int32) -> ProtectedDataAccess {
    flags & O_ACCMODE == O_RDONLY ? .read : .write
  }

  /// Only class none keeps its data available in every state: every other class is read through
  /// the daemon at each I/O, so nothing it could no longer serve stays in the page cache.
  private func directIO(_ node: MountNode) -> Bool { nodes.effectiveClass(of: node) != .none }

  /// The flags the backing file of a page-cached handle is opened with: the kernel's writeback
  /// reads the rest of a partly written page through a write-only handle too, and places appended
  /// data itself (it knows the size), at the offsets it sends.
  static func backingFlags(_ flags: Int32, cached: Bool) -> Int32 {
    guard cached else { return flags }
    let readable = flags & O_ACCMODE == O_WRONLY ? (flags & ~O_ACCMODE) | O_RDWR : flags
    return readable & ~O_APPEND
  }

  /// Whether the backing filesystem has room enough for the writeback cache: with less free, a
  /// write is made through the daemon, so that a full disk fails the `write` itself (as on the
  /// phone) rather than the `close` after it. The kernel holds at most some 50 MiB of a mount's
  /// writes unwritten; other programs may fill the disk meanwhile, hence the margin.
  func roomForWriteback() -> Bool {
    var s = statvfs()
    guard case .success = Kernel.fstatvfs(nodes.root.fd, &s) else { return false }
    return UInt64(s.f_bavail) * UInt64(s.f_frsize) >= 256 << 20
  }

  /// `open`: decided by the "open a closed file" column of the table.
  func open(_ node: MountNode, flags: Int32) throws(Errno) -> OpenedHandle {
    refreshOwnClass(node)
    try decide(node, access(for: flags))
    if let seal { return try openSealed(node, flags: flags, seal) }
    var direct = directIO(node) || (flags & O_ACCMODE != O_RDONLY && !roomForWriteback())
    let asked = flags & ~(O_CREAT | O_EXCL | O_NOCTTY)
    // The /proc magic link leads to exactly the inode the node holds (no name is resolved again).
    let fd: Int32
    do {
      fd = try node.reopen(Self.backingFlags(asked, cached: !direct))
    } catch  where !direct && error == .notPermitted && asked & O_ACCMODE != O_RDONLY {
      // An append-only file (chattr +a) opens for writing only to append, which the kernel's
      // writeback cannot do: it is written through the daemon, as asked.
      fd = try node.reopen(asked)
      direct = true
    }
    let cachedWrites = !direct && asked & O_ACCMODE != O_RDONLY
    return OpenedHandle(handle: MountHandle(fd: fd, node: node, writesThroughCache: cachedWrites), directIO: direct)
  }

  /// `open` on a sealed device: every read and write goes through the daemon, which decrypts and
  /// encrypts (the kernel's page cache would keep plaintext a lock must not leave behind). The
  /// backing file is opened for reading too (a write rewrites whole blocks) and never to append (a
  /// block is written at its offset).
  private func openSealed(_ node: MountNode, flags: Int32, _ seal: MountSeal) throws(Errno) -> OpenedHandle {
    var backing = flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_APPEND)
    if backing & O_ACCMODE == O_WRONLY { backing = (backing & ~O_ACCMODE) | O_RDWR }
    let fd = try node.reopen(backing)
    guard !node.isDirectory else { return OpenedHandle(handle: MountHandle(fd: fd, node: node), directIO: true) }
    do {
      let key = try seal.handleKey(of: fd)
      return OpenedHandle(handle: MountHandle(fd: fd, node: node, sealed: key, seal: seal), directIO: true)
    } catch {
      closeDescriptor(fd)
      throw error
    }
  }

  /// `create`: decided by the "create" column for the parent's class; the file gets that class.
  func create(_ parent: MountNode, _ name: String, mode: mode_t, flags: Int32, caller: Caller) throws(Errno) -> (
    OpenedHandle, stat
  ) {
    let cls = try classForNewItem(in: parent)
    let cached = seal == nil && cls == .none && roomForWriteback()
    var asked = flags & ~O_NOCTTY
    if seal != nil { asked = (asked & ~(O_ACCMODE | O_APPEND)) | O_RDWR }
    let clean = Self.backingFlags(asked, cached: cached) | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW
    let fd: Int32
    switch Kernel.openat(parent.fd, name, clean, mode) {
    case .success(let opened): fd = opened
    case .failure(let e) where e == .exists && flags & O_EXCL == 0:
      // Made by someone else meanwhile: an open of an existing file.
      let (node, _) = try lookup(parent, name)
      do {
        let opened = try open(node, flags: flags & ~(O_CREAT | O_EXCL))
        return (opened, try node.withPath { (fd) throws(Errno) in try attributes(fd) })
      } catch {
        nodes.forget(node.id, 1)
        throw error
      }
    case .failure(let e): throw e
    }
    let key: HandleKey?
    do {
      try adopt(fd, class: cls, uid: caller.uid, gid: caller.gid, parent: parent)
      key = try seal?.seal(fd, class: cls)
    } catch {
      closeDescriptor(fd)
      _ = Kernel.unlinkat(parent.fd, name, 0)
      throw error
    }
    let (node, s) = try entry(parent, name)
    nodes.setOwnClass(node, cls)
    let handle = MountHandle(
      fd: fd, node: node, writesThroughCache: cached && flags & O_ACCMODE != O_RDONLY, sealed: key, seal: seal)
    return (OpenedHandle(handle: handle, directIO: !cached), s)
  }

  /// Throws `EPERM` unless a handle of `handle.node` may still read or write: the "descriptor
  /// already open" column of the table, now, for the class the item has now. While data is
  /// unavailable the class is read again (the file's own, through the handle's descriptor, and
  /// each ancestor's): a class set behind the mount since the handle was opened decides, not the
  /// one remembered.
  func decideIO(_ handle: MountHandle) throws(Errno) {
    let state = protectionState()
    guard !state.isProtectedDataAvailable else { return }
    if let own = try? readClass(handle.fd, AttributeName.protectionClass) {
      nodes.setOwnClass(handle.node, own)
    } else {
      refreshOwnClass(handle.node)
    }
    if nodes.ownClass(of: handle.node) == nil {
      for ancestor in nodes.ancestors(of: handle.node) { refreshOwnClass(ancestor) }
    }
    let cls = nodes.effectiveClass(of: handle.node)
    guard cls == .none || state.allows(cls, .openHandle) else { throw .notPermitted }
  }

  /// Writes pages the kernel writes back from its cache at `offset`. The kernel sends them through
  /// any handle open for writing, the newest first: one opened to append (direct, a class that
  /// became protected) would put them at the end of the file again, so they go through a
  /// descriptor of their own then.
  func writeBack(_ buffers: UnsafeMutablePointer<fuse_bufvec>?, _ handle: MountHandle, at offset: off_t)
    throws(Errno) -> Int
  {
    func write(to fd: Int32) throws(Errno) -> Int {
      let written = protfs_fuse_write_to_fd(buffers, fd, offset)
      if written < 0 { throw Errno(Int32(-written)) }
      return written
    }
    guard !handle.writesThroughCache,
      try Kernel.fcntl(handle.fd, F_GETFL).get() & O_APPEND != 0
    else { return try write(to: handle.fd) }
    let own = try handle.node.reopen(O_WRONLY)
    defer { closeDescriptor(own) }
    return try write(to: own)
  }

  /// `flush` (each `close` of a descriptor): closing a duplicate reports write-back errors.
  func flush(_ handle: MountHandle) throws(Errno) {
    let copy = try Kernel.fcntl(handle.fd, F_DUPFD_CLOEXEC, 0).get()
    // Its close reports a delayed write error; never retried (`closeDescriptor`): after EINTR the
    // descriptor is already closed (and its number may be reused).
    try closeDescriptor(copy).get()
  }

  /// `fsync`.
  func sync(_ handle: MountHandle, dataOnly: Bool) throws(Errno) {
    _ = try (dataOnly ? Kernel.fdatasync(handle.fd) : Kernel.fsync(handle.fd)).get()
  }

  /// `opendir`: listing is metadata, never gated.
  func openDirectory(_ node: MountNode) throws(Errno) -> MountHandle {
    let fd = try node.reopen(O_RDONLY | O_DIRECTORY)
    let handle = MountHandle(fd: fd, node: node)
    guard let stream = Kernel.fdopendir(fd) else {
      let e = Errno(errno)
      closeDescriptor(fd)
      throw e
    }
    handle.directory = stream
    return handle
  }

  // MARK: Changing attributes

  /// What `setattr` asks to change.
  struct AttributeChange {
    var mode: mode_t?
    var uid: uid_t?
    var gid: gid_t?
    var size: off_t?
    var accessTime: timespec?
    var modificationTime: timespec?
  }

  /// `setattr`. A truncation is a write (through a handle: the handle's column); mode and owner
  /// are metadata. On an item a lock restricted, mode and owner go into its saved-mode record, so
  /// that they apply at unlock and the item stays restricted until then.
  func setAttributes(_ node: MountNode, _ change: AttributeChange, handle: MountHandle?) throws(Errno) -> stat {
    try node.withPath { (fd) throws(Errno) in try setAttributes(node, fd, change, handle: handle) }
  }

  private func setAttributes(_ node: MountNode, _ fd: Int32, _ change: AttributeChange, handle: MountHandle?)
    throws(Errno) -> stat
  {
    if let size = change.size {
      if let handle, handle.isSealed {
        try decideIO(handle)
        try handle.sealedIO()?.truncateOrEIO(to: Int(size))
      } else if let handle {
        try decideIO(handle)
        _ = try Kernel.ftruncate(handle.fd, size).get()
      } else if seal != nil, !node.isDirectory {
        refreshOwnClass(node)
        try decide(node, .write)
        let opened = try open(node, flags: O_WRONLY)
        try opened.handle.sealedIO()?.truncateOrEIO(to: Int(size))
      } else {
        refreshOwnClass(node)
        try decide(node, .write)
        _ = try Kernel.truncate(procPath(fd), size).get()
      }
    }
    if change.mode != nil || change.uid != nil || change.gid != nil {
      try changeModeOrOwner(node, fd, change)
    }
    if change.accessTime != nil || change.modificationTime != nil {
      let omit = timespec(tv_sec: 0, tv_nsec: PROTFS_MOUNT_UTIME_OMIT)
      var times = [change.accessTime ?? omit, change.modificationTime ?? omit]
      if let handle {
        _ = try Kernel.futimens(handle.fd, &times).get()
      } else {
        _ = try Kernel.utimensat(AT_FDCWD, procPath(fd), &times, 0).get()
      }
    }
    return try attributes(fd)
  }

  private func changeModeOrOwner(_ node: MountNode, _ fd: Int32, _ change: AttributeChange) throws(Errno) {
    var s = stat()
    _ = try Kernel.fstatat(fd, "", &s, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW).get()
    let isDirectory = s.st_mode & S_IFMT == S_IFDIR
    if s.st_mode & 0o222 == 0, var record = savedMode(fd, isDirectory: isDirectory), let key = currentModeKey() {
      // Restricted by a lock: the change waits in the record, the item stays as the lock left it.
      if let mode = change.mode { record.mode = UInt32(mode) & 0o7777 }
      if let uid = change.uid, uid != uid_t.max { record.uid = uid }
      if let gid = change.gid, gid != gid_t.max { record.gid = gid }
      let identity = ItemIdentity(inode: 0, birthSeconds: 0, birthNanoseconds: 0, isDirectory: isDirectory)
      let value = record.encoded(for: identity, key: key)
      try value.withUnsafeBytes { raw in
        Kernel.setAttribute(.descriptor(fd, pathOnly: true), attribute: AttributeName.savedMode, value: raw)
      }.get()
      // The item as a lock leaves it for the new record, so that unlock accepts the record: the
      // record's group, handed to root (unless its owner is root), the restricted mode.
      let handedOver = isRoot && record.uid != 0
      let restricted = SavedModeRecord.restrictedMode(record.mode, isDirectory: isDirectory, handedOver: handedOver)
      let owner = handedOver ? 0 : record.uid
      if s.st_uid != owner || s.st_gid != record.gid {
        _ = try Kernel.fchownat(fd, "", owner, record.gid, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW).get()
      }
      _ = try Kernel.chmod(procPath(fd), mode_t(restricted)).get()
      return
    }
    if change.uid != nil || change.gid != nil {
      _ = try Kernel.fchownat(
        fd, "", change.uid ?? uid_t.max, change.gid ?? gid_t.max, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW
      ).get()
    }
    if let mode = change.mode {
      guard s.st_mode & S_IFMT != S_IFLNK else { throw .notSupported }
      _ = try Kernel.chmod(procPath(fd), mode & 0o7777).get()
    }
  }
}

extension SealedFileIO {
  /// ``truncate(to:)``, with a failure as the errno the kernel gives (EIO for what is not one).
  func truncateOrEIO(to size: Int) throws(Errno) {
    do { try truncate(to: size) } catch { throw Errno(error.errno ?? EIO) }
  }

  /// ``withPlaintext(at:count:_:)``, with a failure as an errno.
  func withPlaintextOrEIO<R>(at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(Errno) -> R {
    do { return try withPlaintext(at: offset, count: count, body) } catch { throw Errno(error.errno ?? EIO) }
  }

  /// ``write(_:at:)``, with a failure as an errno.
  func writeOrEIO(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(Errno) {
    do { try write(bytes, at: offset) } catch { throw Errno(error.errno ?? EIO) }
  }

  /// ``write(count:at:fill:)``, with a failure as an errno.
  func writeOrEIO(count: Int, at offset: Int, fill: (UnsafeMutableRawBufferPointer) -> Bool) throws(Errno) {
    do { try write(count: count, at: offset, fill: fill) } catch { throw Errno(error.errno ?? EIO) }
  }
}
