import CFuse3
import Foundation
import ProtFS
import ProtFSSystem

/// Reads the classes of the items the mount knows again and drops the kernel's cached pages of
/// every file it knows when the device's state changes (docs/semantics.md §7): reads and writes
/// of protected files already go to the daemon each time (direct I/O), but class none's are
/// cached and a private `mmap` can fill the page cache, and no page of a class the new state
/// withdraws may be served from there.
enum MountStateWatcher {
  /// Watches `.protfs/` for replaced state files, on a thread of its own for the daemon's life.
  static func start(_ fs: MountFileSystem) {
    guard case .success(let inotify) = Kernel.inotify_init1(Int32(IN_CLOEXEC)) else { return }
    let mask = UInt32(IN_MOVED_TO | IN_CLOSE_WRITE | IN_CREATE)
    let directory = fs.device.stateDirectory
    guard case .success = Kernel.inotify_add_watch(inotify, directory, mask) else {
      closeDescriptor(inotify)
      return
    }
    let first = fs.protectionState()
    fs.seal?.apply(first)
    fs.appliedState.withLock { $0 = first }
    Thread.detachNewThread {
      var last = first
      var buffer = [UInt8](repeating: 0, count: 4096)
      while (try? Kernel.read(inotify, &buffer, buffer.count).get()) ?? 0 > 0 {
        let now = fs.protectionState()
        guard now != last else { continue }
        last = now
        if let seal = fs.seal {
          seal.apply(now)
          fs.invalidateSealedFiles(seal)
        } else {
          fs.invalidateProtectedFiles()
        }
        fs.appliedState.withLock { $0 = now }
      }
      closeDescriptor(inotify)
    }
  }
}

extension MountFileSystem {
  /// Reads every known node's own class again (a class may have been set behind the mount since
  /// it was looked up), then asks the kernel to drop the cached pages of every known file: any of
  /// them may have become protected since its pages were read (a class-none file set to complete),
  /// and none may be served from there once the new state withdraws its class.
  func invalidateProtectedFiles() {
    for node in nodes.all() where node !== nodes.root { refreshOwnClass(node) }
    let address = session.withLock { $0 }
    guard address != 0 else { return }
    let files = nodes.files()
    nodes.noteAttributesDropped(files)
    for node in files {
      _ = fuse_lowlevel_notify_inval_inode(OpaquePointer(bitPattern: address), fuse_ino_t(node.id), 0, 0)
    }
  }
}
