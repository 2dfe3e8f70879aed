import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// Drops the kernel's cached pages of every protected file the mount knows when the device's state
/// changes (docs/semantics.md §7): reads and writes of such files already go to the daemon each
/// time (direct I/O), but a private `mmap` can still fill the page cache, and no page of a class
/// the new state withdraws may be served from there.
enum MountStateWatcher {
  /// Watches `.protfs/` for replaced state files, on a thread of its own for the daemon's life.
  static func start(_ fs: MountFileSystem) {
    let inotify = inotify_init1(Int32(IN_CLOEXEC))
    guard inotify >= 0 else { return }
    let mask = UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)
    guard inotify_add_watch(inotify, fs.device.stateDirectory, mask) >= 0 else {
      close(inotify)
      return
    }
    Thread.detachNewThread {
      var last = fs.protectionState()
      var buffer = [UInt8](repeating: 0, count: 4096)
      while (try? valueOrErrno(.read) { read(inotify, &buffer, buffer.count) }.get()) ?? 0 > 0 {
        let now = fs.protectionState()
        guard now != last else { continue }
        last = now
        fs.invalidateProtectedFiles()
      }
      close(inotify)
    }
  }
}

extension MountFileSystem {
  /// Asks the kernel to drop the cached pages of every known file whose class is not none.
  func invalidateProtectedFiles() {
    let address = session.withLock { $0 }
    guard address != 0 else { return }
    for node in nodes.files() where nodes.effectiveClass(of: node) != .none {
      _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: address), fuse_ino_t(node.id), 0, 0)
    }
  }
}
