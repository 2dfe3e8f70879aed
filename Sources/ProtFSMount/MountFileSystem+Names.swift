import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// Creating, linking, removing and renaming names: creation follows the parent's class
/// (docs/semantics.md §3, last column); removal and renaming are metadata, never gated.
extension MountFileSystem {
  /// The caller of a request, to whom new items are handed.
  struct Caller {
    /// Its filesystem uid.
    var uid: uid_t
    /// Its filesystem gid.
    var gid: gid_t
  }

  /// `mkdir`: a directory labelled with the parent's effective class.
  func makeDirectory(_ parent: MountNode, _ name: String, mode: mode_t, caller: Caller) throws(Errno) -> (
    MountNode, stat
  ) {
    let cls = try classForNewItem(in: parent)
    _ = try Kernel.mkdirat(parent.fd, name, mode).get()
    try label(parent, name, directory: true, class: cls, caller: caller)
    return try entry(parent, name)
  }

  /// `mknod`: a regular file, FIFO or socket (device nodes are refused); regular files are labelled.
  func makeNode(_ parent: MountNode, _ name: String, mode: mode_t, device: dev_t, caller: Caller) throws(Errno) -> (
    MountNode, stat
  ) {
    let kind = mode & S_IFMT
    guard kind == S_IFREG || kind == S_IFIFO || kind == S_IFSOCK else { throw .notPermitted }
    let cls = try classForNewItem(in: parent)
    _ = try Kernel.mknodat(parent.fd, name, mode, 0).get()
    try label(parent, name, directory: false, class: kind == S_IFREG ? cls : nil, caller: caller)
    return try entry(parent, name)
  }

  /// `symlink`: a link (no class: symbolic links have none), handed to the caller.
  func makeSymlink(_ target: String, _ parent: MountNode, _ name: String, caller: Caller) throws(Errno) -> (
    MountNode, stat
  ) {
    _ = try classForNewItem(in: parent)
    _ = try Kernel.symlinkat(target, parent.fd, name).get()
    if isRoot && (caller.uid != 0 || caller.gid != 0) {
      _ = try Kernel.fchownat(parent.fd, name, caller.uid, caller.gid, AT_SYMLINK_NOFOLLOW).get()
    }
    return try entry(parent, name)
  }

  /// Labels and hands over the item `name` just made in `parent`, through a descriptor of it.
  private func label(_ parent: MountNode, _ name: String, directory: Bool, class cls: ProtectionClass?, caller: Caller)
    throws(Errno)
  {
    let flags = PROTFS_MOUNT_O_PATH | O_NOFOLLOW | O_CLOEXEC | (directory ? O_DIRECTORY : 0)
    let fd = try Kernel.openat(parent.fd, name, flags).get()
    defer { closeDescriptor(fd) }
    try adopt(fd, class: cls, uid: caller.uid, gid: caller.gid, parent: parent)
  }

  /// `link`: a new name for `node` (metadata: not gated).
  func link(_ node: MountNode, _ parent: MountNode, _ name: String) throws(Errno) -> (MountNode, stat) {
    // The new name must not give the file the class of its new directory.
    try keepClass(node)
    _ = try node.withPath { (fd) throws(Errno) in
      try Kernel.linkat(fd, "", parent.fd, name, PROTFS_MOUNT_AT_EMPTY_PATH).get()
    }
    return try entry(parent, name)
  }

  /// `unlink` and `rmdir` (metadata: not gated).
  func remove(_ parent: MountNode, _ name: String, directory: Bool) throws(Errno) {
    _ = try Kernel.unlinkat(parent.fd, name, directory ? AT_REMOVEDIR : 0).get()
  }

  /// `rename`, with renameat2(2)'s flags (metadata: not gated). Moved items keep their class: an
  /// item without a class of its own is first given the one it has where it is, as its own, so
  /// that moving it (a file made behind the mount in a complete directory, into a class-none one)
  /// never declassifies it, and a moved directory's children keep theirs.
  func rename(_ parent: MountNode, _ name: String, _ newParent: MountNode, _ newName: String, flags: UInt32)
    throws(Errno)
  {
    try keepClass(name, in: parent)
    if flags & UInt32(PROTFS_MOUNT_RENAME_EXCHANGE) != 0 { try keepClass(newName, in: newParent) }
    _ = try Kernel.renameat2(parent.fd, name, newParent.fd, newName, Kernel.RenameFlags(rawValue: flags)).get()
    reparent(newParent, newName)
    if flags & UInt32(PROTFS_MOUNT_RENAME_EXCHANGE) != 0 { reparent(parent, name) }
  }

  /// Gives the entry `name` of `parent` (a regular file or directory without a class of its own)
  /// the class it has there now, as its own, before it moves.
  private func keepClass(_ name: String, in parent: MountNode) throws(Errno) {
    var s = stat()
    guard case .success = Kernel.fstatat(parent.fd, name, &s, AT_SYMLINK_NOFOLLOW) else { return }
    let kind = s.st_mode & S_IFMT
    guard kind == S_IFREG || kind == S_IFDIR else { return }
    let own = withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer -> Bool in
      switch Kernel.getAttribute(dirfd: parent.fd, name: name, attribute: AttributeName.protectionClass, into: buffer) {
      case .success: return true
      default: return false
      }
    }
    guard !own else { return }
    let cls = nodes.effectiveClass(of: parent)
    try cls.write(to: .entry(dirfd: parent.fd, name: FileName(name))).get()
    if let node = nodes.node(for: MountNode.Key(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))) {
      nodes.setOwnClass(node, cls)
    }
  }

  /// Gives `node` (about to get another name) the class it has now as its own, when it has none.
  private func keepClass(_ node: MountNode) throws(Errno) {
    refreshOwnClass(node)
    guard nodes.ownClass(of: node) == nil else { return }
    let cls = nodes.effectiveClass(of: node)
    try node.withPath { (fd) throws(Errno) in
      try cls.write(to: .descriptor(fd, pathOnly: true)).get()
    }
    nodes.setOwnClass(node, cls)
  }

  /// Makes the node of the entry `name` of `parent`, if the kernel knows it, a child of `parent`.
  private func reparent(_ parent: MountNode, _ name: String) {
    var s = stat()
    guard case .success = Kernel.fstatat(parent.fd, name, &s, AT_SYMLINK_NOFOLLOW),
      let node = nodes.node(for: MountNode.Key(device: UInt64(s.st_dev), inode: UInt64(s.st_ino)))
    else { return }
    nodes.reparent(node, to: parent)
  }

  /// `readlink`.
  func readLink(_ node: MountNode) throws(Errno) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = try node.withPath { (fd) throws(Errno) in
      try Kernel.readlinkat(fd, "", &buffer, buffer.count - 1).get()
    }
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}
