import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// A `FileHandle` for a file on a protfs device, with iOS's rule for open files (docs/semantics.md §3): opening
/// needs the class available; afterwards, a handle on a complete-unless-open file keeps working
/// while the device is locked, one on a complete file does not (iOS fails its I/O). A sealed file's
/// bytes are read and written through its key, at the handle's own offset.
public final class ProtectedFileHandle: Sendable {
  /// The file.
  public let path: String
  private let item: DevicePath
  private let device: Device
  /// The open file; closed by `close()` or when the handle goes away.
  private let file: FileDescriptor
  /// A sealed file's plaintext I/O; nil for a file that is not sealed.
  private let sealed: SealedFileIO?
  /// The handle's offset in a sealed file.
  private let offset = Mutex(0)

  package init(device: Device, item: DevicePath, path: String, file: FileDescriptor, cipher: FileCipher? = nil) {
    self.device = device
    self.item = item
    self.path = path
    self.file = file
    sealed = cipher.map { SealedFileIO(fd: file.rawValue, cipher: $0, path: path) }
  }

  /// Reads up to `count` bytes (`FileHandle.read(upToCount:)`); nil at the end of the file.
  public func read(upToCount count: Int) throws -> Data? {
    try io(writing: false) { fd throws(ProtFSError) in
      if let sealed {
        let start = offset.withLock { $0 }
        let bytes = try sealed.read(at: start, count: count)
        offset.withLock { $0 = start + bytes.count }
        return bytes.isEmpty ? nil : Data(bytes)
      }
      var buffer = [UInt8](repeating: 0, count: count)
      let n = try buffer.withUnsafeMutableBytes { raw in
        Kernel.read(fd, raw.baseAddress, raw.count)
      }
      .orThrow("read", path: path)
      return n == 0 ? nil : Data(buffer.prefix(n))
    }
  }

  /// Reads to the end of the file (`FileHandle.readToEnd()`).
  public func readToEnd() throws -> Data? {
    var result = Data()
    while let chunk = try read(upToCount: 1 << 16) { result += chunk }
    return result.isEmpty ? nil : result
  }

  /// Writes `data` at the current offset (`FileHandle.write(contentsOf:)`).
  public func write(contentsOf data: Data) throws {
    try io(writing: true) { fd throws(ProtFSError) in
      guard let sealed else { return try AtomicFile.writeAll(fd, data, path: path) }
      let start = offset.withLock { $0 }
      try sealed.write([UInt8](data), at: start)
      offset.withLock { $0 = start + data.count }
    }
  }

  /// Moves to `offset` (`FileHandle.seek(toOffset:)`).
  public func seek(toOffset offset: UInt64) throws {
    try io(writing: false, gated: false) { fd throws(ProtFSError) in
      _ = try Kernel.lseek(fd, off_t(offset), SEEK_SET).orThrow("seek in", path: path)
      self.offset.withLock { $0 = Int(offset) }
    }
  }

  /// Moves to the end and returns the offset (`FileHandle.seekToEnd()`).
  @discardableResult
  public func seekToEnd() throws -> UInt64 {
    try io(writing: false, gated: false) { fd throws(ProtFSError) in
      let end = try Kernel.lseek(fd, 0, SEEK_END).orThrow("seek in", path: path)
      offset.withLock { $0 = Int(end) }
      return UInt64(end)
    }
  }

  /// Closes the handle (`FileHandle.close()`).
  public func close() throws {
    file.close()
  }

  private func io<T>(writing: Bool, gated: Bool = true, _ body: (Int32) throws(ProtFSError) -> T) throws -> T {
    do throws(ProtFSError) {
      let current = file.rawValue
      guard current >= 0 else {
        throw ProtFSError(.invalidArgument, "The handle of '\(path)' is closed.", path: path, errno: EBADF)
      }
      if gated { try device.checkAccess(item, for: .openHandle) }
      return try body(current)
    } catch {
      throw error.cocoaError(writing: writing)
    }
  }
}

extension ProtectedFileManager {
  /// Opens a file for reading (`FileHandle(forReadingAtPath:)`); its class must be available now.
  public func fileHandle(forReadingAtPath path: String) throws -> ProtectedFileHandle {
    try openHandle(path, flags: O_RDONLY, access: .read, writing: false)
  }

  /// Opens a file for writing (`FileHandle(forWritingAtPath:)`); its class must be available now.
  public func fileHandle(forWritingAtPath path: String) throws -> ProtectedFileHandle {
    try openHandle(path, flags: O_WRONLY, access: .write, writing: true)
  }

  /// Opens a file for reading and writing (`FileHandle(forUpdatingAtPath:)`).
  public func fileHandle(forUpdatingAtPath path: String) throws -> ProtectedFileHandle {
    try openHandle(path, flags: O_RDWR, access: .write, writing: true)
  }

  private func openHandle(_ path: String, flags: Int32, access: ProtectedDataAccess, writing: Bool) throws
    -> ProtectedFileHandle
  {
    do throws(ProtFSError) {
      let item = try device.resolve(path)
      let (parent, name) = try device.openParent(item)
      guard let name else {
        throw ProtFSError(.invalidArgument, "Cannot open '\(path)': it is the device directory.", path: path)
      }
      _ = try parent.status(name)
      try device.checkAccess(item, for: access)
      guard let sealed = try sealedFiles(for: parent, path: path) else {
        return ProtectedFileHandle(
          device: device, item: item, path: path, file: try parent.openDescriptor(name, flags: flags))
      }
      // A sealed file's partial blocks are read back to be written: it is opened for both.
      let file = try parent.openDescriptor(name, flags: flags == O_WRONLY ? O_RDWR : flags)
      guard SealedFiles.hasRecord(file.rawValue) else {
        return ProtectedFileHandle(device: device, item: item, path: path, file: file)
      }
      do {
        let cipher = try sealed.cipher(of: file.rawValue)
        return ProtectedFileHandle(device: device, item: item, path: path, file: file, cipher: cipher)
      } catch {
        file.close()
        throw error.protfsError(path: path)
      }
    } catch {
      throw error.cocoaError(writing: writing)
    }
  }
}
