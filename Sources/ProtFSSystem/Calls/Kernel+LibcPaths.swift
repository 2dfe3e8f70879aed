import CAttr
import Foundation

/// The libc calls on paths and directory entries, as the layers above make them: each has the C function's
/// name and arguments and returns its value or errno through `valueOrErrno` under the tag the doc comment
/// names; the few libc calls that report no errno (directory streams, `realpath`) return the C value as it is.
extension Kernel {
  /// `stat(2)`. As `.stat`.
  package static func stat(_ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<stat>) -> Result<Int32, Errno> {
    valueOrErrno(.stat) { libc_stat(path, buf) }
  }

  /// `lstat(2)`. As `.stat`.
  package static func lstat(_ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<stat>) -> Result<Int32, Errno> {
    valueOrErrno(.stat) { libc_lstat(path, buf) }
  }

  /// `fstatat(2)`. As `.stat`.
  package static func fstatat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<stat>, _ flag: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.stat) { Glibc.fstatat(dirfd, path, buf, flag) }
  }

  /// `access(2)`. As `.access`.
  package static func access(_ path: UnsafePointer<CChar>, _ type: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.access) { Glibc.access(path, type) }
  }

  /// `faccessat(2)`. As `.access`.
  package static func faccessat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ type: Int32, _ flag: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.access) { Glibc.faccessat(dirfd, path, type, flag) }
  }

  /// `chmod(2)`. As `.chmod`.
  package static func chmod(_ path: UnsafePointer<CChar>, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.chmod) { Glibc.chmod(path, mode) }
  }

  /// `fchmod(2)`. As `.chmod`.
  package static func fchmod(_ fd: Int32, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.chmod) { Glibc.fchmod(fd, mode) }
  }

  /// `fchmodat(2)`. As `.chmod`.
  package static func fchmodat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ mode: mode_t, _ flag: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.chmod) { Glibc.fchmodat(dirfd, path, mode, flag) }
  }

  /// `fchown(2)`. As `.chown`.
  package static func fchown(_ fd: Int32, _ owner: uid_t, _ group: gid_t) -> Result<Int32, Errno> {
    valueOrErrno(.chown) { Glibc.fchown(fd, owner, group) }
  }

  /// `fchownat(2)`. As `.chown`.
  package static func fchownat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ owner: uid_t, _ group: gid_t, _ flag: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.chown) { Glibc.fchownat(dirfd, path, owner, group, flag) }
  }

  /// `mkdir(2)`. As `.mkdir`.
  package static func mkdir(_ path: UnsafePointer<CChar>, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.mkdir) { Glibc.mkdir(path, mode) }
  }

  /// `mkdirat(2)`. As `.mkdir`.
  package static func mkdirat(_ dirfd: Int32, _ path: UnsafePointer<CChar>, _ mode: mode_t) -> Result<Int32, Errno> {
    valueOrErrno(.mkdir) { Glibc.mkdirat(dirfd, path, mode) }
  }

  /// `mknodat(2)`. As `.mknod`.
  package static func mknodat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ mode: mode_t, _ dev: dev_t
  ) -> Result<Int32, Errno> {
    valueOrErrno(.mknod) { Glibc.mknodat(dirfd, path, mode, dev) }
  }

  /// `unlink(2)`. As `.unlink`.
  package static func unlink(_ path: UnsafePointer<CChar>) -> Result<Int32, Errno> {
    valueOrErrno(.unlink) { Glibc.unlink(path) }
  }

  /// `unlinkat(2)`. As `.unlink`.
  package static func unlinkat(_ dirfd: Int32, _ path: UnsafePointer<CChar>, _ flag: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.unlink) { Glibc.unlinkat(dirfd, path, flag) }
  }

  /// `rmdir(2)`. As `.unlink`.
  package static func rmdir(_ path: UnsafePointer<CChar>) -> Result<Int32, Errno> {
    valueOrErrno(.unlink) { Glibc.rmdir(path) }
  }

  /// `rename(2)`. As `.rename`.
  package static func rename(_ old: UnsafePointer<CChar>, _ new: UnsafePointer<CChar>) -> Result<Int32, Errno> {
    valueOrErrno(.rename) { Glibc.rename(old, new) }
  }

  /// `renameat(2)`. As `.rename`.
  package static func renameat(
    _ oldfd: Int32, _ old: UnsafePointer<CChar>, _ newfd: Int32, _ new: UnsafePointer<CChar>
  ) -> Result<Int32, Errno> {
    valueOrErrno(.rename) { Glibc.renameat(oldfd, old, newfd, new) }
  }

  /// `linkat(2)`. As `.link`.
  package static func linkat(
    _ fromfd: Int32, _ from: UnsafePointer<CChar>, _ tofd: Int32, _ to: UnsafePointer<CChar>, _ flags: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.link) { Glibc.linkat(fromfd, from, tofd, to, flags) }
  }

  /// `symlinkat(2)`. As `.symlink`.
  package static func symlinkat(
    _ from: UnsafePointer<CChar>, _ tofd: Int32, _ to: UnsafePointer<CChar>
  ) -> Result<Int32, Errno> {
    valueOrErrno(.symlink) { Glibc.symlinkat(from, tofd, to) }
  }

  /// `readlink(2)`. As `.readlink`.
  package static func readlink(
    _ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<CChar>, _ len: Int
  ) -> Result<Int, Errno> {
    valueOrErrno(.readlink) { Glibc.readlink(path, buf, len) }
  }

  /// `readlinkat(2)`. As `.readlink`.
  package static func readlinkat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<CChar>, _ len: Int
  ) -> Result<Int, Errno> {
    valueOrErrno(.readlink) { Glibc.readlinkat(dirfd, path, buf, len) }
  }

  /// `utimensat(2)`: `times` as [atime, mtime], nil for now. As `.utimens`.
  package static func utimensat(
    _ dirfd: Int32, _ path: UnsafePointer<CChar>, _ times: UnsafePointer<timespec>?, _ flags: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.utimens) { Glibc.utimensat(dirfd, path, times, flags) }
  }

  /// `listxattr(2)`. As `.getxattr`.
  package static func listxattr(
    _ path: UnsafePointer<CChar>, _ list: UnsafeMutablePointer<CChar>?, _ size: Int
  ) -> Result<Int, Errno> {
    valueOrErrno(.getxattr) { libc_listxattr(path, list, size) }
  }

  /// `removexattr(2)`. As `.removexattr`.
  package static func removexattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>) -> Result<Int32, Errno> {
    valueOrErrno(.removexattr) { libc_removexattr(path, name) }
  }

  /// `chdir(2)`. As `.chdir`.
  package static func chdir(_ path: UnsafePointer<CChar>) -> Result<Int32, Errno> {
    valueOrErrno(.chdir) { Glibc.chdir(path) }
  }

  /// `umount2(2)`. As `.umount`.
  package static func umount2(_ target: UnsafePointer<CChar>, _ flags: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.umount) { Glibc.umount2(target, flags) }
  }

  /// `realpath(3)`: the resolved path (`free` it when `resolved` is nil), or nil and `errno`.
  @discardableResult
  package static func realpath(
    _ path: UnsafePointer<CChar>, _ resolved: UnsafeMutablePointer<CChar>?
  ) -> UnsafeMutablePointer<CChar>? {
    Glibc.realpath(path, resolved)
  }

  /// `fdopendir(3)`: a directory stream that owns `fd`, or nil and `errno`.
  @discardableResult
  package static func fdopendir(_ fd: Int32) -> OpaquePointer? {
    Glibc.fdopendir(fd)
  }

  /// `readdir(3)`: the next entry, or nil at the end (or on an error, with `errno` set).
  @discardableResult
  package static func readdir(_ dirp: OpaquePointer) -> UnsafeMutablePointer<dirent>? {
    Glibc.readdir(dirp)
  }

  /// `closedir(3)`: closes the stream and the descriptor it owns.
  @discardableResult
  package static func closedir(_ dirp: OpaquePointer) -> Int32 {
    Glibc.closedir(dirp)
  }
}

// The C functions whose names a type or a `Kernel` member shadows inside `extension Kernel` (a module
// name does not reach them either).
private func libc_stat(_ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<stat>) -> Int32 { stat(path, buf) }
private func libc_lstat(_ path: UnsafePointer<CChar>, _ buf: UnsafeMutablePointer<stat>) -> Int32 { lstat(path, buf) }
private func libc_listxattr(_ path: UnsafePointer<CChar>, _ list: UnsafeMutablePointer<CChar>?, _ size: Int) -> Int {
  listxattr(path, list, size)
}
private func libc_removexattr(_ path: UnsafePointer<CChar>, _ name: UnsafePointer<CChar>) -> Int32 {
  removexattr(path, name)
}
