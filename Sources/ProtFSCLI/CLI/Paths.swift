import ProtFS
import ProtFSSystem

/// How commands turn a PATH argument into an item on the device.
package enum Paths {
  /// The existing item `shown` names. A symlink is refused unless `follow`, which resolves it
  /// inside the device only.
  package static func item(_ shown: String, on device: Device, follow: Bool) throws -> DevicePath {
    var path = try device.resolve(shown)
    if follow { path = try device.resolvingSymlinks(path) }
    let status = try device.status(path)
    if status.kind == .symlink {
      throw ProtFSError(
        .symlink, "'\(shown)' is a symbolic link, which has no protection class of its own.", path: shown,
        remedy: .advice("give --follow to use its target"))
    }
    return path
  }
}
