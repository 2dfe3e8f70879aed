import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// A push's payload on its way from `app push` to the background launch it starts: a file in the
/// device's `.protfs/` (root's alone, 0700) made 0600, named `@push-UUID.json` on the launch's
/// command line, and removed by the launch that reads it.
enum PushPayloadFile {
  /// Writes `payload` to a new file of the device's state directory; returns the launch's value.
  static func hold(_ payload: String, on device: Device) throws -> String {
    let name = "push-\(UUID().uuidString).json"
    try AtomicFile.write(
      Array(payload.utf8), named: name, in: try stateDirectory(device), options: AtomicFile.Options())
    return "@" + name
  }

  /// Removes the file `hold` wrote, for a launch that did not start.
  static func discard(_ value: String, on device: Device) {
    guard let name = fileName(value), let state = try? stateDirectory(device) else { return }
    _ = Kernel.unlinkat(state.fd, name, 0)
  }

  /// The payload `value` gives: a file `hold` wrote (read once, at most 64 KiB, then removed), or
  /// the payload itself.
  static func take(_ value: String, on device: Device) throws -> String {
    guard value.hasPrefix("@push-"), value.hasSuffix(".json") else { return value }
    guard let name = fileName(value) else {
      throw ProtFSError(.invalidArgument, "'\(value)' names no push payload protfs held.")
    }
    let state = try stateDirectory(device)
    let bytes = try AtomicFile.read(named: name, in: state, limit: 64 * 1024, stateFile: true)
    _ = Kernel.unlinkat(state.fd, name, 0)
    return String(decoding: bytes, as: UTF8.self)
  }

  /// The file `value` names (`@push-UUID.json`, with a UUID as `hold` writes it), nil for another.
  private static func fileName(_ value: String) -> String? {
    guard value.hasPrefix("@push-"), value.hasSuffix(".json"),
      UUID(uuidString: String(value.dropFirst("@push-".count).dropLast(".json".count))) != nil
    else { return nil }
    return String(value.dropFirst())
  }

  private static func stateDirectory(_ device: Device) throws(ProtFSError) -> DirectoryHandle {
    try device.openRoot().openDirectory(Device.stateDirectoryName)
  }
}
