import CFuse3
import ProtFSSystem
import Synchronization

/// The files of a sealed mount whose pages the kernel may hold: every read and write of a sealed
/// file goes through the daemon (direct I/O), but a private `mmap` of one fills the page cache, and
/// only through a handle. So only the files opened since the mount last applied a state, and those
/// still open, can have pages there: a state change drops theirs, not those of every file the mount
/// knows, and costs the same whatever the number of files.
final class SealedPages: Sendable {
  /// Node IDs, each with the number of its handles open now (0: opened and closed since).
  private let handles = Mutex<[UInt64: Int]>([:])

  /// A handle of node `id` was opened.
  func opened(_ id: UInt64) { handles.withLock { $0[id, default: 0] += 1 } }

  /// A handle of node `id` was released.
  func closed(_ id: UInt64) { handles.withLock { $0[id] = max(0, ($0[id] ?? 1) - 1) } }

  /// The files whose pages to drop now; those still open stay for the next state.
  func drain() -> [UInt64] {
    handles.withLock { handles in
      defer { handles = handles.filter { $0.value > 0 } }
      return Array(handles.keys)
    }
  }
}

extension MountFileSystem {
  /// A sealed mount's part of a state change, after `seal` took the keys the state allows: drops the
  /// kernel's cached pages of the sealed files opened since the last change (``SealedPages``). The
  /// classes of the items the mount knows are not read again, as an unsealed mount does: a sealed
  /// file's key decides what can be read, and each open and each I/O of a withdrawn class reads the
  /// file's own class again.
  func invalidateSealedFiles(_ seal: MountSeal) {
    let opened = seal.pages.drain()
    let address = session.withLock { $0 }
    guard address != 0 else { return }
    // A node the kernel forgot since has no pages left.
    let files = opened.compactMap { try? nodes.node($0) }
    nodes.noteAttributesDropped(files)
    for node in files {
      _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: address), fuse_ino_t(node.id), 0, 0)
    }
  }
}
