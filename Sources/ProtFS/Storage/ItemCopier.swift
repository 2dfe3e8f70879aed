import Foundation
import ProtFSSystem

/// Copies files and directory trees between directory handles, carrying every extended attribute
/// (libattr's `attr_copy_fd`), the mode and the times, never following a symlink.
///
/// Used for copies and for the one move across a filesystem boundary (`move`), where rename(2)
/// fails with EXDEV.
package enum ItemCopier {
  /// A label for a file's copy: given the copy's descriptor before the copy is placed.
  package typealias Label = (Int32) throws(ProtFSError) -> Void

  /// Copies `name` in `source` to `destinationName` in `destination`. The copy appears whole: it is
  /// built under a temporary name and renamed into place without replacing anything.
  package static func copy(
    _ name: String, in source: DirectoryHandle, to destinationName: String,
    in destination: DirectoryHandle
  ) throws(ProtFSError) {
    try place(name, in: source, to: destinationName, in: destination, replacing: false, label: nil)
  }

  /// Moves `name` in `source` to `destinationName` in `destination` on another filesystem (where
  /// renameat(2) fails with EXDEV): the item is copied whole (`copy`), renamed into place, and only
  /// then is the source removed, so the destination never holds a partial copy and a failure
  /// leaves the source where it was. `replacing` lets the copy replace an item at the destination.
  /// With a `label`, only a regular file is moved (anything else put in its place is refused), and
  /// its copy is labelled and flushed before it is placed, so it is never seen unlabelled.
  package static func move(
    _ name: String, in source: DirectoryHandle, to destinationName: String, in destination: DirectoryHandle,
    replacing: Bool = false, label: Label? = nil
  ) throws(ProtFSError) {
    try place(name, in: source, to: destinationName, in: destination, replacing: replacing, label: label)
    try source.removeTree(name)
  }

  /// Copies `name` under a temporary name next to `destinationName` and renames the copy into place.
  private static func place(
    _ name: String, in source: DirectoryHandle, to destinationName: String, in destination: DirectoryHandle,
    replacing: Bool, label: Label?
  ) throws(ProtFSError) {
    let temporary = AtomicFile.temporaryName(for: destinationName)
    do throws(ProtFSError) {
      if label != nil, try source.status(name).kind != .file {
        throw ProtFSError(
          .invalidArgument, "Cannot move '\(source.pathOf(name))': it is not a regular file.",
          path: source.pathOf(name))
      }
      try copyItem(name, in: source, as: temporary, in: destination, label: label)
      let renamed =
        replacing
        ? Kernel.renameat(destination.fd, temporary, destination.fd, destinationName)
        : Kernel.renameat2(destination.fd, temporary, destination.fd, destinationName, .noReplace)
      switch renamed {
      case .success: _ = Kernel.fsync(destination.fd)
      case .failure(let e):
        throw ProtFSError.system(
          replacing ? "replace" : "create", path: destination.pathOf(destinationName), errno: e)
      }
    } catch {
      try? destination.removeTree(temporary)  // the copy's own error is the one to report
      throw error
    }
  }

  /// Copies the item `name` of `source` to `newName` in `destination`, a directory with all it
  /// holds; `label` gets a file's copy before it is flushed.
  package static func copyItem(
    _ name: String, in source: DirectoryHandle, as newName: String,
    in destination: DirectoryHandle, label: Label? = nil
  ) throws(ProtFSError) {
    let status = try source.status(name)
    switch status.kind {
    case .file:
      let inputFile = try source.openDescriptor(name, flags: O_RDONLY)
      defer { inputFile.close() }
      let outputFile = try destination.openDescriptor(
        newName, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: status.permissions)
      defer { outputFile.close() }
      let (input, output) = (inputFile.rawValue, outputFile.rawValue)
      try copyContents(from: input, to: output, path: destination.pathOf(newName))
      try copyMetadata(from: input, source.pathOf(name), to: output, destination.pathOf(newName), status)
      try label?(output)
      _ = try Kernel.fsync(output).orThrow("sync", path: destination.pathOf(newName))
    case .directory:
      try destination.makeDirectory(newName, permissions: FilePermissions(rawValue: 0o700))
      let from = try source.openDirectory(name)
      let to = try destination.openDirectory(newName)
      let (visitors, _) = TreeWalker(threads: 1, postOrder: true).walk(
        [TreeWalker.Root(from, TreeCopier.Place(source: from, destination: to, status: status))],
        visitor: TreeCopier())
      if let error = visitors[0].error { throw error }
      try copyMetadata(from: from.fd, from.path, to: to.fd, to.path, status)
    case .symlink:
      var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
      let count = try Kernel.readlinkat(source.fd, name, &buffer, Int(PATH_MAX)).orThrow(
        "read the link", path: source.pathOf(name))
      buffer[count] = 0
      _ = try Kernel.symlinkat(buffer, destination.fd, newName).orThrow(
        "create the link", path: destination.pathOf(newName))
    case .other, .unknown:
      throw ProtFSError(
        .invalidArgument, "Cannot copy '\(source.pathOf(name))': it is not a file, directory or symbolic link.",
        path: source.pathOf(name))
    }
  }

  /// Copies the rest of `input` to `output` (`ByteCopy`); `path` names the destination in errors.
  package static func copyContents(from input: Int32, to output: Int32, path: String) throws(ProtFSError) {
    switch ByteCopy.copy(from: input, to: output) {
    case .success: return
    case .failure(.reading(let e)): throw ProtFSError.system("read the source of", path: path, errno: e)
    case .failure(.writing(let e)): throw ProtFSError.system("write", path: path, errno: e)
    case .failure(.copying(let e)): throw ProtFSError.system("copy into", path: path, errno: e)
    }
  }

  package static func copyMetadata(
    from input: Int32, _ sourcePath: String, to output: Int32, _ destinationPath: String,
    _ status: FileStatus
  ) throws(ProtFSError) {
    // attr_copy_fd copies the user.* namespace, protfs's attributes included.
    _ = try Kernel.attr_copy_fd(sourcePath, input, destinationPath, output)
      .orThrow("copy the extended attributes to", path: destinationPath)
    _ = try Kernel.fchmod(output, mode_t(status.permissions.rawValue)).orThrow(
      "change the mode of", path: destinationPath)
    var times = [timespec](repeating: timespec(), count: 2)
    times[0] = timespec(tv_sec: Int(status.accessed.timeIntervalSince1970), tv_nsec: 0)
    times[1] = timespec(tv_sec: Int(status.modified.timeIntervalSince1970), tv_nsec: 0)
    _ = Kernel.futimens(output, times)
  }
}

/// The visitor of a directory copy: copies each file and link as it meets it, makes each
/// directory, and gives a directory its attributes, mode and times once everything below it is
/// copied (so the copying does not change its times). Stops at the first error.
private struct TreeCopier: TreeVisitor {
  /// A directory being copied: its source, its copy and the source's status.
  struct Place: Sendable {
    /// The directory copied from.
    var source: DirectoryHandle
    /// Its copy.
    var destination: DirectoryHandle
    /// The source's status, for the copy's mode and times.
    var status: FileStatus
  }
  /// The first error, which stopped the walk.
  var error: ProtFSError?

  /// Copies a file or link; makes a directory's copy and walks it.
  mutating func visit(_ entry: inout TreeEntry, in place: Place) -> TreeStep<Place> {
    if error != nil { return .stop }
    let name = entry.nameString
    do throws(ProtFSError) {
      guard entry.kind == .directory else {
        try ItemCopier.copyItem(name, in: place.source, as: name, in: place.destination)
        return .skip
      }
      let status = try place.source.status(name)
      try place.destination.makeDirectory(name, permissions: FilePermissions(rawValue: 0o700))
      let from = try place.source.openDirectory(name)
      let to = try place.destination.openDirectory(name)
      return .descend(Place(source: from, destination: to, status: status))
    } catch {
      self.error = error
      return .stop
    }
  }

  /// Gives a copied directory its attributes, mode and times (the root is left to `copyItem`).
  mutating func leave(_ name: String?, in parent: DirectoryHandle?, _ place: Place) {
    guard name != nil, error == nil else { return }
    do throws(ProtFSError) {
      try ItemCopier.copyMetadata(
        from: place.source.fd, place.source.path, to: place.destination.fd, place.destination.path, place.status)
    } catch {
      self.error = error
    }
  }

  /// Records the error and stops.
  mutating func failed(_ error: ProtFSError, in place: Place) -> Bool {
    self.error = error
    return false
  }
}
