import CProtFSSys
import Foundation
import Synchronization

/// Counts the mutations of a transition and, when asked, kills the process right after one of
/// them: the crash tests choose the step with `PROTFS_CRASH_AFTER=N`.
public final class CrashHook: Sendable {
  /// The step after which to die, or nil to never crash.
  public let after: Int?
  private let counter = Atomic<Int>(0)

  /// A hook that kills the process with SIGKILL right after mutation number `after` (1-based).
  public init(after: Int?) { self.after = after }

  /// A hook that never fires.
  public static let none = CrashHook(after: nil)

  /// How many mutations were made so far.
  public var steps: Int { counter.load(ordering: .relaxed) }

  /// Records one mutation; dies when it is the chosen one.
  func step() {
    let count = counter.add(1, ordering: .relaxed).newValue
    if let after, count == after { protfs_crash_now() }
  }
}

/// Applies a target protection state to single items through their permission bits (SPEC §4).
///
/// Per item the order makes every step idempotent, so an interrupted walk can simply run again:
/// restricting writes `user.protfs.saved-mode` first (create-only, so a saved mode is never
/// overwritten) and chmods second; restoring chmods back first and removes the attribute second.
/// Whenever the attribute exists it holds the original mode.
struct ModeEnforcer: Sendable {
  /// The state whose table applies.
  var target: ProtectionState
  /// Whether items the target leaves available get their saved mode looked at (and restored).
  /// A transition that only adds restrictions skips that read.
  var checksAvailableItems: Bool
  /// The crash test hook.
  var crash: CrashHook
  /// Where original modes go before an unprivileged owner's item is widened; nil forbids widening.
  var ownerAccess: OwnerAccessLog?

  /// What the enforcement did, per worker, summed at the end.
  struct Tally: Sendable {
    /// Items whose bits were removed.
    var restricted = 0
    /// Items whose original mode came back.
    var restored = 0
    /// Items visited.
    var visited = 0
    /// Items that could not be brought into line.
    var failures: [ProtFSError] = []

    mutating func add(_ other: Tally) {
      restricted += other.restricted
      restored += other.restored
      visited += other.visited
      failures += other.failures
    }
  }

  func apply(_ entry: WalkEntry, _ tally: inout Tally) {
    tally.visited += 1
    if let error = entry.classError {
      tally.failures.append(error)
      return
    }
    do {
      if let ownerAccess, !ownerAccess.isEmpty { try repairWidened(entry, ownerAccess) }
      if let cls = entry.protectionClass, target.restricts(entry.kind, cls) {
        if try restrict(entry) { tally.restricted += 1 }
      } else if checksAvailableItems {
        if try restore(entry) { tally.restored += 1 }
      }
    } catch {
      tally.failures.append(error)
    }
  }

  /// The mode a restricted item gets: nothing for a file, no write bits for a directory.
  static func restrictedMode(_ original: UInt32, _ kind: FileKind) -> UInt32 {
    kind == .directory ? original & ~0o222 : 0
  }

  /// Removes the bits; returns whether anything changed.
  func restrict(_ entry: WalkEntry) throws(ProtFSError) -> Bool {
    let (parent, name) = (entry.parent, entry.name)
    guard let status = FastAttributes.mode(parent, name) else {
      _ = try parent.status(name)  // throws the error that made the fast path fail
      return false
    }
    guard status.kind == entry.kind else { return false }  // replaced meanwhile; the next walk sees it
    let mode = status.permissions
    let wanted = Self.restrictedMode(mode, entry.kind)
    var result = Self.setSavedMode(parent, name, mode)
    if case .failure(.accessDenied) = result {
      result = try Self.withOwnerAccess(parent, name, ownerAccess) { Self.setSavedMode(parent, name, mode) }
    }
    switch result {
    case .success:
      crash.step()
      guard wanted != mode else { return false }
      try Self.chmod(parent, name, wanted)
      crash.step()
      return true
    case .failure(.exists):
      // Restricted before (or interrupted between the two steps): the saved mode is the original.
      let original = try Self.savedMode(parent, name, ownerAccess) ?? mode
      let again = Self.restrictedMode(original, entry.kind)
      guard again != mode else { return false }
      try Self.chmod(parent, name, again)
      crash.step()
      return true
    case .failure(let e):
      throw ProtFSError.system("save the mode of", path: parent.pathOf(name), errno: e.rawValue)
    }
  }

  /// Puts the saved mode back; returns whether there was one.
  func restore(_ entry: WalkEntry) throws(ProtFSError) -> Bool {
    let (parent, name) = (entry.parent, entry.name)
    let original: UInt32
    switch FastAttributes.savedMode(parent, name) {
    case .absent: return false
    case .value(let mode): original = mode
    case .unusual:
      guard let mode = try Self.savedMode(parent, name, ownerAccess) else { return false }
      original = mode
    }
    try Self.chmod(parent, name, original)
    crash.step()
    switch Kernel.removeAttribute(dirfd: parent.fd, name: name, attribute: AttributeName.savedMode) {
    case .success, .failure(.noData): break
    case .failure(.accessDenied):
      try Self.withOwnerAccess(parent, name, ownerAccess) { () throws(ProtFSError) in
        try parent.removeAttribute(AttributeName.savedMode, of: name)
      }
    case .failure(let e):
      throw ProtFSError.system("remove the saved mode of", path: parent.pathOf(name), errno: e.rawValue)
    }
    crash.step()
    return true
  }

  /// The mode kept in `user.protfs.saved-mode`, or nil; garbage there is an error, never a guess.
  static func savedMode(_ parent: DirectoryHandle, _ name: String, _ ownerAccess: OwnerAccessLog?)
    throws(ProtFSError) -> UInt32?
  {
    var result = parent.attributeResult(AttributeName.savedMode, of: name)
    if case .failure(.accessDenied) = result {
      result = try withOwnerAccess(parent, name, ownerAccess) {
        parent.attributeResult(AttributeName.savedMode, of: name)
      }
    }
    guard let bytes = try result.orThrow("read the saved mode of", path: parent.pathOf(name)) else { return nil }
    guard let mode = parseMode(bytes) else {
      let path = parent.pathOf(name)
      let shown = String(decoding: bytes.prefix(32), as: UTF8.self).debugDescription
      throw ProtFSError(
        .corruptAttribute, "The attribute \(AttributeName.savedMode) of '\(path)' holds \(shown), which is not a mode.",
        path: path,
        hint: "chmod the item to the mode it should have, then run `setfattr -x \(AttributeName.savedMode) '\(path)'`")
    }
    return mode
  }

  /// Octal ASCII such as `0644`, at most `07777`.
  static func parseMode(_ bytes: [UInt8]) -> UInt32? {
    guard !bytes.isEmpty, bytes.count <= 6, bytes.allSatisfy({ (0x30...0x37).contains($0) }) else { return nil }
    guard let value = UInt32(String(decoding: bytes, as: UTF8.self), radix: 8), value <= 0o7777 else { return nil }
    return value
  }

  /// Writes the saved mode only when there is none yet (XATTR_CREATE), so an original is never replaced.
  static func setSavedMode(_ parent: DirectoryHandle, _ name: String, _ mode: UInt32) -> Result<Void, Errno> {
    let xattrCreate: UInt32 = 1  // XATTR_CREATE
    // "0" and up to four octal digits, written on the stack: this runs once per locked item.
    return withUnsafeTemporaryAllocation(byteCount: 6, alignment: 1) { buffer in
      var digits = 0
      var rest = mode
      repeat {
        digits += 1
        rest >>= 3
      } while rest != 0
      buffer[0] = 0x30
      rest = mode
      for index in stride(from: digits, through: 1, by: -1) {
        buffer[index] = 0x30 + UInt8(rest & 7)
        rest >>= 3
      }
      let raw = UnsafeRawBufferPointer(rebasing: buffer[0...digits])
      if Kernel.hasXattrAt {
        return valueOrErrno {
          protfs_setxattrat(
            parent.fd, name, UInt32(AT_SYMLINK_NOFOLLOW), AttributeName.savedMode, raw.baseAddress, raw.count,
            xattrCreate)
        }.map { _ in () }
      }
      return valueOrErrno {
        lsetxattr(
          "/proc/self/fd/\(parent.fd)/\(name)", AttributeName.savedMode, raw.baseAddress, raw.count, Int32(xattrCreate))
      }.map { _ in () }
    }
  }

  /// chmod without following a symlink, with a message that says whose file it is on EPERM.
  static func chmod(_ parent: DirectoryHandle, _ name: String, _ mode: UInt32) throws(ProtFSError) {
    switch Kernel.setPermissions(dirfd: parent.fd, name: name, mode: mode_t(mode)) {
    case .success: return
    case .failure(.notPermitted):
      let path = parent.pathOf(name)
      let owner = (try? parent.status(name).uid).map { "uid \($0)" } ?? "another user"
      throw ProtFSError(
        .permissionDenied,
        "Cannot change the mode of '\(path)': it belongs to \(owner), and protfs runs as uid \(geteuid()).",
        path: path, errno: EPERM, hint: "run protfs as root, or give the file to the device's owner with chown")
    case .failure(let e):
      throw ProtFSError.system("change the mode of", path: parent.pathOf(name), errno: e.rawValue)
    }
  }

  /// Runs `body` with owner read and write bits added to `name`, then puts its mode back.
  ///
  /// Only an unprivileged owner needs this: the kernel checks `user.*` attribute access against
  /// the permission bits, and a locked file has none. The original mode is logged first, so a
  /// crash while widened loses nothing; without a log (outside a transition) nothing is widened.
  static func withOwnerAccess<T>(
    _ parent: DirectoryHandle, _ name: String, _ log: OwnerAccessLog?, _ body: () throws(ProtFSError) -> T
  ) throws(ProtFSError) -> T {
    let status = try parent.status(name)
    let path = parent.pathOf(name)
    guard status.uid == geteuid() else {
      throw ProtFSError(
        .permissionDenied,
        "Cannot reach the attributes of '\(path)': Permission denied (it belongs to uid \(status.uid), and protfs runs as uid \(geteuid())).",
        path: path, errno: EACCES, hint: "run protfs as root, or give the item to the device's owner with chown")
    }
    let mode = status.permissions.rawValue
    guard let log else {
      throw ProtFSError(
        .permissionDenied,
        "Cannot read the attributes of '\(path)': its mode \(status.permissions.octal) forbids it, and protfs (uid \(geteuid())) widens modes only during a transition.",
        path: path, errno: EACCES, hint: "run protfs as root")
    }
    let id = OwnerAccessLog.FileID(device: status.device, inode: status.inode)
    try log.record(id, mode: mode)
    try chmod(parent, name, mode | (status.kind == .directory ? 0o700 : 0o600))
    log.widened()
    defer {
      if case .success = Kernel.setPermissions(dirfd: parent.fd, name: name, mode: mode_t(mode)) {
        // Should this record fail, the log still goes away when the transition commits.
        try? log.finished(id)
      }
    }
    return try body()
  }

  /// After a crash while an item was widened: puts the logged original back when no saved mode
  /// holds it (with a saved mode present, the saved mode is the original and the walk applies it).
  func repairWidened(_ entry: WalkEntry, _ log: OwnerAccessLog) throws(ProtFSError) {
    let status = try entry.parent.status(entry.name)
    guard let original = log.original(.init(device: status.device, inode: status.inode)),
      original != status.permissions.rawValue
    else { return }
    if case .absent = FastAttributes.savedMode(entry.parent, entry.name) {
      try Self.chmod(entry.parent, entry.name, original)
      crash.step()
    }
  }
}
