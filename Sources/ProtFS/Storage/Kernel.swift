import CAttr
import CProtFSSys
import Foundation

/// The kernel's relative, no-follow calls, with their fallbacks detected once.
///
/// `getxattrat`/`setxattrat`/`removexattrat` arrived in Linux 6.13 and `fchmodat2` in 6.6; on older
/// kernels the `l*xattr` family on `/proc/self/fd/N/name` and `fchmodat` (which refuses symlinks by
/// checking first) stand in.
enum Kernel {
  /// Whether the running kernel has the `*xattrat` syscalls.
  static let hasXattrAt: Bool = {
    var byte: UInt8 = 0
    let result = protfs_getxattrat(AT_FDCWD, "/", UInt32(AT_SYMLINK_NOFOLLOW), "user.protfs.probe", &byte, 1)
    return !(result == -1 && errno == ENOSYS)
  }()

  /// Whether the running kernel has `fchmodat2`.
  static let hasFchmodat2: Bool = {
    let result = protfs_fchmodat2(AT_FDCWD, "/nonexistent-protfs-probe", 0, UInt32(AT_SYMLINK_NOFOLLOW))
    return !(result == -1 && errno == ENOSYS)
  }()

  private static func procPath(_ dirfd: Int32, _ name: String?) -> String {
    name.map { "/proc/self/fd/\(dirfd)/\($0)" } ?? "/proc/self/fd/\(dirfd)"
  }

  /// Reads `attribute` of `name` in `dirfd` (of `dirfd` itself when nil) into `buffer`, never
  /// following a symlink; the value's size.
  static func getAttribute(dirfd: Int32, name: String?, attribute: String, into buffer: UnsafeMutableRawBufferPointer)
    -> Result<Int, Errno>
  {
    attribute.withCString { attribute in
      guard let name else { return getAttribute(dirfd: dirfd, rawName: nil, attribute: attribute, into: buffer) }
      return name.withCString { getAttribute(dirfd: dirfd, rawName: $0, attribute: attribute, into: buffer) }
    }
  }

  /// As `getAttribute(dirfd:name:attribute:into:)` with C strings, for walks that hold a `dirent`'s
  /// name and must not build a `String` per item.
  static func getAttribute(
    dirfd: Int32, rawName name: UnsafePointer<CChar>?, attribute: UnsafePointer<CChar>,
    into buffer: UnsafeMutableRawBufferPointer
  ) -> Result<Int, Errno> {
    guard let name else {
      return valueOrErrno { fgetxattr(dirfd, attribute, buffer.baseAddress, buffer.count) }.map { Int($0) }
    }
    if hasXattrAt {
      return valueOrErrno {
        protfs_getxattrat(dirfd, name, UInt32(AT_SYMLINK_NOFOLLOW), attribute, buffer.baseAddress, buffer.count)
      }.map { Int($0) }
    }
    let proc = "/proc/self/fd/\(dirfd)/" + String(cString: name)
    return valueOrErrno { lgetxattr(proc, attribute, buffer.baseAddress, buffer.count) }.map { Int($0) }
  }

  static func setAttribute(dirfd: Int32, name: String?, attribute: String, value: UnsafeRawBufferPointer)
    -> Result<Void, Errno>
  {
    if let name, hasXattrAt {
      return valueOrErrno {
        protfs_setxattrat(dirfd, name, UInt32(AT_SYMLINK_NOFOLLOW), attribute, value.baseAddress, value.count, 0)
      }.map { _ in () }
    }
    if name == nil {
      return valueOrErrno { fsetxattr(dirfd, attribute, value.baseAddress, value.count, 0) }.map { _ in () }
    }
    return valueOrErrno { lsetxattr(procPath(dirfd, name), attribute, value.baseAddress, value.count, 0) }.map {
      _ in ()
    }
  }

  static func removeAttribute(dirfd: Int32, name: String?, attribute: String) -> Result<Void, Errno> {
    if let name, hasXattrAt {
      return valueOrErrno { protfs_removexattrat(dirfd, name, UInt32(AT_SYMLINK_NOFOLLOW), attribute) }.map { _ in () }
    }
    if name == nil { return valueOrErrno { fremovexattr(dirfd, attribute) }.map { _ in () } }
    return valueOrErrno { lremovexattr(procPath(dirfd, name), attribute) }.map { _ in () }
  }

  static func setPermissions(dirfd: Int32, name: String, mode: mode_t) -> Result<Void, Errno> {
    if hasFchmodat2 {
      return valueOrErrno { protfs_fchmodat2(dirfd, name, mode, UInt32(AT_SYMLINK_NOFOLLOW)) }.map { _ in () }
    }
    var s = stat()
    if case .failure(let e) = valueOrErrno({ fstatat(dirfd, name, &s, AT_SYMLINK_NOFOLLOW) }) { return .failure(e) }
    if s.st_mode & S_IFMT == S_IFLNK { return .failure(.tooManySymlinks) }
    return valueOrErrno { fchmodat(dirfd, name, mode, 0) }.map { _ in () }
  }
}
