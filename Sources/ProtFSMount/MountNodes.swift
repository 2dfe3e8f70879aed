import CFuse3
import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// One backing item the kernel knows through the mount: an `O_PATH | O_NOFOLLOW` descriptor of it,
/// the number of lookups the kernel holds, and what its class depends on.
///
/// The mutable fields belong to `MountNodes` and are only touched under its lock.
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
  /// The `O_PATH` descriptor; closed when the last reference goes.
  let fd: Int32
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

  /// A node for `fd`, which it owns from now on.
  init(id: UInt64, key: Key, fd: Int32, isDirectory: Bool) {
    self.id = id
    self.key = key
    self.fd = fd
    self.isDirectory = isDirectory
  }

  deinit { close(fd) }

  /// The path through `/proc/self/fd` that reopens the item (what `O_PATH` descriptors allow).
  var procPath: String { "/proc/self/fd/\(fd)" }
}

/// The inode table: nodes by kernel number and by backing inode, so that an item reached by two
/// names (or looked up again) is one node, and the effective class of every node from its chain of
/// parents (docs/semantics.md §2) without a walk of the backing tree.
final class MountNodes: Sendable {
  private struct Table {
    var byID: [UInt64: MountNode] = [:]
    var byKey: [MountNode.Key: MountNode] = [:]
    var nextID: UInt64 = 2
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
  /// A new node takes `fd`, its own class and container default from `load`; an existing node keeps
  /// its descriptor (`fd` is closed) and takes the freshly read own class.
  func remember(
    key: MountNode.Key, fd: Int32, isDirectory: Bool, parent: MountNode,
    own: ProtectionClass?, containerDefault: ProtectionClass?
  ) -> MountNode {
    let (node, isNew) = table.withLock { table -> (MountNode, Bool) in
      if let existing = table.byKey[key] {
        existing.lookups += 1
        if existing !== root { existing.parent = parent }
        existing.ownClass = own
        if containerDefault != nil { existing.containerDefault = containerDefault }
        return (existing, false)
      }
      let node = MountNode(id: table.nextID, key: key, fd: fd, isDirectory: isDirectory)
      table.nextID += 1
      node.lookups = 1
      node.parent = parent
      node.ownClass = own
      node.containerDefault = containerDefault
      table.byID[node.id] = node
      table.byKey[key] = node
      return (node, true)
    }
    if !isNew { close(fd) }
    return node
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
  func effectiveClass(of node: MountNode) -> ProtectionClass {
    table.withLock { _ in
      var containerDefault: ProtectionClass?
      var current: MountNode? = node
      while let item = current {
        if let own = item.ownClass { return own }
        if item.isDirectory, item.parent === root { containerDefault = item.containerDefault }
        current = item.parent
      }
      return ClassInheritance(ancestor: deviceClass, containerDefault: containerDefault).effectiveClass(own: nil)
    }
  }

  /// How many nodes the table holds (the root included).
  var count: Int { table.withLock { $0.byID.count } }
}
