import Glibc
import ProtFSSystem

/// Reads and writes a sealed file's plaintext through its backing descriptor: what the mount, the
/// downloads and the file manager do with every sealed file.
///
/// The backing file is as long as the plaintext (``FileCipher`` keeps lengths), so offsets and sizes
/// are the same on both sides. A write rewrites whole blocks: the partial first and last blocks are
/// read, decrypted, changed and encrypted again, and so is the old last block when the file grows
/// past it (a block's ciphertext depends on its length). A hole would decrypt to noise, so growing
/// a file writes encrypted zeros up to the new data.
package struct SealedFileIO: Sendable {
  /// The most bytes a gap is filled with per write.
  static let zeroChunk = 1 << 20

  /// The backing descriptor, open for reading (and writing, to write).
  package let fd: Int32
  /// The file's cipher.
  package let cipher: FileCipher
  /// The path named in errors.
  package let path: String

  /// I/O on `fd` with `cipher`.
  package init(fd: Int32, cipher: FileCipher, path: String) {
    self.fd = fd
    self.cipher = cipher
    self.path = path
  }

  private static var block: Int { FileCipher.blockSize }

  /// The plaintext size.
  package func size() throws(ProtFSError) -> Int {
    var s = stat()
    _ = try Kernel.fstat(fd, &s).orThrow("inspect", path: path)
    return Int(s.st_size)
  }

  /// Up to `count` plaintext bytes from `offset` (fewer at the end of the file).
  package func read(at offset: Int, count: Int) throws(ProtFSError) -> [UInt8] {
    let size = try size()
    guard offset < size, count > 0 else { return [] }
    let end = min(size, offset + count)
    let start = offset / Self.block * Self.block
    let stop = min(size, (end + Self.block - 1) / Self.block * Self.block)
    var buffer = try readCiphertext(at: start, count: stop - start)
    try decrypt(&buffer, at: start)
    defer { erase(&buffer) }
    return Array(buffer[(offset - start)..<(end - start)])
  }

  /// Writes `bytes` at `offset`. An `offset` past the end grows the file with zeros up to it, even
  /// when `bytes` is empty (which is how ``truncate(to:)`` grows a file).
  package func write(_ bytes: [UInt8], at offset: Int) throws(ProtFSError) {
    var size = try size()
    while size < offset {
      let gap = min(Self.zeroChunk, offset - size)
      try writeBlocks([UInt8](repeating: 0, count: gap), at: size, size: size)
      size += gap
    }
    try writeBlocks(bytes, at: offset, size: size)
  }

  /// Sets the plaintext size to `newSize`: the new last block is encrypted again for its new length;
  /// a longer file reads zeros to its end.
  package func truncate(to newSize: Int) throws(ProtFSError) {
    let size = try size()
    if newSize > size { return try write([], at: newSize) }
    guard newSize < size else { return }
    let start = newSize / Self.block * Self.block
    var tail = newSize > start ? try read(at: start, count: newSize - start) : []
    defer { erase(&tail) }
    _ = try Kernel.ftruncate(fd, off_t(newSize)).orThrow("truncate", path: path)
    if !tail.isEmpty {
      try encrypt(&tail, at: start)
      try writeCiphertext(tail, at: start)
    }
  }

  /// Writes `bytes` at `offset` in a file of `size` bytes, with `offset` at most `size`.
  private func writeBlocks(_ bytes: [UInt8], at offset: Int, size: Int) throws(ProtFSError) {
    let end = offset + bytes.count
    let newSize = max(size, end)
    // The blocks to rewrite: those the new bytes touch, and the old last block when it grows.
    let start = min(offset, size) / Self.block * Self.block
    let stop = min(newSize, (end + Self.block - 1) / Self.block * Self.block)
    guard stop > start else { return }
    var buffer = [UInt8](repeating: 0, count: stop - start)
    defer { erase(&buffer) }
    // Old plaintext where the new bytes leave part of a block: the first block, the last block.
    for blockStart in Set([start, (stop - 1) / Self.block * Self.block]) where blockStart < size {
      let blockEnd = min(size, blockStart + Self.block)
      let coveredFully = offset <= blockStart && end >= min(newSize, blockStart + Self.block)
      guard !coveredFully else { continue }
      let old = try read(at: blockStart, count: blockEnd - blockStart)
      buffer.replaceSubrange((blockStart - start)..<(blockStart - start + old.count), with: old)
    }
    buffer.replaceSubrange((offset - start)..<(end - start), with: bytes)
    try encrypt(&buffer, at: start)
    try writeCiphertext(buffer, at: start)
  }

  private func readCiphertext(at offset: Int, count: Int) throws(ProtFSError) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: count)
    var done = 0
    while done < count {
      let got = try buffer.withUnsafeMutableBytes { raw in
        Kernel.pread(fd, raw.baseAddress! + done, count - done, off_t(offset + done))
      }.orThrow("read", path: path)
      guard got > 0 else { break }  // shrunk meanwhile: the caller decrypts what is there
      done += got
    }
    return Array(buffer[..<done])
  }

  private func writeCiphertext(_ bytes: [UInt8], at offset: Int) throws(ProtFSError) {
    var done = 0
    while done < bytes.count {
      done += try bytes.withUnsafeBytes { raw in
        Kernel.pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset + done))
      }.orThrow("write", path: path)
    }
  }

  private func encrypt(_ buffer: inout [UInt8], at offset: Int) throws(ProtFSError) {
    let result = buffer.withUnsafeMutableBytes { raw in
      Result { () throws(SealError) in try cipher.encrypt(raw, at: UInt64(offset)) }
    }
    do { try result.get() } catch { throw error.protfsError(path: path) }
  }

  private func decrypt(_ buffer: inout [UInt8], at offset: Int) throws(ProtFSError) {
    let result = buffer.withUnsafeMutableBytes { raw in
      Result { () throws(SealError) in try cipher.decrypt(raw, at: UInt64(offset)) }
    }
    do { try result.get() } catch { throw error.protfsError(path: path) }
  }

  private func erase(_ buffer: inout [UInt8]) {
    buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
  }
}
