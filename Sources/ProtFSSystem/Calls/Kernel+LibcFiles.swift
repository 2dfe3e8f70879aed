import CProtFSSys
import Foundation

/// The libc calls on open descriptors, as the layers above make them: each has the C function's name and
/// arguments and returns its value, or the errno it failed with, through `valueOrErrno` (EINTR retried,
/// faults injected in debug builds under the tag the doc comment names).
extension Kernel {
  /// `open(2)` of `path`. As `.open`.
  package static func open(_ path: UnsafePointer<CChar>, _ oflag: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.open) { Glibc.open(path, oflag) }
  }

  /// `open(2)` of `path`, creating it with `mode`. As `.open`.
  package static func open(_ path: UnsafePointer<CChar>, _ oflag: Int32, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.open) { Glibc.open(path, oflag, mode) }
  }

  /// `openat(2)` of `path` relative to `dirfd`, creating it with `mode` (`Kernel.openAt` as a `Result`). As `.open`.
  package static func openat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ oflag: Int32, _ mode: mode_t = 0
  ) -> Result<Int32, Errno> {
    valueOrErrno(.open) { protfs_openat(dirfd, path, oflag, mode) }
  }

  /// `read(2)`. As `.read`.
  package static func read(_ fd: Int32, _ buf: UnsafeMutableRawPointer?, _ nbytes: Int) -> Result<Int, Errno> {
    valueOrErrno(.read) { Glibc.read(fd, buf, nbytes) }
  }

  /// `write(2)`. As `.write`.
  package static func write(_ fd: Int32, _ buf: UnsafeRawPointer?, _ n: Int) -> Result<Int, Errno> {
    valueOrErrno(.write) { Glibc.write(fd, buf, n) }
  }

  /// `pread(2)`. As `.read`.
  package static func pread(
    _ fd: Int32, _ buf: UnsafeMutableRawPointer?, _ nbytes: Int, _ offset: off_t
  ) -> Result<Int, Errno> {
    valueOrErrno(.read) { Glibc.pread(fd, buf, nbytes, offset) }
  }

  /// `pwrite(2)`. As `.write`.
  package static func pwrite(_ fd: Int32, _ buf: UnsafeRawPointer?, _ n: Int, _ offset: off_t) -> Result<Int, Errno> {
    valueOrErrno(.write) { Glibc.pwrite(fd, buf, n, offset) }
  }

  /// `lseek(2)`. As `.seek`.
  package static func lseek(_ fd: Int32, _ offset: off_t, _ whence: Int32) -> Result<off_t, Errno> {
    valueOrErrno(.seek) { Glibc.lseek(fd, offset, whence) }
  }

  /// `fsync(2)`. As `.fsync`.
  package static func fsync(_ fd: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.fsync) { Glibc.fsync(fd) }
  }

  /// `fdatasync(2)`. As `.fdatasync`.
  package static func fdatasync(_ fd: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.fdatasync) { Glibc.fdatasync(fd) }
  }

  /// `ftruncate(2)`; `tag` names it for fault injection (`.truncate` unless a caller counts it a write).
  package static func ftruncate(_ fd: Int32, _ length: off_t, as tag: Syscall = .truncate) -> Result<Int32, Errno> {
    valueOrErrno(tag) { Glibc.ftruncate(fd, length) }
  }

  /// `truncate(2)`. As `.truncate`.
  package static func truncate(_ path: UnsafePointer<CChar>, _ length: off_t) -> Result<Int32, Errno> {
    valueOrErrno(.truncate) { Glibc.truncate(path, length) }
  }

  /// `flock(2)`. As `.flock`.
  package static func flock(_ fd: Int32, _ operation: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.flock) { libc_flock(fd, operation) }
  }

  /// `fcntl(2)` without an argument (`F_GETFL`, `F_GETFD`); `tag` names it for fault injection.
  package static func fcntl(_ fd: Int32, _ cmd: Int32, as tag: Syscall = .fcntl) -> Result<Int32, Errno> {
    valueOrErrno(tag) { Glibc.fcntl(fd, cmd) }
  }

  /// `fcntl(2)` with an integer argument (`F_SETFD`, `F_SETFL`, `F_DUPFD_CLOEXEC`); `tag` names it for fault injection
  /// (`.open` for a descriptor duplicated to be opened).
  package static func fcntl(_ fd: Int32, _ cmd: Int32, _ arg: Int32, as tag: Syscall = .fcntl) -> Result<Int32, Errno> {
    valueOrErrno(tag) { Glibc.fcntl(fd, cmd, arg) }
  }

  /// `dup2(2)`. As `.dup`.
  package static func dup2(_ fd: Int32, _ fd2: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.dup) { Glibc.dup2(fd, fd2) }
  }

  /// `futimens(2)`: `times` as [atime, mtime], nil for now. As `.utimens`.
  package static func futimens(_ fd: Int32, _ times: UnsafePointer<timespec>?) -> Result<Int32, Errno> {
    valueOrErrno(.utimens) { Glibc.futimens(fd, times) }
  }

  /// `fstat(2)`. As `.stat`.
  package static func fstat(_ fd: Int32, _ buf: UnsafeMutablePointer<stat>) -> Result<Int32, Errno> {
    valueOrErrno(.stat) { Glibc.fstat(fd, buf) }
  }

  /// `fstatvfs(2)`. As `.statfs`.
  package static func fstatvfs(_ fd: Int32, _ buf: UnsafeMutablePointer<statvfs>) -> Result<Int32, Errno> {
    valueOrErrno(.statfs) { Glibc.fstatvfs(fd, buf) }
  }
}

// The C functions whose names a type or a `Kernel` member shadows inside `extension Kernel` (a module
// name does not reach them either).
private func libc_flock(_ fd: Int32, _ operation: Int32) -> Int32 { flock(fd, operation) }
