import CFuse3
import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// One backing item the kernel knows through the mount, and the number of lookups the kernel holds.
///
/// A directory keeps an `O_PATH | O_NOFOLLOW` descriptor (its children are opened relative to it).
/// Any other item keeps only its file handle (name_to_handle_at(2)) and the directory it was found
/// in, and is opened by handle when needed: a descriptor per file would cap the mount at the
/// process's descriptor limit. The mutable fields belong to `MountNodes` and are only touched
/// under its lock.
///
/// `@unchecked Sendable`: see above: the mutable fields are only touched under `MountNodes`'s lock,
/// the rest is immutable.
final class MountNode: @unchecked Sendable {
  /// The backing inode: device and inode number.
  struct Key: Hashable {
    var device: UInt64
    var inode: UInt64
  }

  /// The number the kernel knows the node by (`fuse_ino_t`); 1 is the mount's root.
  let id: UInt64
  /// The backing inode.
  let key: Key
  /// The `O_PATH` descriptor of a directory (or of an item without file handles); else -1.
  let fd: Int32
  /// The file handle of an item without a descriptor (header and handle bytes, kept inline:
  /// 100,000 nodes must fit in a few tens of MiB), and its length; 0 when there is none.
  let handle: InodeHandle.Bytes
  /// The length of `handle` in bytes.
  let handleLength: UInt8
  /// A descriptor of a directory on the item's filesystem, which opens the handle (borrowed from
  /// the table, which keeps one per filesystem).
  let mountFD: Int32
  /// Whether the item is a directory.
  let isDirectory: Bool
  /// The lookups the kernel holds (`forget` gives them back).
  var lookups: UInt64 = 0
  /// The directory it was last reached through; its class is inherited from there.
  var parent: MountNode?
  /// Its own `user.protfs.class`, nil when it has none.
  var ownClass: ProtectionClass?
  /// A container root's `user.protfs.default-class`.
  var containerDefault: ProtectionClass?
  /// When (`DispatchTime` nanoseconds) the last entry reply for it was sent, from which the
  /// kernel keeps its name and attributes for the cache time; 0 once they may be gone.
  var entrySentAt: UInt64 = 0
  /// For a directory: when the oldest entry of its last whole listing was sent (0: none since
  /// its entries may have gone), so that the kernel still holds every entry of that listing.
  var listingSentAt: UInt64 = 0

  /// A node for `fd`, which it owns from now on: kept for a directory; for anything else replaced
  /// by its file handle (and closed) when the filesystem gives one.
  init(id: UInt64, key: Key, fd: Int32, isDirectory: Bool, mountFD: Int32, prepared: InodeHandle?) {
    self.id = id
    self.key = key
    self.isDirectory = isDirectory
    var handle: InodeHandle.Bytes = (0, 0, 0, 0)
    var handleLength = 0
    if let prepared, mountFD >= 0 {
      handle = prepared.bytes
      handleLength = prepared.length
    } else if !isDirectory, mountFD >= 0, fd >= 0, let made = InodeHandle(of: fd) {
      handle = made.bytes
      handleLength = made.length
    }
    self.handle = handle
    self.handleLength = UInt8(handleLength)
    self.mountFD = handleLength == 0 ? -1 : mountFD
    if handleLength == 0 {
      self.fd = fd
    } else {
      if fd >= 0 { closeDescriptor(fd) }
      self.fd = -1
    }
  }

  deinit { if fd >= 0 { closeDescriptor(fd) } }

  /// Opens the item anew with `flags` (no name is resolved: the `/proc` magic link of the
  /// descriptor, or the file handle, leads to exactly this inode).
  func reopen(_ flags: Int32) throws(Errno) -> Int32 {
    if fd >= 0 { return try Kernel.open("/proc/self/fd/\(fd)", flags | O_CLOEXEC).get() }
    var handle = handle
    let opened = try withUnsafeBytes(of: &handle) {
      Kernel.open_by_handle_at(mountFD, $0.baseAddress, flags | O_CLOEXEC, through: protfs_open_by_handle)
    }.get()
    // A handle taken by name could name another inode if the name changed meanwhile: check.
    var s = stat()
    guard case .success = Kernel.fstat(opened, &s), UInt64(s.st_dev) == key.device,
      UInt64(s.st_ino) == key.inode
    else {
      closeDescriptor(opened)
      throw Errno(ESTALE)
    }
    return opened
  }

  /// Runs `body` with an `O_PATH` descriptor of the item (its own, or one opened for the call).
  func withPath<T>(_ body: (Int32) throws(Errno) -> T) throws(Errno) -> T {
    if fd >= 0 { return try body(fd) }
    let opened = try reopen(PROTFS_MOUNT_O_PATH)
    defer { closeDescriptor(opened) }
    return try body(opened)
  }
}

/// A file handle (name_to_handle_at(2)) of at most 32 bytes, header included, kept inline.
struct InodeHandle {
  /// The bytes.
  typealias Bytes = (UInt64, UInt64, UInt64, UInt64)
  /// The header and handle bytes.
  var bytes: Bytes = (0, 0, 0, 0)
  /// How many of them count.
  var length = 0

  /// The handle of the item `fd` holds; nil when the filesystem has none or it is too long.
  init?(of fd: Int32) {
    var raw = protfs_file_handle()
    guard let made = InodeHandle(raw: &raw, length: Int(protfs_name_to_handle(fd, &raw))) else { return nil }
    self = made
  }

  /// The handle of the entry `name` of the directory `dirfd`, not following a symlink.
  init?(entry name: String, in dirfd: Int32) {
    var raw = protfs_file_handle()
    guard let made = InodeHandle(raw: &raw, length: Int(protfs_name_to_handle_at(dirfd, name, &raw))) else {
      return nil
    }
    self = made
  }

  private init?(raw: inout protfs_file_handle, length: Int) {
    guard length > 0 && length <= MemoryLayout<Bytes>.size else { return nil }
    withUnsafeMutableBytes(of: &bytes) { target in
      withUnsafeBytes(of: &raw) { target.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }
    self.length = length
  }
}

/// The `/proc` path that leads to the item the descriptor `fd` holds (for the calls that take a path).
func procPath(_ fd: Int32) -> String { "/proc/self/fd/\(fd)" }

/// The inode table: nodes by kernel number and by backing inode, so that an item reached by two
/// names (or looked up again) is one node, and the effective class of every node from its chain of
/// parents (docs/semantics.md §2) without a walk of the backing tree.
final class MountNodes: Sendable {
  private struct Table {
    var byID: [UInt64: MountNode] = [:]
    var byKey: [MountNode.Key: MountNode] = [:]
    var nextID: UInt64 = 2
    /// One directory descriptor per filesystem (by device number), for opening file handles
    /// (open_by_handle_at(2) refuses `O_PATH` descriptors); open as long as the table.
    var mountFDs: [UInt64: Int32] = [:]
  }

  private let table = Mutex(Table())
  /// The mount's root (`Containers/`), never forgotten.
  let root: MountNode
  /// The own class of the device root, which everything below inherits first.
  let deviceClass: ProtectionClass?

  /// A table whose root is `root`.
  init(root: MountNode, deviceClass: ProtectionClass?) {
    self.root = root
    self.deviceClass = deviceClass
    table.withLock {
      $0.byID[root.id] = root
      $0.byKey[root.key] = root
    }
  }

  /// The node the kernel calls `id`.
  func node(_ id: UInt64) throws(Errno) -> MountNode {
    guard let node = table.withLock({ $0.byID[id] }) else { throw Errno(ESTALE) }
    return node
  }

  /// The node for the backing inode `key` reached as an entry of `parent`, counting one lookup.
  /// A new node takes `fd` (or, with `prepared`, that file handle and no descriptor), its own class
  /// and container default; an existing node keeps its descriptor (`fd` is closed) and takes the
  /// own class when it was read (`own` non-nil; a file's is read at each open anyway). Nil only
  /// when a prepared handle cannot be used (no directory of that filesystem to open it with).
  func remember(
    key: MountNode.Key, fd: Int32, isDirectory: Bool, parent: MountNode,
    own: ProtectionClass??, containerDefault: ProtectionClass?, prepared: InodeHandle? = nil
  ) -> MountNode? {
    let (node, isNew) = table.withLock { table -> (MountNode?, Bool) in
      if let existing = table.byKey[key] {
        existing.lookups += 1
        if existing !== root { existing.parent = parent }
        if let own { existing.ownClass = own }
        if containerDefault != nil { existing.containerDefault = containerDefault }
        return (existing, false)
      }
      var mountFD: Int32 = -1
      if !isDirectory {
        if let known = table.mountFDs[key.device] {
          mountFD = known
        } else if let opened = try? parent.reopen(O_RDONLY | O_DIRECTORY), opened >= 0 {
          var s = stat()
          if case .success = Kernel.fstat(opened, &s), UInt64(s.st_dev) == key.device {
            table.mountFDs[key.device] = opened
            mountFD = opened
          } else {
            closeDescriptor(opened)
          }
        }
      }
      if prepared != nil && mountFD < 0 { return (nil, false) }
      let node = MountNode(
        id: table.nextID, key: key, fd: fd, isDirectory: isDirectory, mountFD: mountFD, prepared: prepared)
      table.nextID += 1
      node.lookups = 1
      node.parent = parent
      node.ownClass = own ?? nil
      node.containerDefault = containerDefault
      table.byID[node.id] = node
      table.byKey[key] = node
      return (node, true)
    }
    if !isNew && fd >= 0 { closeDescriptor(fd) }
    return node
  }

  /// The node already known for `key`, counting one lookup and reached through `parent` now; nil
  /// when the kernel does not know it.
  func rememberKnown(_ key: MountNode.Key, parent: MountNode) -> MountNode? {
    table.withLock { table in
      guard let existing = table.byKey[key] else { return nil }
      existing.lookups += 1
      if existing !== root { existing.parent = parent }
      return existing
    }
  }

  /// Gives back `count` lookups of `id`; a node with none left leaves the table (its descriptor
  /// closes once no child holds it as parent).
  func forget(_ id: UInt64, _ count: UInt64) {
    // Released outside the lock: a deinit closes a descriptor.
    var released: MountNode?
    table.withLock { table in
      guard let node = table.byID[id], node !== root else { return }
      node.lookups = node.lookups > count ? node.lookups - count : 0
      if node.lookups == 0 {
        table.byID[id] = nil
        if table.byKey[node.key] === node { table.byKey[node.key] = nil }
        released = node
      }
    }
    _ = released
  }

  /// Notes that an entry reply for `node` is sent at `now`.
  func noteEntrySent(_ node: MountNode, at now: UInt64) { table.withLock { _ in node.entrySentAt = now } }

  /// Notes that the kernel may no longer hold the attributes of `nodes` (they were invalidated).
  func noteAttributesDropped(_ nodes: [MountNode]) {
    table.withLock { _ in
      for node in nodes {
        node.entrySentAt = 0
        node.listingSentAt = 0
        node.parent?.listingSentAt = 0
      }
    }
  }

  /// When the entry of `parent` for the inode `inode` (on `parent`'s filesystem) was sent to the
  /// kernel, if less than `validFor` nanoseconds before `now`, as an entry of `parent`, and not
  /// invalidated since: then the kernel still holds its name and attributes. Nil otherwise.
  func entryStillCached(inode: UInt64, in parent: MountNode, now: UInt64, validFor: UInt64) -> UInt64? {
    table.withLock { table in
      guard let node = table.byKey[MountNode.Key(device: parent.key.device, inode: inode)], node.parent === parent,
        node.entrySentAt != 0, now &- node.entrySentAt < validFor
      else { return nil }
      return node.entrySentAt
    }
  }

  /// Notes that a whole listing of `directory` went out, its oldest entry sent at `oldest`.
  func noteListingSent(_ directory: MountNode, oldest: UInt64) {
    table.withLock { _ in directory.listingSentAt = oldest }
  }

  /// Whether the kernel still holds every entry of the last whole listing of `directory`: its
  /// oldest entry was sent less than `validFor` nanoseconds before `now`, and none was dropped.
  func listingStillCached(_ directory: MountNode, now: UInt64, validFor: UInt64) -> Bool {
    table.withLock { _ in directory.listingSentAt != 0 && now &- directory.listingSentAt < validFor }
  }

  /// The node of the backing inode `key`, if the kernel knows it.
  func node(for key: MountNode.Key) -> MountNode? { table.withLock { $0.byKey[key] } }

  /// Moves `node` below `parent` (a rename).
  func reparent(_ node: MountNode, to parent: MountNode) {
    table.withLock { _ in if node !== root { node.parent = parent } }
  }

  /// Sets the own class of `node` (nil: removed).
  func setOwnClass(_ node: MountNode, _ own: ProtectionClass?) {
    table.withLock { _ in node.ownClass = own }
  }

  /// The own class of `node` as cached.
  func ownClass(of node: MountNode) -> ProtectionClass? { table.withLock { _ in node.ownClass } }

  /// Whether `node` is a container root: a directory directly below the mount's root.
  func isContainerRoot(_ node: MountNode) -> Bool {
    table.withLock { _ in node.isDirectory && node.parent === root }
  }

  /// The effective class of `node`: its own class, else the nearest ancestor's, else the device
  /// root's, else its container's default, else class C (docs/semantics.md §2).
  func effectiveClass(of node: MountNode) -> ProtectionClass { effectiveClass(of: node, ownToo: true) }

  /// The class `node` would have without a class of its own: what removing its class gives it.
  func inheritedClass(of node: MountNode) -> ProtectionClass { effectiveClass(of: node, ownToo: false) }

  private func effectiveClass(of node: MountNode, ownToo: Bool) -> ProtectionClass {
    table.withLock { _ in
      var containerDefault: ProtectionClass?
      var current: MountNode? = node
      while let item = current {
        if let own = item.ownClass, ownToo || item !== node { return own }
        if item.isDirectory, item.parent === root { containerDefault = item.containerDefault }
        current = item.parent
      }
      return ClassInheritance(ancestor: deviceClass, containerDefault: containerDefault).effectiveClass(own: nil)
    }
  }

  /// `node`'s ancestors, nearest first, up to the root (excluded).
  func ancestors(of node: MountNode) -> [MountNode] {
    table.withLock { _ in
      var found: [MountNode] = []
      var current = node.parent
      while let item = current, item !== root {
        found.append(item)
        current = item.parent
      }
      return found
    }
  }

  /// Every node, at this moment.
  func all() -> [MountNode] { table.withLock { Array($0.byID.values) } }

  /// Every node that is not a directory, at this moment.
  func files() -> [MountNode] { table.withLock { $0.byID.values.filter { !$0.isDirectory } } }

  /// How many nodes the table holds (the root included).
  var count: Int { table.withLock { $0.byID.count } }
}
