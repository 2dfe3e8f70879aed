import Foundation

extension Kernel {
  /// The bytes of the kernel's file at `path` (`/proc`, `/sys`, cgroup files), read to its end
  /// with `open` and `read`: such a file reports no size, so it is never trusted to have one. Nil
  /// when it cannot be opened or read, or holds more than `limit` bytes.
  ///
  /// FileManager and FileHandle read these too, but their first use in a process costs more than
  /// the read: a launch reads a dozen of them before its app runs.
  package static func readKernelFile(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
    guard case .success(let fd) = valueOrErrno(.open, { open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
    defer { _ = closeDescriptor(fd) }
    // A page a read: what such a file gives at most per call.
    return try? readToEnd(fd, limit: limit, chunk: 4096).get()
  }

  /// The bytes of `fd` from its position to its end, read `chunk` bytes at a time; nil as soon as
  /// more than `limit` came.
  package static func readToEnd(_ fd: Int32, limit: Int, chunk size: Int = 64 << 10) -> Result<[UInt8]?, Errno> {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: size)
    while true {
      let result = chunk.withUnsafeMutableBytes { buffer in
        valueOrErrno(.read) { read(fd, buffer.baseAddress, buffer.count) }
      }
      guard case .success(let count) = result else { return result.map { _ in nil } }
      if count == 0 { return .success(bytes) }
      guard bytes.count + count <= limit else { return .success(nil) }
      bytes += chunk[..<count]
    }
  }
}
