import Foundation
import ProtFSSystem

/// A session outside a device: directories opened by path (their own symlinks followed, as the
/// caller chose them), files left as the process makes them.
public struct PlainDownloadFileSystem: DownloadFileSystem {
  /// Creates the file system.
  public init() {}

  /// Opens `path`, creating it first when asked.
  public func openDirectory(_ path: String, creating: Bool) throws(ProtFSError) -> DirectoryHandle {
    if creating && !FileManager.default.fileExists(atPath: path) {
      do {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
      } catch {
        throw ProtFSError(
          .io, "Cannot create the directory '\(path)': \(FailureReason.of(error)).", path: path)
      }
    }
    return try DirectoryHandle(path: path)
  }

  /// Nothing to label outside a device.
  public func label(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError) {}
}
