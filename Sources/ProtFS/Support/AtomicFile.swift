import Foundation

/// Writes small metadata files atomically: temp file, fsync, rename, fsync of the directory (fscrypt's way).
public enum AtomicFile {
  /// Replaces `name` in `directory` with `bytes`, so that readers see the old or the new content, never a mix.
  public static func write(
    _ bytes: [UInt8], named name: String, in directory: DirectoryHandle,
    permissions: FilePermissions = FilePermissions(rawValue: 0o600)
  ) throws(ProtFSError) {
    let temporary = ".\(name).tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let file = try directory.openDescriptor(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: permissions)
    defer { file.close() }
    do throws(ProtFSError) {
      try writeAll(file.rawValue, bytes, path: directory.pathOf(temporary))
      _ = try valueOrErrno { fsync(file.rawValue) }.orThrow("sync", path: directory.pathOf(temporary))
      file.close()
      _ = try valueOrErrno { renameat(directory.fd, temporary, directory.fd, name) }.orThrow(
        "replace", path: directory.pathOf(name))
      _ = fsync(directory.fd)
    } catch {
      unlinkat(directory.fd, temporary, 0)
      throw error
    }
  }

  /// Writes all of `bytes` to `fd`.
  public static func writeAll(_ fd: Int32, _ bytes: some ContiguousBytes, path: String) throws(ProtFSError) {
    let result: Result<Void, Errno> = bytes.withUnsafeBytes { raw in
      var offset = 0
      while offset < raw.count {
        switch valueOrErrno({ Foundation.write(fd, raw.baseAddress! + offset, raw.count - offset) }) {
        case .success(let written): offset += written
        case .failure(let e): return .failure(e)
        }
      }
      return .success(())
    }
    _ = try result.orThrow("write", path: path)
  }

  /// Reads a whole small file, refusing symlinks and anything over `limit` bytes.
  public static func read(named name: String, in directory: DirectoryHandle, limit: Int = 1 << 20)
    throws(ProtFSError) -> [UInt8]
  {
    let file = try directory.openDescriptor(name, flags: O_RDONLY)
    defer { file.close() }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
      let count = try chunk.withUnsafeMutableBytes { raw in
        valueOrErrno { Foundation.read(file.rawValue, raw.baseAddress, raw.count) }
      }.orThrow("read", path: directory.pathOf(name))
      if count == 0 { return result }
      result += chunk.prefix(count)
      if result.count > limit {
        throw ProtFSError(
          .malformed, "The file '\(directory.pathOf(name))' is larger than \(limit) bytes.",
          path: directory.pathOf(name))
      }
    }
  }
}
