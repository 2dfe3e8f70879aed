import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// Applies a target protection state to single items through their permission bits and, when
/// protfs may chown, their owner.
///
/// Per item the order makes every step idempotent, so an interrupted walk can simply run again:
/// restricting writes the `SavedModeRecord` first (create-only, so a record is never overwritten),
/// then chmods, then hands the item to root; restoring gives the owner back first (chown clears
/// set-id bits), then the mode, and removes the record last. Whenever an authentic record exists it
/// holds the original owner and mode, and the item is in one of the states `fits` accepts.
///
/// Every item is changed through one descriptor (`ItemHandle`): the link count and identity checked
/// are those of the inode that is changed. A file with more than one link may also be reachable
/// from outside the device, so it is never changed, only reported.
package struct ModeEnforcer: Sendable {
  /// The state whose table applies.
  package var target: ProtectionState
  /// Whether items the target leaves available get their saved mode looked at (and restored).
  /// A transition that only adds restrictions skips that read.
  package var checksAvailableItems: Bool
  /// The crash test hook.
  package var crash: CrashHook
  /// Where original modes go before an unprivileged owner's item is widened; nil forbids widening.
  package var ownerAccess: OwnerAccessLog?
  /// The secret that authenticates saved-mode records.
  package var key: ModeKey

  /// Whether this process may give items away (root with CAP_CHOWN): then a locked item goes to root.
  package static let canChown: Bool = Kernel.geteuid() == 0 && Kernel.hasEffectiveCapability(0 /* CAP_CHOWN */)

  /// The mode an item whose record held no authentic original gets at unlock: its owner's only.
  package static func safeMode(_ kind: FileKind) -> UInt32 { kind == .directory ? 0o700 : 0o600 }

  /// What the enforcement did, per worker, summed at the end.
  package struct Tally: Sendable {
    /// Items whose bits were removed.
    var restricted = 0
    /// Items whose original mode came back.
    var restored = 0
    /// Items visited.
    var visited = 0
    /// Items that could not be brought into line.
    var failures: [ProtFSError] = []
    /// Files left unchanged because they have more than one link.
    var hardLinked: [String] = []
    /// Items whose saved-mode record protfs did not write; it was ignored.
    var unauthenticated: [String] = []
    /// Items whose class attribute holds garbage: locked as class complete, the strictest.
    var garbageClass: [String] = []

    mutating func add(_ other: Tally) {
      restricted += other.restricted
      restored += other.restored
      visited += other.visited
      failures += other.failures
      hardLinked += other.hardLinked
      unauthenticated += other.unauthenticated
      garbageClass += other.garbageClass
    }
  }

  package func apply(_ entry: WalkEntry, _ tally: inout Tally) {
    tally.visited += 1
    if let error = entry.classError {
      // Garbage is enforced as the walk decided (class complete) and reported; a class that
      // cannot be read stops the transition.
      guard error.code == .corruptAttribute else {
        tally.failures.append(error)
        return
      }
      tally.garbageClass.append(entry.path)
    }
    do {
      if let ownerAccess, !ownerAccess.isEmpty { try repairWidened(entry, ownerAccess) }
      if let cls = entry.protectionClass, target.restricts(entry.kind, cls) {
        if try restrict(entry, &tally) { tally.restricted += 1 }
      } else if checksAvailableItems {
        if try restore(entry, &tally) { tally.restored += 1 }
      }
    } catch {
      tally.failures.append(error)
    }
  }

  /// The mode a restricted item gets: nothing for a file; for a directory no write bits, and when
  /// it was handed to root (`handedOver`) its owner's read and search bits move to the group, so
  /// the original owner (in its own group) can still list and traverse it but neither create in it
  /// nor chmod it.
  package static func restrictedMode(_ original: UInt32, _ kind: FileKind, handedOver: Bool) -> UInt32 {
    SavedModeRecord.restrictedMode(original, isDirectory: kind == .directory, handedOver: handedOver)
  }

  /// Whether an authentic record can be this item's own: the item is exactly as a lock that wrote
  /// the record leaves it after one of its steps. Written, nothing changed yet: the record's owner,
  /// group and mode. Restricted: the record's owner and group, the restricted mode. Handed over:
  /// root, the record's group, the restricted mode.
  ///
  /// Records are not bound to their inode (see `SavedModeRecord`), so this is what keeps a record
  /// copied onto another item from being applied. In the first state the record changes nothing;
  /// in the second the item's attributes can only be written by its owner (the restricted mode has
  /// no write bits), who is the record's owner and could set its mode anyway; in the third only
  /// root can write them.
  package static func fits(_ record: SavedModeRecord, _ status: ItemHandle.Status) -> Bool {
    guard status.gid == record.gid else { return false }
    let handOver = handsOver(originalOwner: record.uid)
    let restricted = restrictedMode(record.mode, status.kind, handedOver: handOver)
    if status.uid == record.uid {
      return status.permissions == record.mode || status.permissions == restricted
    }
    return handOver && status.uid == 0 && status.permissions == restricted
  }

  /// Whether a lock hands an item whose original owner is `uid` to root.
  package static func handsOver(originalOwner uid: UInt32) -> Bool { canChown && uid != 0 }

  /// Takes the access away; returns whether anything changed.
  package func restrict(_ entry: WalkEntry, _ tally: inout Tally) throws(ProtFSError) -> Bool {
    let path = entry.path
    let item: ItemHandle
    do {
      item = try ItemHandle(entry.parent, entry.name)
    } catch  where error.errno == ELOOP {
      return false  // replaced by a symlink meanwhile: never followed, nothing to protect
    }
    let status = try item.status(path: path)
    guard status.kind == entry.kind else { return false }  // replaced meanwhile; the next walk sees it
    if status.kind != .directory, status.links > 1 {
      tally.hardLinked.append(path)
      return false
    }
    let original = try saveOriginal(item, status, path, &tally)
    // The mode first, then the owner: so every state between the steps is one `fits` accepts,
    // and none gives the owner a window with its bits still there once it is no longer the owner.
    var changed = false
    let handOver = Self.handsOver(originalOwner: original.uid)
    let wanted = Self.restrictedMode(original.mode, entry.kind, handedOver: handOver)
    if wanted != status.permissions {
      try Self.chmod(item, path, wanted)
      crash.step()
      changed = true
    }
    if handOver, status.uid != 0 {
      try Self.chown(item, path, uid: 0, gid: status.gid)
      crash.step()
      changed = true
      // The owner may have chmodded it back between the two steps (and a chown may clear set-id
      // bits): now that root owns it, set the restricted mode again if it is not what it was.
      if try item.status(path: path).permissions != wanted {
        try Self.chmod(item, path, wanted)
        crash.step()
      }
    }
    return changed
  }

  /// Saves the mode and owner of `item` in its saved-mode record, unless an authentic record is
  /// there already (restricted before, or interrupted between the steps); returns the original.
  private func saveOriginal(_ item: ItemHandle, _ status: ItemHandle.Status, _ path: String, _ tally: inout Tally)
    throws(ProtFSError) -> SavedModeRecord
  {
    let current = SavedModeRecord(mode: status.permissions, uid: status.uid, gid: status.gid)
    let value = current.encoded(for: status.identity, key: key)
    var result = item.setAttribute(AttributeName.savedMode, value, createOnly: true)
    if case .failure(.accessDenied) = result {
      result = try Self.withOwnerAccess(item, status, path, ownerAccess) {
        item.setAttribute(AttributeName.savedMode, value, createOnly: true)
      }
    }
    switch result {
    case .success:
      crash.step()
      return current
    case .failure(.exists):
      // Restricted before (or interrupted between the steps): an authentic record is the original.
      switch try readRecord(item, status, path) {
      case .authentic(let saved):
        return saved
      case .unauthenticated, .garbage, nil:
        // Not protfs's: the item was never restricted with it, so its current state is the original.
        tally.unauthenticated.append(path)
        try Self.writeAttribute(item, status, path, ownerAccess, value)
        crash.step()
        return current
      }
    case .failure(let e):
      throw ProtFSError.system("save the mode of", path: path, errno: e)
    }
  }

  /// Gives the saved owner and mode back; returns whether there was a record.
  package func restore(_ entry: WalkEntry, _ tally: inout Tally) throws(ProtFSError) -> Bool {
    guard FastAttributes.hasSavedMode(entry.parent, entry.name) else { return false }
    let path = entry.path
    let item: ItemHandle
    do {
      item = try ItemHandle(entry.parent, entry.name)
    } catch  where error.errno == ELOOP || error.errno == ENOENT {
      return false
    }
    let status = try item.status(path: path)
    guard status.kind == entry.kind else { return false }
    // Read again through the descriptor: a value read by name may be another inode's (the name
    // swapped meanwhile), and a record not bound to its inode would verify on this one too.
    let decoded = try readRecord(item, status, path)
    guard let decoded else { return false }
    switch decoded {
    case .authentic(let saved):
      if status.uid != saved.uid || status.gid != saved.gid {
        try Self.chown(item, path, uid: saved.uid, gid: saved.gid)
        crash.step()
      }
      try Self.chmod(item, path, saved.mode)
      crash.step()
    case .unauthenticated, .garbage:
      tally.unauthenticated.append(path)
      // A file that may be linked from outside is never changed; its record stays to be reported.
      if status.kind != .directory, status.links > 1 { return false }
      try Self.chmod(item, path, Self.safeMode(status.kind))
      crash.step()
    }
    var removed = item.removeAttribute(AttributeName.savedMode)
    if case .failure(.accessDenied) = removed {
      removed = try Self.withOwnerAccess(item, try item.status(path: path), path, ownerAccess) {
        item.removeAttribute(AttributeName.savedMode)
      }
    }
    switch removed {
    case .success, .failure(.noData): break
    case .failure(let e): throw ProtFSError.system("remove the saved mode of", path: path, errno: e)
    }
    crash.step()
    return true
  }

  /// The item's record as decoded against its identity, or nil when it has none.
  package func readRecord(_ item: ItemHandle, _ status: ItemHandle.Status, _ path: String) throws(ProtFSError)
    -> SavedModeRecord.Decoded?
  {
    try Self.readRecord(item, status, path, key: key, ownerAccess)
  }

  /// The item's record as decoded against its identity, or nil when it has none. A record whose
  /// MAC verifies but that does not `fit` the item as it is now is not authentic for it.
  package static func readRecord(
    _ item: ItemHandle, _ status: ItemHandle.Status, _ path: String, key: ModeKey?, _ ownerAccess: OwnerAccessLog?
  ) throws(ProtFSError) -> SavedModeRecord.Decoded? {
    func read() -> Result<[UInt8]?, Errno> {
      withUnsafeTemporaryAllocation(byteCount: SavedModeRecord.maximumLength, alignment: 1) { buffer in
        switch item.attribute(AttributeName.savedMode, into: buffer) {
        case .success(let count): return .success(Array(buffer[..<count]))
        case .failure(.noData): return .success(nil)
        case .failure(.range): return .success([])  // longer than any record: garbage
        case .failure(let e): return .failure(e)
        }
      }
    }
    var result = read()
    if case .failure(.accessDenied) = result {
      result = try withOwnerAccess(item, status, path, ownerAccess) { read() }
    }
    guard let bytes = try result.orThrow("read the saved mode of", path: path) else { return nil }
    let decoded = SavedModeRecord.decode(bytes, identity: status.identity, key: key)
    if case .authentic(let record) = decoded, !fits(record, status) {
      return .unauthenticated(claimed: record, legacy: false)
    }
    return decoded
  }

  /// Replaces the record (one protfs did not write) with `value`.
  private static func writeAttribute(
    _ item: ItemHandle, _ status: ItemHandle.Status, _ path: String, _ ownerAccess: OwnerAccessLog?, _ value: [UInt8]
  ) throws(ProtFSError) {
    var result = item.setAttribute(AttributeName.savedMode, value, createOnly: false)
    if case .failure(.accessDenied) = result {
      result = try withOwnerAccess(item, status, path, ownerAccess) {
        item.setAttribute(AttributeName.savedMode, value, createOnly: false)
      }
    }
    _ = try result.orThrow("save the mode of", path: path)
  }

  /// chmod of a held item, with a message that says whose file it is on EPERM.
  package static func chmod(_ item: ItemHandle, _ path: String, _ mode: UInt32) throws(ProtFSError) {
    switch item.setPermissions(mode) {
    case .success: return
    case .failure(.notPermitted):
      let owner = (try? item.status(path: path).uid).map { "uid \($0)" } ?? "another user"
      throw ProtFSError(
        .permissionDenied,
        "Cannot change the mode of '\(path)': it belongs to \(owner), and protfs runs as uid \(Kernel.geteuid()).",
        path: path, errno: EPERM, remedy: .runAsRoot(orChown: true))
    case .failure(let e):
      throw ProtFSError.system("change the mode of", path: path, errno: e)
    }
  }

  /// chown of a held item.
  package static func chown(_ item: ItemHandle, _ path: String, uid: UInt32, gid: UInt32) throws(ProtFSError) {
    switch item.setOwner(uid: uid, gid: gid) {
    case .success: return
    case .failure(.notPermitted):
      throw ProtFSError(
        .permissionDenied,
        "Cannot give '\(path)' to uid \(uid), gid \(gid): protfs runs as uid \(Kernel.geteuid()) without the right to chown.",
        path: path, errno: EPERM, remedy: .runAsRoot(orChown: false))
    case .failure(let e):
      throw ProtFSError.system("change the owner of", path: path, errno: e)
    }
  }

  /// Runs `body` with owner read and write bits added to the held item, then puts its mode back
  /// (see the named `withOwnerAccess`).
  package static func withOwnerAccess<T>(
    _ item: ItemHandle, _ status: ItemHandle.Status, _ path: String, _ log: OwnerAccessLog?,
    _ body: () throws(ProtFSError) -> T
  ) throws(ProtFSError) -> T {
    guard status.uid == Kernel.geteuid() else {
      throw ProtFSError(
        .permissionDenied,
        "Cannot reach the attributes of '\(path)': Permission denied (it belongs to uid \(status.uid), and protfs runs as uid \(Kernel.geteuid())).",
        path: path, errno: EACCES, remedy: .runAsRoot(orChown: true))
    }
    let mode = status.permissions
    guard let log else {
      throw ProtFSError(
        .permissionDenied,
        "Cannot read the attributes of '\(path)': its mode \(FilePermissions(rawValue: mode).octal) forbids it, and protfs (uid \(Kernel.geteuid())) widens modes only during a transition.",
        path: path, errno: EACCES, remedy: .runAsRoot(orChown: false))
    }
    var s = stat()
    _ = try Kernel.fstat(item.fd, &s).orThrow("inspect", path: path)
    let id = OwnerAccessLog.FileID(device: UInt64(s.st_dev), inode: UInt64(s.st_ino))
    try log.record(id, mode: mode)
    try chmod(item, path, mode | (status.kind == .directory ? 0o700 : 0o600))
    log.widened()
    defer {
      if case .success = item.setPermissions(mode) {
        // Should this record fail, the log still goes away when the transition commits.
        try? log.finished(id)
      }
    }
    return try body()
  }

  /// chmod of `name` in `parent`, through a descriptor that follows no symlink.
  package static func chmod(_ parent: DirectoryHandle, _ name: FileName, _ mode: UInt32) throws(ProtFSError) {
    try chmod(ItemHandle(parent, name), parent.pathOf(name), mode)
  }

  /// Runs `body` with owner read and write bits added to `name`, then puts its mode back.
  ///
  /// Only an unprivileged owner needs this: the kernel checks `user.*` attribute access against
  /// the permission bits, and a locked file has none. The original mode is logged first, so a
  /// crash while widened loses nothing; without a log (outside a transition) nothing is widened.
  package static func withOwnerAccess<T>(
    _ parent: DirectoryHandle, _ name: FileName, _ log: OwnerAccessLog?, _ body: () throws(ProtFSError) -> T
  ) throws(ProtFSError) -> T {
    let path = parent.pathOf(name)
    let item = try ItemHandle(parent, name)
    return try withOwnerAccess(item, try item.status(path: path), path, log, body)
  }

  /// After a crash while an item was widened: puts back the mode it had before the widening.
  package func repairWidened(_ entry: WalkEntry, _ log: OwnerAccessLog) throws(ProtFSError) {
    let status = try entry.parent.status(entry.name)
    guard let original = log.original(.init(device: status.device, inode: status.inode)),
      original != status.permissions.rawValue
    else { return }
    // Always back to the mode before the widening, record or not: a record is applied only to an
    // item in a state a lock leaves (`fits`), and a widened mode is none of them.
    try Self.chmod(entry.parent, entry.name, original)
    crash.step()
  }
}
