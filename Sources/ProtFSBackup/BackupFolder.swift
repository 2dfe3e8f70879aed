import Foundation
import ProtFS
import ProtFSSystem

/// A backup folder, opened once, and everything protfs reads of it opened beneath that descriptor.
///
/// Anyone may have written the backup, and may change it while root reads it: swap the folder
/// for a link to root's own backups, make a bucket `xx/` a link, plant a FIFO or a hard link to a
/// file of root's. The folder's own path is resolved once, as the user gave it (links and all);
/// every file below it is then opened with `openat2` (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`)
/// relative to the held descriptor, so no later change to a path reaches a read.
package final class BackupFolder: Sendable {
  /// The folder, held open.
  package let directory: DirectoryHandle

  /// The folder's path, as the user gave it (for messages).
  package var path: String { directory.path }

  /// Opens the folder at `path`. Throws when it is absent (no backup: it has no Manifest.db) or
  /// not a directory.
  package init(path: String) throws(ProtFSError) {
    switch Kernel.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) {
    case .success(let fd):
      directory = DirectoryHandle(fd: fd, path: path)
    case .failure(let e) where e == .noSuchFile || e == .notDirectory:
      throw ProtFSError(
        .notFound, "'\(path)' is not an iOS backup: it has no Manifest.db.", path: path, errno: e.rawValue,
        remedy: .advice("give the folder that holds Manifest.db, Manifest.plist and Info.plist"))
    case .failure(let e):
      throw ProtFSError.system("open the backup folder", path: path, errno: e)
    }
  }

  /// The path of `relative` in the folder, for messages.
  package func pathOf(_ relative: String) -> String { directory.pathOf(relative) }

  /// Why a file of the backup is not read.
  package enum Refusal: Error, Equatable {
    /// There is no such file (`ENOENT`).
    case absent
    /// A component of its path is a symbolic link or leaves the folder.
    case link
    /// It is not a regular file (its `st_mode` type bits: a directory, FIFO, device or socket).
    case notRegular(mode_t)
    /// It has more than one link: the same file may be someone else's, elsewhere.
    case links(UInt64)
    /// It cannot be opened or examined.
    case failed(Errno)

    /// The reason, for "…: REASON".
    package var reason: String {
      switch self {
      case .absent: return "it is absent"
      case .link: return "its path passes through a symbolic link, which protfs does not follow"
      case .notRegular(let type):
        let kinds: [mode_t: String] = [S_IFDIR: "directory", S_IFIFO: "FIFO", S_IFSOCK: "socket"]
        return "it is a \(kinds[type] ?? "device"), not a regular file"
      case .links(let count): return "it has \(count) links, and protfs reads only a file of one"
      case .failed(let e): return e.description
      }
    }
  }

  /// Opens the regular file `relative` (plain names joined by `/`) for reading, beneath the
  /// folder, with its status: never through a link, nor a FIFO that would hold the open, nor a
  /// file of more than one link (a hard link to a file of root's in a folder its writer owns).
  package func openFile(_ relative: String) -> Result<(FileDescriptor, stat), Refusal> {
    let fd: FileDescriptor
    switch directory.openBeneath(relative, flags: O_RDONLY | O_NONBLOCK | O_NOCTTY) {
    case .success(let opened): fd = FileDescriptor(owning: opened)
    case .failure(let e) where e == .noSuchFile || e == .notDirectory: return .failure(.absent)
    case .failure(let e) where e == .tooManySymlinks || e == .crossDevice: return .failure(.link)
    case .failure(let e): return .failure(.failed(e))
    }
    var status = stat()
    if case .failure(let e) = Kernel.fstat(fd.rawValue, &status) { return .failure(.failed(e)) }
    guard status.st_mode & S_IFMT == S_IFREG else { return .failure(.notRegular(status.st_mode & S_IFMT)) }
    guard status.st_nlink == 1 else { return .failure(.links(UInt64(status.st_nlink))) }
    return .success((fd, status))
  }

  /// The bytes of the regular file `relative`, at most `limit` (its size is checked before
  /// anything is read: a sparse file of gigabytes costs nothing to make); nil when it is absent.
  /// Throws naming the file when it is refused, larger, or unreadable.
  package func read(_ relative: String, limit: Int) throws(ProtFSError) -> [UInt8]? {
    let path = pathOf(relative)
    let (fd, status): (FileDescriptor, stat)
    switch openFile(relative) {
    case .success(let opened): (fd, status) = opened
    case .failure(.absent): return nil
    case .failure(let refusal):
      throw ProtFSError(.malformed, "The backup's '\(path)' is not read: \(refusal.reason).", path: path)
    }
    guard status.st_size <= limit else {
      throw ProtFSError(
        .malformed, "The backup's '\(path)' is larger than \(limit) bytes (\(status.st_size)): it is not read.",
        path: path)
    }
    // One byte more than its size: a file that grew since the `fstat` is refused, not read on.
    var bytes = [UInt8](repeating: 0, count: Int(status.st_size) + 1)
    var count = 0
    while count < bytes.count {
      let read = try bytes.withUnsafeMutableBytes { buffer in
        Kernel.pread(fd.rawValue, buffer.baseAddress! + count, buffer.count - count, off_t(count))
      }.orThrow("read", path: path)
      if read == 0 { break }
      count += read
    }
    guard count <= status.st_size else {
      throw ProtFSError(.malformed, "The backup's '\(path)' grew while it was read: it is not read.", path: path)
    }
    return Array(bytes.prefix(count))
  }
}
