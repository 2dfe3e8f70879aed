import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// Where an imported file's contents go: into its backing file as they are on an unsealed device;
/// on a sealed one (docs/sealed.md), through the file's own key, made for its class before a byte
/// is written, so that no plaintext reaches the disk, in staging or in `Containers/`.
///
/// An encrypted backup's files are encrypted again, not given their backup keys: iOS encrypts each
/// with AES-256-CBC under a 32-byte key of its own (wrapped by the backup keybag's class key), and
/// protfs each 4 KiB block with AES-256-XTS under a 64-byte key, the block's index as the tweak.
/// The formats do not share a key, so rewrapping the backup's key with the device's class key
/// would leave nothing that decrypts the contents: they are decrypted with the backup's key and
/// encrypted with a fresh one as they are written.
struct ImportedContents {
  /// The file's backing descriptor, open for reading and writing.
  let fd: Int32
  /// The path named in errors.
  let path: String
  /// The file's plaintext on a sealed device; nil on an unsealed one.
  let sealed: SealedFileIO?

  /// The contents of `fd` as they are: an unsealed device's file at `path`.
  init(fd: Int32, path: String) {
    self.fd = fd
    self.path = path
    sealed = nil
  }

  /// The contents of `fd`, a new, empty file at `path` of class `cls` on a sealed device, sealed
  /// with `files`: its key record written before anything else. A class whose key is evicted
  /// (class A while the device is locked) is ``SealError/classKeyUnavailable(_:)``.
  init(fd: Int32, path: String, sealing cls: ProtectionClass, with files: SealedFiles) throws(SealError) {
    self.fd = fd
    self.path = path
    sealed = SealedFileIO(fd: fd, cipher: try files.seal(fd, class: cls), path: path)
  }

  /// Copies the first `length` bytes of `source`: its holes kept as holes on an unsealed device;
  /// on a sealed one encrypted zeros (a hole would read as noise through the key).
  func copy(from source: Int32, length: Int64) throws(ProtFSError) {
    guard let sealed else {
      switch ByteCopy.copyKeepingHoles(from: source, to: fd, length: length) {
      case .success: return
      case .failure(.reading(let e)): throw ProtFSError.system("read the stored contents of", path: path, errno: e)
      case .failure(.writing(let e)): throw ProtFSError.system("write", path: path, errno: e)
      case .failure(.copying(let e)): throw ProtFSError.system("copy into", path: path, errno: e)
      }
    }
    var buffer = [UInt8](repeating: 0, count: Self.chunk)
    defer { Self.erase(&buffer) }
    var offset: Int64 = 0
    while offset < length {
      let asked = Int(min(Int64(Self.chunk), length - offset))
      let count = try buffer.withUnsafeMutableBytes { raw in
        Kernel.pread(source, raw.baseAddress!, asked, off_t(offset))
      }.orThrow("read the stored contents of", path: path)
      if count == 0 { break }
      var piece = Array(buffer[..<count])
      defer { Self.erase(&piece) }
      try sealed.write(piece, at: Int(offset))
      offset += Int64(count)
    }
  }

  /// Writes `bytes` at `offset`, encrypted on a sealed device.
  func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(ProtFSError) {
    guard let sealed else {
      var done = 0
      while done < bytes.count {
        done += try Kernel.pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
          .orThrow("write", path: path)
      }
      return
    }
    var plain = Array(bytes)
    defer { Self.erase(&plain) }
    try sealed.write(plain, at: offset)
  }

  /// Sets the size to `size`: a longer file is sparse on an unsealed device, encrypted zeros on a
  /// sealed one; a shorter one is cut (its new last block encrypted again).
  func resize(to size: Int64) throws(ProtFSError) {
    guard let sealed else {
      _ = try Kernel.ftruncate(fd, off_t(size)).orThrow("set the size of", path: path)
      return
    }
    try sealed.truncate(to: Int(size))
  }

  /// Whether the plaintext has the digest `expected` (nil: no digest protfs checks, or unreadable).
  func matches(_ expected: Data) -> Bool? {
    guard let sealed else { return ContentDigest.matches(fd, expected) }
    // Unreadable is nil, as a backing file that cannot be read is.
    return ContentDigest.matches(expected) { buffer, count, offset in
      guard var plain = try? sealed.read(at: Int(offset), count: count) else { return nil }
      defer { Self.erase(&plain) }
      plain.withUnsafeBytes { if let base = $0.baseAddress { buffer.copyMemory(from: base, byteCount: $0.count) } }
      return plain.count
    }
  }

  /// The most bytes copied per read.
  static let chunk = 1 << 20

  private static func erase(_ buffer: inout [UInt8]) {
    buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
  }
}
