import Foundation
import ProtFSSystem

/// A temp file to delete when its task fails: its name in the directory it was made in, held open
/// when the caller still has it.
package struct TemporaryRemoval: Sendable {
  /// The temp directory, or nil when it can no longer be opened safely (the file is left alone).
  package let directory: DirectoryHandle?
  package let name: String

  package init(directory: DirectoryHandle?, name: String) {
    self.directory = directory
    self.name = name
  }

  /// The temp file of `task`, if it has one, with its directory opened through `fileSystem`.
  package init?(_ task: DownloadTask, in fileSystem: any DownloadFileSystem) {
    let record = task.record
    guard let name = record.temporaryFileName else { return nil }
    self.init(directory: try? fileSystem.openDirectory(record.temporaryDirectory, creating: false), name: name)
  }

  /// Deletes the file, relative to its directory.
  package func remove() { directory?.removeFile(name, ifStill: nil) }
}
