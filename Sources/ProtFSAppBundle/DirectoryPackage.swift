import Foundation
import ProtFSSystem

/// An `.app` directory, held open: its members are opened relative to that descriptor with
/// `O_NOFOLLOW`, so a member that is a symbolic link (to a file outside, or anywhere) is refused,
/// never followed, and a FIFO or device put in a member's place is refused before it is read.
final class DirectoryPackage {
  /// The directory, held open.
  let directory: DirectoryHandle

  /// Takes over `fd`, the directory found at `path`.
  init(fd: FileDescriptor, path: String) {
    directory = DirectoryHandle(fd: fd.take(), path: path)
  }

  /// The member `name` (a plain name) of the directory, of at most `limit` bytes; nil when there
  /// is none.
  func member(_ name: String, limit: Int) throws(ProtFSError) -> (any PackageMember)? {
    let shown = directory.pathOf(name)
    let fd: FileDescriptor
    switch Kernel.openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)
    {
    case .success(let opened): fd = FileDescriptor(owning: opened)
    case .failure(let e) where e == .noSuchFile: return nil
    case .failure(let e) where e == .tooManySymlinks: throw AppPackageError.symlink(shown)
    case .failure(let e): throw ProtFSError.system("read the app's file", path: shown, errno: e)
    }
    var status = stat()
    _ = try Kernel.fstat(fd.rawValue, &status).orThrow("read the app's file", path: shown)
    guard status.st_mode & S_IFMT == S_IFREG else {
      throw AppPackageError.malformed(shown, "it is not a regular file")
    }
    guard status.st_size <= limit else {
      throw AppPackageError.malformed(shown, "it is \(status.st_size) bytes, more than the \(limit) protfs reads")
    }
    return DescriptorMember(fd: fd, path: shown, size: Int(status.st_size))
  }
}

/// A regular file of an `.app` directory, read with `pread`.
private final class DescriptorMember: PackageMember {
  let path: String
  let size: Int
  private let fd: FileDescriptor

  init(fd: FileDescriptor, path: String, size: Int) {
    self.fd = fd
    self.path = path
    self.size = size
  }

  func read(_ offset: Int, _ count: Int) throws(ProtFSError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
      let got = try bytes.withUnsafeMutableBytes { buffer in
        Kernel.pread(fd.rawValue, buffer.baseAddress! + done, count - done, off_t(offset + done))
      }.orThrow("read the app's file", path: path)
      guard got > 0 else { throw AppPackageError.malformed(path, "it became shorter while it was read") }
      done += got
    }
    return bytes
  }
}
