import CProtFSSys
import Foundation

/// The name of a system call as `valueOrErrno` knows it: what debug builds' error injection
/// (`SyscallFaults`) matches on.
///
/// A name covers a family (`.getxattr` stands for `fgetxattr`, `lgetxattr` and `getxattrat`). A
/// `ProtFSError` from a failed call names it (`syscall`), encoded as its raw value.
public enum Syscall: String, Sendable, Hashable, Codable {
  /// `access(2)`.
  case access
  /// `open(2)` and `openat(2)`.
  case open
  /// `close(2)`, through `closeDescriptor(_:)`, which never retries it.
  case close
  /// `read(2)` and `pread(2)`.
  case read
  /// `write(2)` and `pwrite(2)`.
  case write
  /// `fsync(2)`.
  case fsync
  /// `fdatasync(2)`.
  case fdatasync
  /// `syncfs(2)`.
  case syncfs
  /// `sync_file_range(2)`.
  case syncFileRange
  /// `fallocate(2)`.
  case fallocate
  /// `renameat(2)` and `renameat2(2)`.
  case rename
  /// `unlink(2)`, `unlinkat(2)` and `rmdir(2)`.
  case unlink
  /// `stat(2)`, `lstat(2)`, `fstat(2)`, `fstatat(2)` and `statx(2)`.
  case stat
  /// `fchown(2)` and `fchownat(2)`.
  case chown
  /// `fchmod(2)`, `fchmodat(2)` and `fchmodat2(2)`.
  case chmod
  /// `flock(2)`.
  case flock
  /// The `getxattr(2)` family.
  case getxattr
  /// The `setxattr(2)` family.
  case setxattr
  /// The `removexattr(2)` family.
  case removexattr
  /// `lseek(2)`.
  case seek
  /// `fcntl(2)`.
  case fcntl
  /// `readlink(2)` and `readlinkat(2)`.
  case readlink
  /// `symlink(2)` and `symlinkat(2)`.
  case symlink
  /// `inotify_init1(2)`.
  case inotifyInit
  /// `inotify_add_watch(2)`.
  case inotifyAddWatch
  /// `pipe(2)` and `pipe2(2)`.
  case pipe
  /// `sigaction(2)`, through `protfs_forward_signals`.
  case sigaction
  /// `poll(2)`.
  case poll
  /// `mkdir(2)` and `mkdirat(2)`.
  case mkdir
  /// `copy_file_range(2)`.
  case copyFileRange
  /// `ioctl(2)` with `FICLONE` (a reflink).
  case cloneFile
  /// The calls that confine a process before it runs a program (`setresuid(2)`, `setgroups(2)`,
  /// `prctl(2)`, `capset(2)`, ...).
  case confine
  /// `umount2(2)`.
  case umount
  /// `dup2(2)`.
  case dup
  /// `setsid(2)`.
  case setsid
  /// `chdir(2)`.
  case chdir
  /// `fstatvfs(2)` and `statfs(2)`.
  case statfs
  /// `mknodat(2)`.
  case mknod
  /// `linkat(2)`.
  case link
  /// `open(2)` with `O_TMPFILE`: a file without a name.
  case tmpfile
  /// `truncate(2)` and `ftruncate(2)`.
  case truncate
  /// `futimens(2)` and `utimensat(2)`.
  case utimens
  /// `socket(2)`.
  case socket
  /// `bind(2)`.
  case bind
  /// `listen(2)`.
  case listen
  /// `accept4(2)`.
  case accept
  /// `connect(2)`.
  case connect
  /// `getsockopt(2)`.
  case getsockopt
  /// `kill(2)`.
  case kill
  /// `waitpid(2)`.
  case wait
  /// `open_tree(2)`.
  case openTree
  /// `socketpair(2)`.
  case socketpair
  /// `sendmsg(2)`, with descriptors attached.
  case sendmsg
  /// `recvmsg(2)`, with descriptors attached.
  case recvmsg
  /// `posix_openpt(3)` and a terminal's `ioctl(2)`s (`tcgetattr`, `tcsetattr`, window sizes).
  case terminal
  /// `add_key(2)` and `keyctl(2)`: the kernel's keyrings.
  case keyctl
}

/// Runs a system call, retrying on EINTR, and returns its value or the errno it failed with.
///
/// Every syscall in ProtFS goes through here (swift-system's `valueOrErrno`). `name` identifies the
/// call to debug builds' error injection (`SyscallFaults`); release builds ignore it.
@inline(__always)
package func valueOrErrno<T: FixedWidthInteger>(_ name: Syscall, _ call: () -> T) -> Result<T, Errno> {
  while true {
    let code: Int32
    #if DEBUG
      if let injected = SyscallFaults.take(name) {
        code = injected
      } else {
        let value = call()
        if value != -1 { return .success(value) }
        code = Foundation.errno
      }
    #else
      let value = call()
      if value != -1 { return .success(value) }
      code = Foundation.errno
    #endif
    if code != EINTR { return .failure(Errno(code, call: name)) }
  }
}

/// Closes `fd` and returns the errno it failed with, if any. The corresponding C function is
/// `close(2)`.
///
/// Unlike `valueOrErrno`, never retries: on Linux `close(2)` releases the descriptor even when it
/// fails, so an EINTR means it is closed, and a retry could close another thread's new descriptor
/// of the same number. Other errors (EIO, ENOSPC, EDQUOT from a delayed write) are returned for
/// callers that must know the data reached the file. An error injected by debug builds
/// (`SyscallFaults`, `.close`) is returned after the descriptor is closed, as the kernel's would be.
@inline(__always)
@discardableResult
package func closeDescriptor(_ fd: Int32) -> Result<Void, Errno> {
  let status = close(fd)
  #if DEBUG
    if let injected = SyscallFaults.take(.close) {
      return injected == EINTR ? .success(()) : .failure(Errno(injected, call: .close))
    }
  #endif
  guard status != 0 else { return .success(()) }
  let code = Foundation.errno
  return code == EINTR ? .success(()) : .failure(Errno(code, call: .close))
}

/// A POSIX error number, and the system call that returned it when it came from one.
///
/// Two errnos are equal when their numbers are (`result == .failure(.noData)` does not ask which
/// call failed).
public struct Errno: Error, Sendable, Equatable, Hashable, CustomStringConvertible {
  /// The raw errno value.
  public var rawValue: Int32
  /// The system call that failed with it, if `valueOrErrno` ran it.
  public var call: Syscall?
  /// Wraps a raw errno value.
  public init(_ rawValue: Int32) { self.rawValue = rawValue }
  /// Wraps a raw errno value that `call` failed with.
  public init(_ rawValue: Int32, call: Syscall?) {
    self.rawValue = rawValue
    self.call = call
  }

  /// Whether the numbers are equal, whichever call failed.
  public static func == (lhs: Errno, rhs: Errno) -> Bool { lhs.rawValue == rhs.rawValue }
  /// Hashes the number alone, as `==` compares it.
  public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
  /// strerror(3)'s text.
  public var description: String { String(cString: strerror(rawValue)) }

  /// ENOENT.
  public static let noSuchFile = Errno(ENOENT)
  /// ENODATA: no such extended attribute.
  public static let noData = Errno(ENODATA)
  /// ENOSYS: the kernel lacks the system call.
  public static let noSystemCall = Errno(ENOSYS)
  /// ENOTSUP / EOPNOTSUPP.
  public static let notSupported = Errno(ENOTSUP)
  /// EPERM.
  public static let notPermitted = Errno(EPERM)
  /// EACCES.
  public static let accessDenied = Errno(EACCES)
  /// EEXIST.
  public static let exists = Errno(EEXIST)
  /// ELOOP.
  public static let tooManySymlinks = Errno(ELOOP)
  /// ENOTDIR.
  public static let notDirectory = Errno(ENOTDIR)
  /// EXDEV.
  public static let crossDevice = Errno(EXDEV)
  /// ERANGE.
  public static let range = Errno(ERANGE)
}

extension Result where Failure == Errno {
  /// The value, or a `ProtFSError` for `operation` on `path`: where the system layer's
  /// `Result<_, Errno>` meets the library's `throws(ProtFSError)`.
  @inline(__always)
  package func orThrow(_ operation: @autoclosure () -> String, path: @autoclosure () -> String) throws(ProtFSError)
    -> Success
  {
    switch self {
    case .success(let value): return value
    case .failure(let error):
      throw ProtFSError.system(operation(), path: path(), errno: error.rawValue, syscall: error.call)
    }
  }
}
