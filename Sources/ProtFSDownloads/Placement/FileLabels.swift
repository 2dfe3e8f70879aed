import Foundation
import ProtFSSystem

/// The labelling of files in one directory, worked out once for a batch of them
/// (`DownloadFileSystem.labels(for:)`).
public struct FileLabels: Sendable {
  private let new: @Sendable (Int32) throws(ProtFSError) -> Void
  private let placed: @Sendable (Int32, stat) throws(ProtFSError) -> Void

  /// Labels that `new` writes to a file this process has just made, and `placed` to one it moves
  /// there (given its `fstat`).
  public init(
    new: @escaping @Sendable (Int32) throws(ProtFSError) -> Void,
    placed: @escaping @Sendable (Int32, stat) throws(ProtFSError) -> Void
  ) {
    self.new = new
    self.placed = placed
  }

  /// Labels the file open as `fd` that this process has just made, as `labelNew(file:for:)` does.
  public func labelNew(_ fd: Int32) throws(ProtFSError) { try new(fd) }

  /// Labels the file open as `fd`, read with `fstat` as `status`, as `label(file:status:for:)` does.
  public func label(_ fd: Int32, status: stat) throws(ProtFSError) { try placed(fd, status) }
}

/// The labelling of each directory files go to during one step (a finisher batch, a launch pass),
/// read from the file system once per directory.
package struct FileLabelsByDirectory {
  private var known: [(directory: DirectoryHandle, labels: FileLabels)] = []

  package init() {}

  /// How files in `directory` are labelled, read from `fileSystem` the first time it is asked for.
  package mutating func labels(for directory: DirectoryHandle, in fileSystem: any DownloadFileSystem)
    throws(ProtFSError) -> FileLabels
  {
    if let entry = known.first(where: { $0.directory === directory }) { return entry.labels }
    let made = try fileSystem.labels(for: directory)
    known.append((directory, made))
    return made
  }
}
