import Foundation
import ProtFSSystem

extension DirectoryHandle {
  /// Removes `name` and, if it is a directory, everything below it, never following a symlink.
  public func removeTree(_ name: String) throws(ProtFSError) {
    let st = try status(name)
    if st.kind == .directory {
      let child = try openDirectory(name)
      let (visitors, _) = TreeWalker(threads: 1, postOrder: true).walk(
        [TreeWalker.Root(child, TreeRemover.Place())], visitor: TreeRemover())
      if let error = visitors[0].error { throw error }
      _ = try Kernel.unlinkat(fd, name, AT_REMOVEDIR).orThrow("remove", path: pathOf(name))
    } else {
      _ = try Kernel.unlinkat(fd, name, 0).orThrow("remove", path: pathOf(name))
    }
  }
}

/// The visitor of `removeTree`: unlinks each entry, a directory once everything below it is gone,
/// and stops at the first error.
private struct TreeRemover: TreeVisitor {
  /// No context is needed: every entry is removed relative to its directory.
  struct Place: Sendable {}
  /// The first error, which stopped the walk.
  var error: ProtFSError?

  /// Unlinks anything but a directory; walks a directory.
  mutating func visit(_ entry: inout TreeEntry, in place: Place) -> TreeStep<Place> {
    if error != nil { return .stop }
    if entry.kind == .directory { return .descend(place) }
    if case .failure(let e) = Kernel.unlinkat(entry.directory.fd, entry.name, 0) {
      error = ProtFSError.system("remove", path: entry.directory.pathOf(entry.nameString), errno: e)
      return .stop
    }
    return .skip
  }

  /// Removes a directory, now empty (the root is left to `removeTree`).
  mutating func leave(_ name: String?, in parent: DirectoryHandle?, _ place: Place) {
    guard let name, let parent, error == nil else { return }
    if case .failure(let e) = Kernel.unlinkat(parent.fd, name, AT_REMOVEDIR) {
      error = ProtFSError.system("remove", path: parent.pathOf(name), errno: e)
    }
  }

  /// Records the error and stops.
  mutating func failed(_ error: ProtFSError, in place: Place) -> Bool {
    self.error = error
    return false
  }
}
