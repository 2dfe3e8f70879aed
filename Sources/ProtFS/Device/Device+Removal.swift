import Foundation
import ProtFSSystem

/// Removing what `app uninstall` and `erase` remove, so that a kill at any moment leaves nothing
/// half there: each item is first renamed into the state directory's trash (`.protfs/trash/`),
/// one atomic step, and only then removed there; an erase also keeps a marker in the trash until
/// everything it erases has been moved. The next protfs command finishes what a kill left
/// (`finishInterruptedRemoval`). Everything is reached through descriptors opened without
/// following a symlink, and removed with `removeTree`, which unlinks a symlink and never what it
/// points to.
extension Device {
  /// The trash, below `.protfs/`.
  package static let trashDirectoryName = "trash"
  /// In the trash while an erase has not moved everything it erases.
  package static let eraseMarkerName = "erasing"
  /// What an erase keeps in `.protfs/`: the device's marker, the lock file the commands serialise
  /// on, and the trash itself.
  static let keptByErase: Set<String> = [markerName, stateLockName, trashDirectoryName]

  /// Removes the item at `path` (a directory with everything below it): renamed into the trash,
  /// then removed there. False when there is nothing at `path`.
  @discardableResult
  public func removeItem(_ path: DevicePath) throws(ProtFSError) -> Bool {
    guard let name = try textName(of: path) else {
      throw ProtFSError(.invalidArgument, "Cannot remove the device's root '\(root)' as an item.", path: root)
    }
    let parent: DirectoryHandle
    do {
      parent = try openDirectory(path.parent)
    } catch  where error.code == .notFound {
      return false
    }
    return try exclusively { () throws(ProtFSError) -> Bool in
      let trash = try openTrash()
      let moved = try Self.moveToTrash(name, of: parent, into: trash)
      try Self.empty(trash)
      return moved
    }
  }

  /// Erases the device's contents and settings, as `simctl erase` does: `Containers/` (made again,
  /// empty) and the other directories of the root named in `others` (an app's bundles), and
  /// everything in `.protfs/` but the device's marker and lock file (the lock state and passcode,
  /// the app records, the task store, the logs), which leaves the device as `init` made it. The
  /// caller makes sure nothing uses the device (no app runs, no mount, no session service).
  public func erase(others: [String] = []) throws(ProtFSError) {
    let names = [Device.containersDirectoryName] + others
    for name in names where !Self.isPlainName(name) {
      throw ProtFSError(.invalidArgument, "'\(name)' is not a name in the device's root.", path: root)
    }
    try exclusively { () throws(ProtFSError) in
      let trash = try openTrash()
      // The marker names what the erase removes, for the command that finishes it after a kill.
      try AtomicFile.write(Array(names.joined(separator: "\n").utf8), named: Self.eraseMarkerName, in: trash)
      try finishErase(trash)
    }
  }

  /// Finishes an erase or a removal that a kill interrupted; true when there was one. One failed
  /// `stat` when there was none. Another command's erase or removal under way is waited for, and
  /// is not one to finish.
  @discardableResult
  public func finishInterruptedRemoval() throws(ProtFSError) -> Bool {
    guard hasTrash() else { return false }
    return try exclusively { () throws(ProtFSError) -> Bool in
      // Read again under the lock: the command that held it may have emptied the trash.
      guard hasTrash() else { return false }
      let trash = try openTrash()
      if case .success = trash.statusResult(Self.eraseMarkerName) {
        try finishErase(trash)
      } else {
        try Self.empty(trash)
      }
      return true
    }
  }

  private func hasTrash() -> Bool {
    var status = stat()
    guard case .success = Kernel.lstat(stateDirectory + "/" + Self.trashDirectoryName, &status) else { return false }
    return true
  }

  /// Runs `body` holding the device's state lock (`Device.exclusively`), which lock transitions
  /// hold too: no transition writes its record in the middle of an erase, and no two commands
  /// empty the trash at once.
  private func exclusively<T>(_ body: () throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    try Self.exclusively(in: openRoot().openDirectory(Device.stateDirectoryName), body)
  }

  /// Moves what an erase erases into `trash` (whatever was moved before stays moved), makes
  /// `Containers/` again, drops the marker and empties the trash.
  private func finishErase(_ trash: DirectoryHandle) throws(ProtFSError) {
    let top = try openRoot()
    let marker = try AtomicFile.read(named: Self.eraseMarkerName, in: trash, limit: 4096, stateFile: true)
    let names = String(decoding: marker, as: UTF8.self).split(separator: "\n").map(String.init)
    for name in names where Self.isPlainName(name) {
      try Self.moveToTrash(name, of: top, into: trash)
    }
    let state = try top.openDirectory(Device.stateDirectoryName)
    for entry in try state.entries() where !Self.keptByErase.contains(entry.name) {
      try Self.moveToTrash(entry.name, of: state, into: trash)
    }
    if try top.makeDirectory(Device.containersDirectoryName) {
      try top.setPermissions(FilePermissions(rawValue: 0o755), of: Device.containersDirectoryName)
    }
    DebugHold.wait("PROTFS_DEBUG_HOLD_ERASE")
    _ = try Kernel.unlinkat(trash.fd, Self.eraseMarkerName, 0).orThrow(
      "remove", path: trash.pathOf(Self.eraseMarkerName))
    try Self.empty(trash)
  }

  /// Whether `name` names an entry of a directory (not `.`, `..`, nor a path), and not `.protfs`.
  private static func isPlainName(_ name: String) -> Bool {
    !name.isEmpty && name != "." && name != ".." && !name.contains("/") && name != Device.stateDirectoryName
  }

  /// The trash, made when missing (root's alone, as `.protfs/` is).
  private func openTrash() throws(ProtFSError) -> DirectoryHandle {
    let state = try openRoot().openDirectory(Device.stateDirectoryName)
    try state.makeDirectory(Self.trashDirectoryName, permissions: FilePermissions(rawValue: 0o700))
    return try state.openDirectory(Self.trashDirectoryName)
  }

  /// Renames `name` of `directory` into `trash` under a name no other item there has; false when
  /// there is no `name`.
  @discardableResult
  private static func moveToTrash(_ name: String, of directory: DirectoryHandle, into trash: DirectoryHandle)
    throws(ProtFSError) -> Bool
  {
    while true {
      let unique = "\(name).\(UInt64.random(in: 0...UInt64.max))"
      switch Kernel.renameat2(directory.fd, name, trash.fd, unique, .noReplace) {
      case .success:
        _ = Kernel.fsync(trash.fd)
        return true
      case .failure(let e) where e == .noSuchFile: return false
      case .failure(let e) where e == .exists: continue
      case .failure(let e): throw ProtFSError.system("move to the trash", path: directory.pathOf(name), errno: e)
      }
    }
  }

  /// Removes everything in the trash (but an erase's marker), then the trash itself when that
  /// leaves it empty.
  private static func empty(_ trash: DirectoryHandle) throws(ProtFSError) {
    var marked = false
    for entry in try trash.entries() {
      if entry.name == eraseMarkerName {
        marked = true
      } else {
        try trash.removeTree(entry.name)
      }
    }
    guard !marked else { return }
    let state = try DirectoryHandle(path: (trash.path as NSString).deletingLastPathComponent)
    _ = Kernel.unlinkat(state.fd, trashDirectoryName, AT_REMOVEDIR)
  }
}
