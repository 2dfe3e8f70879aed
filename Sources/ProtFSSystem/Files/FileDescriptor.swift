import Foundation
import Synchronization

/// An open file descriptor that this value owns and closes exactly once: by `close()`, or when
/// the last reference goes away.
///
/// After the close (or after `take()` handed the descriptor on) `rawValue` is -1, so a late use
/// fails with EBADF instead of reaching whatever the kernel has since given the same number to
/// (another thread's new descriptor). A class rather than a noncopyable struct: a transfer's
/// temp file is shared by the engine and the finisher threads and closed by whichever ends it.
public final class FileDescriptor: Sendable {
  /// The descriptor, or -1 once closed or handed on.
  private let value: Atomic<Int32>

  /// Takes ownership of `fd`, an open descriptor.
  public init(owning fd: Int32) {
    value = Atomic(fd)
  }

  deinit { close() }

  /// The descriptor, for system calls; -1 once closed or handed on. Valid while this value is.
  public var rawValue: Int32 { value.load(ordering: .acquiring) }

  /// Whether the descriptor is still open here (not closed nor handed on).
  public var isOpen: Bool { rawValue >= 0 }

  /// Hands the descriptor to the caller, who closes it from now on; -1 if it was already closed.
  public func take() -> Int32 {
    value.exchange(-1, ordering: .acquiringAndReleasing)
  }

  /// Closes the descriptor, once: later calls do nothing and succeed.
  ///
  /// Never retried (`closeDescriptor(_:)`): on Linux `close(2)` releases the descriptor even when
  /// it fails. Other errors (EIO, ENOSPC, EDQUOT from a delayed write) are returned for callers
  /// that must know the data reached the file.
  @discardableResult
  public func close() -> Result<Void, Errno> {
    let fd = take()
    guard fd >= 0 else { return .success(()) }
    return closeDescriptor(fd)
  }
}

extension DirectoryHandle {
  /// Opens the file `name` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` are always added), as a
  /// descriptor that closes itself.
  public func openDescriptor(
    _ name: String, flags: Int32, permissions: FilePermissions = FilePermissions(rawValue: 0o644)
  ) throws(ProtFSError) -> FileDescriptor {
    FileDescriptor(owning: try openFile(name, flags: flags, permissions: permissions))
  }
}

extension FileDescriptor {
  /// A pipe, both ends close-on-exec: one a process keeps to itself (an app's events, a thread's
  /// wake-up), which no program it starts inherits.
  package static func pipe() -> Result<(read: FileDescriptor, write: FileDescriptor), Errno> {
    var ends: [Int32] = [0, 0]
    if case .failure(let e) = valueOrErrno(.pipe, { Foundation.pipe(&ends) }) { return .failure(e) }
    for end in ends { _ = valueOrErrno(.fcntl) { fcntl(end, F_SETFD, FD_CLOEXEC) } }
    return .success((FileDescriptor(owning: ends[0]), FileDescriptor(owning: ends[1])))
  }
}
