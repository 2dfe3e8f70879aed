import Foundation
import ProtFSSystem

extension DirectoryHandle {
  /// Opens `name` in this directory read-only, refusing a symbolic link (ELOOP) with an error that
  /// says so; the caller checks that it is a regular file through the descriptor.
  package func openSourceFile(_ name: String) throws(ProtFSError) -> FileDescriptor {
    let path = pathOf(name)
    switch Kernel.openat(fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) {
    case .success(let fd): return FileDescriptor(owning: fd)
    case .failure(let e) where e == .tooManySymlinks:
      throw ProtFSError(
        .symlink, "Cannot upload '\(path)': it is a symbolic link, which protfs does not follow.", path: path,
        errno: ELOOP, remedy: .advice("upload the file itself"))
    case .failure(let e) where e.rawValue == ENOENT:
      throw ProtFSError(.notFound, "Cannot upload '\(path)': there is no such file.", path: path, errno: ENOENT)
    case .failure(let e):
      throw ProtFSError.system("open the file to upload", path: path, errno: e)
    }
  }

  /// Whether `other` is open on the same directory (same device and inode).
  package func isSameDirectory(as other: DirectoryHandle) -> Bool {
    guard let mine = try? identity(), let theirs = try? other.identity() else { return false }
    return mine == theirs
  }

  /// Removes the file `name` if it is still the file open as `fd`; a name that now holds something
  /// else is left alone.
  package func removeFile(_ name: String, ifStill fd: Int32?) {
    if let fd {
      var open = stat()
      var named = stat()
      guard case .success = Kernel.fstat(fd, &open),
        case .success = Kernel.fstatat(self.fd, name, &named, AT_SYMLINK_NOFOLLOW),
        open.st_dev == named.st_dev, open.st_ino == named.st_ino
      else { return }
    }
    _ = Kernel.unlinkat(self.fd, name, 0)
  }
}
