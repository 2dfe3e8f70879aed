import CFuse3
import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// The device's `Containers/` served through FUSE, where the class × state table decides every
/// open, read, write, truncate, create and attribute write at the moment it happens, for every
/// caller, root included (docs/semantics.md §7). Metadata is never gated.
///
/// Every operation works relative to the `O_PATH` descriptors of the inode table and never
/// follows a symlink, so nothing outside `Containers/` is reachable through the mount.
package final class MountFileSystem: Sendable {
  /// The device.
  package let device: Device
  /// The inode table.
  let nodes: MountNodes
  /// The device's state, one `stat` per question (a read when the state file changed).
  let probe: ProtectionStateProbe
  /// The device's `.protfs/`, for the key that authenticates saved modes.
  let stateDirectory: DirectoryHandle
  /// The saved-mode key, once a transition has made it.
  let modeKey = Mutex<ModeKey?>(nil)
  /// Whether the daemon runs as root: then items it creates are handed to the caller.
  let isRoot = Kernel.geteuid() == 0
  /// How long the kernel may keep names and attributes. What the mount shows changes only
  /// through the mount (whose replies carry the new attributes) or by programs working on the
  /// backing tree directly, which see their changes through the mount this much later; a lock
  /// changes nothing shown (the mount shows saved modes).
  let cacheSeconds = 10.0
  /// How long after sending an entry the daemon counts on the kernel still holding it: the cache
  /// time less a second (the kernel's own clock starts when it receives the reply).
  var entryValidity: UInt64 { UInt64((cacheSeconds - 1) * 1e9) }
  /// The libfuse session (its address), for notifications to the kernel; 0 until it runs.
  let session = Mutex<UInt>(0)
  /// The state whose classes and cached pages the mount has brought up to date
  /// (`MountStateWatcher`), which `protfs lock` and the other transitions wait for.
  let appliedState = Mutex<ProtectionState?>(nil)
  /// Called once, when the kernel's connection is set up (FUSE's `init`, just before its reply):
  /// from then on every request is answered.
  let onConnected = Mutex<(@Sendable () -> Void)?>(nil)
  /// A sealed device's keys; nil when the device is not sealed.
  let seal: MountSeal?

  /// The kernel's connection is set up: runs `onConnected`, once.
  func connected() {
    onConnected.withLock { action in
      defer { action = nil }
      return action
    }?()
  }

  /// A file system for `device`, whose `Containers/` must exist.
  package init(device: Device) throws(ProtFSError) {
    try device.requireInitialized()
    self.device = device
    let containers = try device.openDirectory(Device.containersPath)
    let fd = try Kernel.fcntl(containers.fd, F_DUPFD_CLOEXEC, 3, as: .open).orThrow(
      "open", path: containers.path)
    var s = stat()
    _ = try Kernel.fstat(fd, &s).orThrow("inspect", path: containers.path)
    let root = MountNode(
      id: 1, key: MountNode.Key(device: UInt64(s.st_dev), inode: UInt64(s.st_ino)), fd: fd, isDirectory: true,
      mountFD: -1, prepared: nil)
    root.ownClass = try containers.protectionClass()
    nodes = MountNodes(root: root, deviceClass: try device.openRoot().protectionClass())
    probe = ProtectionStateProbe(device: device)
    stateDirectory = try DirectoryHandle(path: device.stateDirectory)
    seal = try MountSeal(device: device)
  }

  // MARK: Decisions

  /// The protection state now; when it cannot be read, the state that allows least (fail closed).
  func protectionState() -> ProtectionState {
    (try? probe.state()) ?? ProtectionState(lockState: .beforeFirstUnlock)
  }

  /// Throws `EPERM` unless the table allows `access` to an item of class `cls` now.
  func decide(_ cls: ProtectionClass, _ access: ProtectedDataAccess) throws(Errno) {
    if cls == .none { return }
    guard protectionState().allows(cls, access) else { throw .notPermitted }
  }

  /// Throws `EPERM` unless the table allows `access` to `node` now.
  func decide(_ node: MountNode, _ access: ProtectedDataAccess) throws(Errno) {
    try decide(nodes.effectiveClass(of: node), access)
  }

  /// Drops the kernel's cached pages of `node` (after a class change: pages read while it was
  /// class none must not serve a handle once the new class forbids it). Sent from another thread,
  /// after the request that changed the class was answered.
  func invalidateCache(_ node: MountNode) {
    let address = session.withLock { $0 }
    guard address != 0 else { return }
    nodes.noteAttributesDropped([node])
    let id = node.id
    DispatchQueue.global().async {
      _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: address), fuse_ino_t(id), 0, 0)
    }
  }

  /// Reads `node`'s own class again (another program may have run `protfs set-class`).
  func refreshOwnClass(_ node: MountNode) {
    if let own = try? node.withPath({ (fd) throws(Errno) in try readClass(fd, AttributeName.protectionClass) }) {
      nodes.setOwnClass(node, own)
    }
  }

  /// A class attribute of the item `fd` holds; nil when it has none. Garbage in an item's own
  /// class (an app may write any bytes there, straight into the backing directory) is class
  /// complete, the strictest, as the lock treats it; garbage in a container default is none
  /// (`protfs status` and the audit report both).
  func readClass(_ fd: Int32, _ name: String) throws(Errno) -> ProtectionClass? {
    let garbage: ProtectionClass? = name == AttributeName.protectionClass ? .complete : nil
    return try withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) {
      (buffer) throws(Errno) -> ProtectionClass? in
      switch Kernel.getAttribute(ofDescriptor: fd, attribute: name, into: buffer) {
      case .success(let count):
        return ProtectionClass(attributeBytes: UnsafeRawBufferPointer(rebasing: buffer[..<Int(count)])) ?? garbage
      case .failure(.range): return garbage  // longer than any class
      case .failure(let e) where e == .noData || e == .notSupported || e == .notPermitted: return nil
      case .failure(let e): throw e
      }
    }
  }

  // MARK: Attributes

  /// The attributes the mount shows for `fd`: the backing item's, with the mode, owner and group
  /// it had before a lock restricted it (the saved-mode record, when protfs wrote it), so that
  /// permission checks through the mount see the item as its owner left it.
  func attributes(_ fd: Int32) throws(Errno) -> stat {
    var s = stat()
    _ = try Kernel.fstatat(fd, "", &s, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW).get()
    // A restricted item never keeps a write bit: only those can carry a record worth reading.
    if s.st_mode & 0o222 == 0, let record = savedMode(fd, isDirectory: s.st_mode & S_IFMT == S_IFDIR) {
      s.st_mode = (s.st_mode & S_IFMT) | mode_t(record.mode)
      s.st_uid = record.uid
      s.st_gid = record.gid
    }
    return s
  }

  /// The authentic saved-mode record of the item `fd` holds, if it has one.
  func savedMode(_ fd: Int32, isDirectory: Bool) -> SavedModeRecord? {
    withUnsafeTemporaryAllocation(byteCount: SavedModeRecord.maximumLength, alignment: 1) { buffer in
      let read = Kernel.getAttribute(ofDescriptor: fd, attribute: AttributeName.savedMode, into: buffer)
      guard case .success(let count) = read, count > 0, let key = currentModeKey() else { return nil }
      let identity = ItemIdentity(inode: 0, birthSeconds: 0, birthNanoseconds: 0, isDirectory: isDirectory)
      guard
        case .authentic(let record) = SavedModeRecord.decode(
          UnsafeRawBufferPointer(rebasing: buffer[..<Int(count)]), identity: identity, key: key)
      else { return nil }
      return record
    }
  }

  /// The saved-mode key; loaded again while there is none (the first lock makes it).
  func currentModeKey() -> ModeKey? {
    if let key = modeKey.withLock({ $0 }) { return key }
    guard let key = try? ModeKey.load(from: stateDirectory) else { return nil }
    modeKey.withLock { $0 = key }
    return key
  }

  // MARK: Names

  /// Looks up `name` in `parent`, counting one lookup of the node it returns.
  func lookup(_ parent: MountNode, _ name: String) throws(Errno) -> (MountNode, stat) {
    guard name != "." && name != ".." else { throw .noSuchFile }
    // Files and directories are opened for reading (without following a link, blocking, or
    // becoming a terminal), so that their attributes are read through the descriptor itself; any
    // other item only as a path.
    var before = stat()
    _ = try Kernel.fstatat(parent.fd, name, &before, AT_SYMLINK_NOFOLLOW).get()
    // The fast path, for what is not a directory and keeps a write bit (so no lock restricted it
    // and its attributes are shown as they are): a file handle taken by name, no descriptor. Its
    // class is read from the inode itself at each open, and the handle is checked against the
    // inode number whenever it is opened.
    if before.st_mode & S_IFMT != S_IFDIR, before.st_mode & 0o222 != 0 {
      let key = MountNode.Key(device: UInt64(before.st_dev), inode: UInt64(before.st_ino))
      if let known = nodes.rememberKnown(key, parent: parent) { return (known, before) }
      if let handle = InodeHandle(entry: name, in: parent.fd),
        let node = nodes.remember(
          key: key, fd: -1, isDirectory: false, parent: parent, own: nil, containerDefault: nil, prepared: handle)
      {
        return (node, before)
      }
    }
    let readable = before.st_mode & S_IFMT == S_IFREG || before.st_mode & S_IFMT == S_IFDIR
    let pathOnly = PROTFS_MOUNT_O_PATH | O_NOFOLLOW | O_CLOEXEC
    let flags = readable ? O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC : pathOnly
    let fd: Int32
    switch Kernel.openat(parent.fd, name, flags) {
    case .success(let opened): fd = opened
    case .failure(let e) where e == .noSuchFile || e == .tooManySymlinks: throw e
    case .failure: fd = try Kernel.openat(parent.fd, name, pathOnly).get()
    }
    let s: stat
    do {
      s = try attributes(fd)
    } catch {
      closeDescriptor(fd)
      throw error
    }
    let kind = s.st_mode & S_IFMT
    let labelled = kind == S_IFREG || kind == S_IFDIR
    let own = labelled ? (try? readClass(fd, AttributeName.protectionClass)) ?? nil : nil
    let containerDefault =
      kind == S_IFDIR && parent === nodes.root ? (try? readClass(fd, AttributeName.defaultClass)) ?? nil : nil
    guard
      let node = nodes.remember(
        key: MountNode.Key(device: UInt64(s.st_dev), inode: UInt64(s.st_ino)), fd: fd,
        isDirectory: kind == S_IFDIR, parent: parent, own: .some(own), containerDefault: containerDefault)
    else { throw Errno(ESTALE) }
    return (node, s)
  }

  /// Labels a new item with `cls` and hands it to the caller (`uid`, `gid`), through `fd`.
  func adopt(_ fd: Int32, class cls: ProtectionClass?, uid: uid_t, gid: gid_t, parent: MountNode) throws(Errno) {
    if let cls {
      try cls.write(to: .descriptor(fd, pathOnly: true)).get()
    }
    if isRoot, uid != 0 || gid != 0 {
      // A set-group-ID directory gives its group to new items, as the kernel does.
      var p = stat()
      let keepGroup = (try? Kernel.fstat(parent.fd, &p).get()) != nil && p.st_mode & S_ISGID != 0
      _ = try Kernel.fchownat(
        fd, "", uid, keepGroup ? gid_t.max : gid, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW
      ).get()
    }
    if let cls { try restrictIfLocked(fd, class: cls) }
  }

  /// Restricts a new item in the backing tree as a lock would have (saved-mode record, handed to
  /// root, restricted mode) when the state withdraws its class now: a complete-unless-open file
  /// made while locked. Its creator keeps writing through the handle it opened; the mount shows
  /// the saved mode; unlock restores it; and `status` finds it in line with the state.
  private func restrictIfLocked(_ fd: Int32, class cls: ProtectionClass) throws(Errno) {
    var s = stat()
    _ = try Kernel.fstatat(fd, "", &s, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW).get()
    let isDirectory = s.st_mode & S_IFMT == S_IFDIR
    guard protectionState().restricts(isDirectory ? .directory : .file, cls), let key = currentModeKey() else {
      return
    }
    let record = SavedModeRecord(mode: UInt32(s.st_mode) & 0o7777, uid: s.st_uid, gid: s.st_gid)
    let identity = ItemIdentity(inode: 0, birthSeconds: 0, birthNanoseconds: 0, isDirectory: isDirectory)
    try record.encoded(for: identity, key: key).withUnsafeBytes { raw in
      Kernel.setAttribute(.descriptor(fd, pathOnly: true), attribute: AttributeName.savedMode, value: raw, flags: 1)
    }.get()
    let handedOver = isRoot && s.st_uid != 0
    if handedOver {
      _ = try Kernel.fchownat(fd, "", 0, s.st_gid, PROTFS_MOUNT_AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW).get()
    }
    let restricted = SavedModeRecord.restrictedMode(record.mode, isDirectory: isDirectory, handedOver: handedOver)
    _ = try Kernel.chmod(procPath(fd), mode_t(restricted)).get()
  }

  /// The class an item created in `parent` gets, once the table allows creating there now.
  func classForNewItem(in parent: MountNode) throws(Errno) -> ProtectionClass {
    // The class is read again where it comes from (the parent's own, else each ancestor's): one set
    // behind the mount (`protfs set-class` on the device) decides at once, not after the cache time.
    refreshOwnClass(parent)
    if nodes.ownClass(of: parent) == nil {
      for ancestor in nodes.ancestors(of: parent) { refreshOwnClass(ancestor) }
    }
    let cls = nodes.effectiveClass(of: parent)
    try decide(cls, .create)
    return cls
  }

  /// Turns a new item `name` in `parent` into a node (one lookup) for the reply.
  func entry(_ parent: MountNode, _ name: String) throws(Errno) -> (MountNode, stat) {
    try lookup(parent, name)
  }
}
