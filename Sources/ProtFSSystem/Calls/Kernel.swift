import CAttr
import CProtFSSys
import Foundation

/// The kernel's relative, no-follow calls, with their fallbacks detected once.
///
/// `getxattrat`/`setxattrat`/`removexattrat` arrived in Linux 6.13 and `fchmodat2` in 6.6; on older
/// kernels the `l*xattr` family on `/proc/self/fd/N/name` and `fchmodat` (which refuses symlinks by
/// checking first) stand in.
package enum Kernel {
  /// Whether the running kernel has the `*xattrat` syscalls.
  package static let hasXattrAt: Bool = {
    var byte: UInt8 = 0
    let result = protfs_getxattrat(AT_FDCWD, "/", UInt32(AT_SYMLINK_NOFOLLOW), "user.protfs.probe", &byte, 1)
    return !(result == -1 && errno == ENOSYS)
  }()

  /// Whether the running kernel has `fchmodat2`.
  package static let hasFchmodat2: Bool = {
    let result = protfs_fchmodat2(AT_FDCWD, "/nonexistent-protfs-probe", 0, UInt32(AT_SYMLINK_NOFOLLOW))
    return !(result == -1 && errno == ENOSYS)
  }()

  /// Whether the running kernel has `openat2` (Linux 5.6) and lets this process call it (a
  /// seccomp filter may answer EPERM), which resolves a path beneath a directory without
  /// following a symlink; `openBeneath` walks the path itself without it.
  package static let hasOpenat2: Bool = {
    let fd = protfs_openat2(AT_FDCWD, "/", PROTFS_O_PATH | O_CLOEXEC, 0)
    if fd >= 0 {
      close(fd)
      return true
    }
    return ![ENOSYS, EPERM, E2BIG].contains(errno)
  }()

  /// `/proc/self/fd/<dirfd>/<name>` (or without the name), NUL-terminated: the name's bytes go in
  /// as they are, UTF-8 or not.
  private static func procPath(_ dirfd: Int32, _ name: FileName?) -> [CChar] {
    var bytes = Array("/proc/self/fd/\(dirfd)".utf8)
    if let name { bytes += [UInt8(ascii: "/")] + name.bytes }
    return bytes.map { CChar(bitPattern: $0) } + [0]
  }

  /// What an attribute call acts on.
  package enum AttributeTarget {
    /// The entry `name` of the directory `dirfd`, not following a symlink: `*xattrat`, else the
    /// `l*xattr` calls on `/proc/self/fd/<dirfd>/<name>`.
    case entry(dirfd: Int32, name: FileName)
    /// The inode `fd` holds: the `f*xattr` calls, or, for an `O_PATH` descriptor (which they
    /// refuse with EBADF), the `*xattr` calls on `/proc/self/fd/<fd>`, whose magic link leads to it.
    case descriptor(Int32, pathOnly: Bool)

    /// The entry `name` of `dirfd`, or `dirfd` itself when `name` is nil.
    init(dirfd: Int32, name: String?) { self.init(dirfd: dirfd, name: name.map(FileName.init)) }

    /// The entry `name` of `dirfd` (which may not be UTF-8), or `dirfd` itself when `name` is nil.
    init(dirfd: Int32, name: FileName?) {
      self = name.map { .entry(dirfd: dirfd, name: $0) } ?? .descriptor(dirfd, pathOnly: false)
    }
  }

  /// Reads `attribute` of `target` into `buffer`; returns its length.
  package static func getAttribute(
    _ target: AttributeTarget, attribute: String, into buffer: UnsafeMutableRawBufferPointer
  )
    -> Result<Int, Errno>
  {
    let (base, count) = (buffer.baseAddress, buffer.count)
    switch target {
    case .entry(let dirfd, let name):
      return attribute.withCString { getAttribute(dirfd: dirfd, rawName: name.cString, attribute: $0, into: buffer) }
    case .descriptor(let fd, pathOnly: false):
      return valueOrErrno(.getxattr) { fgetxattr(fd, attribute, base, count) }.map { Int($0) }
    case .descriptor(let fd, pathOnly: true):
      return valueOrErrno(.getxattr) { getxattr(procPath(fd, nil), attribute, base, count) }.map { Int($0) }
    }
  }

  /// Reads `attribute` of the entry `name` of `dirfd` (of `dirfd` itself when nil) with C strings,
  /// never following a symlink: for walks that hold a `dirent`'s name and must not build a `String`
  /// per item. `*xattrat` where the kernel has it, else `lgetxattr` on `/proc/self/fd/<dirfd>/<name>`.
  package static func getAttribute(
    dirfd: Int32, rawName name: UnsafePointer<CChar>?, attribute: UnsafePointer<CChar>,
    into buffer: UnsafeMutableRawBufferPointer
  ) -> Result<Int, Errno> {
    let (base, count) = (buffer.baseAddress, buffer.count)
    guard let name else { return valueOrErrno(.getxattr) { fgetxattr(dirfd, attribute, base, count) }.map { Int($0) } }
    if hasXattrAt {
      return valueOrErrno(.getxattr) {
        protfs_getxattrat(dirfd, name, UInt32(AT_SYMLINK_NOFOLLOW), attribute, base, count)
      }.map { Int($0) }
    }
    let proc = procPath(dirfd, FileName(cString: name))
    return valueOrErrno(.getxattr) { lgetxattr(proc, attribute, base, count) }.map { Int($0) }
  }

  /// Reads `attribute` of the inode `fd` holds, which may be an `O_PATH` descriptor, with nothing
  /// allocated on the heap: for the FUSE daemon, which asks this on every open and attribute
  /// request. `fgetxattr(2)`, which takes any other descriptor on every kernel; for an `O_PATH`
  /// one, which it (and `getxattrat(2)` with `AT_EMPTY_PATH`) refuses with EBADF, `getxattr(2)`
  /// on the descriptor's `/proc/self/fd` magic link, built in a stack buffer. `pathOnly` goes
  /// there at once, saving the refused call when the caller may hold an `O_PATH` descriptor.
  package static func getAttribute(
    ofDescriptor fd: Int32, attribute: UnsafePointer<CChar>, into buffer: UnsafeMutableRawBufferPointer,
    pathOnly: Bool = false
  ) -> Result<Int, Errno> {
    let (base, count) = (buffer.baseAddress, buffer.count)
    if !pathOnly {
      switch valueOrErrno(.getxattr, { fgetxattr(fd, attribute, base, count) }) {
      case .success(let length): return .success(length)
      case .failure(let e) where e.rawValue != EBADF: return .failure(e)
      case .failure: break
      }
    }
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { path in
      protfs_fd_path(fd, path.baseAddress!)
      return valueOrErrno(.getxattr) { getxattr(path.baseAddress!, attribute, base, count) }
    }
  }

  /// Writes `attribute` of `target`; `flags` as setxattr(2)'s (`XATTR_CREATE`, `XATTR_REPLACE`).
  package static func setAttribute(
    _ target: AttributeTarget, attribute: String, value: UnsafeRawBufferPointer, flags: Int32 = 0
  ) -> Result<Void, Errno> {
    let (base, count) = (value.baseAddress, value.count)
    switch target {
    case .entry(let dirfd, let name) where hasXattrAt:
      let cName = name.cString
      return valueOrErrno(.setxattr) {
        protfs_setxattrat(dirfd, cName, UInt32(AT_SYMLINK_NOFOLLOW), attribute, base, count, UInt32(flags))
      }.map { _ in () }
    case .entry(let dirfd, let name):
      return valueOrErrno(.setxattr) { lsetxattr(procPath(dirfd, name), attribute, base, count, flags) }.map { _ in
        ()
      }
    case .descriptor(let fd, pathOnly: false):
      return valueOrErrno(.setxattr) { fsetxattr(fd, attribute, base, count, flags) }.map { _ in () }
    case .descriptor(let fd, pathOnly: true):
      return valueOrErrno(.setxattr) { setxattr(procPath(fd, nil), attribute, base, count, flags) }.map { _ in () }
    }
  }

  /// Removes `attribute` of `target`.
  package static func removeAttribute(_ target: AttributeTarget, attribute: String) -> Result<Void, Errno> {
    switch target {
    case .entry(let dirfd, let name) where hasXattrAt:
      let cName = name.cString
      return valueOrErrno(.removexattr) { protfs_removexattrat(dirfd, cName, UInt32(AT_SYMLINK_NOFOLLOW), attribute) }
        .map { _ in () }
    case .entry(let dirfd, let name):
      return valueOrErrno(.removexattr) { lremovexattr(procPath(dirfd, name), attribute) }.map { _ in () }
    case .descriptor(let fd, pathOnly: false):
      return valueOrErrno(.removexattr) { fremovexattr(fd, attribute) }.map { _ in () }
    case .descriptor(let fd, pathOnly: true):
      return removexattr(procPath(fd, nil), attribute).map { _ in () }
    }
  }

  /// Reads `attribute` of the entry `name` of `dirfd` (of `dirfd` itself when nil).
  package static func getAttribute(
    dirfd: Int32, name: String?, attribute: String, into buffer: UnsafeMutableRawBufferPointer
  )
    -> Result<Int, Errno>
  {
    getAttribute(AttributeTarget(dirfd: dirfd, name: name), attribute: attribute, into: buffer)
  }

  /// Writes `attribute` of the entry `name` of `dirfd` (of `dirfd` itself when nil).
  package static func setAttribute(dirfd: Int32, name: String?, attribute: String, value: UnsafeRawBufferPointer)
    -> Result<Void, Errno>
  {
    setAttribute(AttributeTarget(dirfd: dirfd, name: name), attribute: attribute, value: value)
  }

  /// Removes `attribute` of the entry `name` of `dirfd` (of `dirfd` itself when nil).
  package static func removeAttribute(dirfd: Int32, name: String?, attribute: String) -> Result<Void, Errno> {
    removeAttribute(AttributeTarget(dirfd: dirfd, name: name), attribute: attribute)
  }

  package static func setPermissions(dirfd: Int32, name: String, mode: mode_t) -> Result<Void, Errno> {
    if hasFchmodat2 {
      return valueOrErrno(.chmod) { protfs_fchmodat2(dirfd, name, mode, UInt32(AT_SYMLINK_NOFOLLOW)) }.map { _ in () }
    }
    var s = SwiftGlibc.stat()
    if case .failure(let e) = fstatat(dirfd, name, &s, AT_SYMLINK_NOFOLLOW) {
      return .failure(e)
    }
    if s.st_mode & S_IFMT == S_IFLNK { return .failure(.tooManySymlinks) }
    return fchmodat(dirfd, name, mode, 0).map { _ in () }
  }
}
