import Foundation
import ProtFSSystem

extension AppUser {
  /// What this user may do with a file, judged as root cannot ask the kernel (`access(2)` and
  /// `faccessat(2)`'s `AT_EACCESS` answer for root): by the file's owner, group and permission
  /// bits, with no supplementary group (the app user holds none). ACLs are not read.
  public struct Permission: OptionSet, Sendable {
    /// The permission bits.
    public let rawValue: mode_t
    /// Creates a permission from its bits (`0o4` read, `0o2` write, `0o1` search or execute).
    public init(rawValue: mode_t) { self.rawValue = rawValue }
    /// Read.
    public static let read = Permission(rawValue: 0o4)
    /// Write.
    public static let write = Permission(rawValue: 0o2)
    /// Search (a directory) or execute (a file).
    public static let execute = Permission(rawValue: 0o1)
  }

  /// Whether this user has `permission` on a file of owner `owner`, group `group` and `mode`: the
  /// owner's bits when it owns the file, else the group's when the file is its group's, else the
  /// others' (as the kernel chooses them).
  public func has(_ permission: Permission, owner: uid_t, group: gid_t, mode: mode_t) -> Bool {
    let bits: mode_t
    if uid == 0 {
      // Root: everything but executing a file no one may execute.
      return !permission.contains(.execute) || mode & S_IFMT == S_IFDIR || mode & 0o111 != 0
    } else if owner == uid {
      bits = (mode >> 6) & 0o7
    } else if group == gid {
      bits = (mode >> 3) & 0o7
    } else {
      bits = mode & 0o7
    }
    return bits & permission.rawValue == permission.rawValue
  }

  /// Whether this user has `permission` on the file at `path` (followed when a symbolic link);
  /// false when it cannot be examined.
  public func has(_ permission: Permission, at path: String) -> Bool {
    var status = stat()
    guard case .success = Kernel.stat(path, &status) else { return false }
    return has(permission, owner: status.st_uid, group: status.st_gid, mode: status.st_mode)
  }

  /// The first directory on the way to `path` (from `/`, each component as it is written,
  /// symbolic links followed as the kernel follows them) this user cannot search, or nil when it
  /// can search every one there is; `path` itself is included when `includingLast` (a directory
  /// the user must enter). A component that does not exist ends the walk: nil.
  public func firstClosedDirectory(to path: String, includingLast: Bool = false) -> String? {
    let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    let components = absolute.split(separator: "/").map(String.init)
    var directory = "/"
    for (index, component) in ([""] + components).enumerated() {
      if index > 0 { directory = (directory == "/" ? "" : directory) + "/" + component }
      if index == components.count && !includingLast { break }
      var status = stat()
      guard case .success = Kernel.stat(directory, &status) else { return nil }
      guard status.st_mode & S_IFMT == S_IFDIR else { return nil }
      if !has(.execute, owner: status.st_uid, group: status.st_gid, mode: status.st_mode) { return directory }
    }
    return nil
  }
}
