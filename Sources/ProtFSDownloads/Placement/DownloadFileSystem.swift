import Foundation
import ProtFS
import ProtFSSystem

/// How a download session reaches its directories and labels the files it makes.
///
/// A session never creates, writes or renames by full path: it opens the temp and destination
/// directories through this, holds them, and works relative to the descriptors, so that a directory
/// swapped for a symbolic link between the check and the use cannot send bytes elsewhere.
///
/// Called from the engine's threads, so implementations must be thread-safe.
public protocol DownloadFileSystem: Sendable {
  /// Opens the directory at the absolute path `path` without following any symbolic link in it;
  /// with `creating`, makes it (and missing ancestors) first when it is missing.
  func openDirectory(_ path: String, creating: Bool) throws(ProtFSError) -> DirectoryHandle

  /// Labels the new file open as `fd`, about to appear in (or move to) `directory`: its own class
  /// and, where the session decides owners, its owner. Called before the file is visible there.
  func label(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError)

  /// As `label(file:for:)`, for a file the caller has just read with `fstat` as `status`: its
  /// owner and group are taken from there instead of being read again.
  func label(file fd: Int32, status: stat, for directory: DirectoryHandle) throws(ProtFSError)

  /// As `label(file:for:)`, for a file this process has just made: it has no label and is the
  /// process's own, so neither is read first.
  func labelNew(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError)

  /// Whether the existing file `fd` (read with `fstat` as `status`) in `directory` carries, as its
  /// own, exactly the label and owner a new file made there now would get: only such a file is
  /// continued as a temp file. Anything else (a file of another class moved there, one whose
  /// label was removed) is never relabelled, chowned or written: the task starts a new one.
  func isLabelledAsNew(file fd: Int32, status: stat, in directory: DirectoryHandle) -> Bool

  /// The labelling of many files about to appear in `directory` in one operation (the files a
  /// refill makes ahead, a batch of finished downloads placed there): what `labelNew(file:for:)`
  /// and `label(file:status:for:)` read for each file, read once.
  func labels(for directory: DirectoryHandle) throws(ProtFSError) -> FileLabels

  /// Opens the file at the absolute path `path` for reading, following no symbolic link (not even
  /// as its last component): an upload's source, which is then read through this descriptor only.
  /// Returns it with its effective class on a device, read from the items opened (the descriptor
  /// and the directories held on the way), so that the class decides about the file that is read;
  /// nil outside a device.
  func openSource(_ path: String) throws(ProtFSError) -> (FileDescriptor, ProtectionClass?)

  /// Opens (creating) the Uploads directory at `path`, giving it the class the Downloads directory
  /// at `downloads` carries of its own, if any: `init-cache`'s fix covers upload snapshots too.
  func openUploadsDirectory(_ path: String, like downloads: String) throws(ProtFSError) -> DirectoryHandle
}

extension DownloadFileSystem {
  /// Labels the file as `label(file:for:)` does, reading what it needs itself.
  public func label(file fd: Int32, status: stat, for directory: DirectoryHandle) throws(ProtFSError) {
    try label(file: fd, for: directory)
  }

  /// Labels the file as `label(file:for:)` does.
  public func labelNew(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError) {
    try label(file: fd, for: directory)
  }

  /// Labels each file with `labelNew(file:for:)` or `label(file:status:for:)`.
  public func labels(for directory: DirectoryHandle) throws(ProtFSError) -> FileLabels {
    FileLabels(
      new: { fd throws(ProtFSError) in try labelNew(file: fd, for: directory) },
      placed: { fd, status throws(ProtFSError) in try label(file: fd, status: status, for: directory) })
  }

  /// Outside a device there are no labels: every file is as a new one would be.
  public func isLabelledAsNew(file fd: Int32, status: stat, in directory: DirectoryHandle) -> Bool { true }

  /// Opens (creating) `path`; outside a device there are no classes to follow.
  public func openUploadsDirectory(_ path: String, like downloads: String) throws(ProtFSError) -> DirectoryHandle {
    try openDirectory(path, creating: true)
  }

  /// Opens `path`'s directory with `openDirectory` and the file in it with `O_NOFOLLOW`; no class
  /// outside a device.
  public func openSource(_ path: String) throws(ProtFSError) -> (FileDescriptor, ProtectionClass?) {
    let url = URL(fileURLWithPath: path)
    let name = url.lastPathComponent
    let directory = try openDirectory(url.deletingLastPathComponent().path, creating: false)
    return (try directory.openSourceFile(name), nil)
  }
}
