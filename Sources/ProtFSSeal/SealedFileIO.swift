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
    try withPlaintext(at: offset, count: count) { Array($0) }
  }

  /// Calls `body` with up to `count` plaintext bytes from `offset` (fewer at the end of the file),
  /// which it must not keep: they are zeroed after. The blocks they lie in are read straight into
  /// one buffer and decrypted there; the end of the file is where the read comes back short.
  package func withPlaintext<R>(at offset: Int, count: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(ProtFSError)
    -> R
  {
    guard count > 0, offset >= 0 else { return body(UnsafeRawBufferPointer(start: nil, count: 0)) }
    let start = offset / Self.block * Self.block
    let stop = (offset + count + Self.block - 1) / Self.block * Self.block
    return try BlockBuffers.with(count: stop - start) { (buffer, _) throws(ProtFSError) in
      let got = try readCiphertext(into: buffer, at: start)
      try decrypt(UnsafeMutableRawBufferPointer(rebasing: buffer[..<got]), at: start)
      let first = min(got, offset - start)
      return body(UnsafeRawBufferPointer(rebasing: buffer[first..<min(got, offset - start + count)]))
    }
  }

  /// Writes `bytes` at `offset`. An `offset` past the end grows the file with zeros up to it, even
  /// when `bytes` is empty (which is how ``truncate(to:)`` grows a file).
  package func write(_ bytes: [UInt8], at offset: Int) throws(ProtFSError) {
    let result = bytes.withUnsafeBytes { raw in Result { () throws(ProtFSError) in try write(raw, at: offset) } }
    try result.get()
  }

  /// Writes `bytes` at `offset`, as ``write(_:at:)-([UInt8],_)`` does. The whole blocks they cover
  /// are encrypted straight from them into the buffer written; only partial blocks are copied.
  package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(ProtFSError) {
    try write(count: bytes.count, at: offset, from: bytes) { _ in true }
  }

  /// Writes `count` bytes at `offset` that `fill` puts straight into the buffer they are encrypted
  /// in (one copy of the plaintext, not two), as ``write(_:at:)-([UInt8],_)`` does. `fill` gets
  /// exactly `count` bytes and returns whether it filled them all; when it did not, nothing is
  /// written and the write fails with EIO.
  package func write(
    count: Int, at offset: Int, fill: (UnsafeMutableRawBufferPointer) -> Bool
  ) throws(ProtFSError) {
    try write(count: count, at: offset, from: nil, fill: fill)
  }

  /// Writes `count` bytes at `offset`: `source` when given, else what `fill` puts in.
  private func write(
    count: Int, at offset: Int, from source: UnsafeRawBufferPointer?, fill: (UnsafeMutableRawBufferPointer) -> Bool
  ) throws(ProtFSError) {
    var size = try size()
    if size < offset {
      let zeros = UnsafeMutableRawBufferPointer.allocate(byteCount: min(Self.zeroChunk, offset - size), alignment: 16)
      defer { zeros.deallocate() }
      while size < offset {
        let gap = min(Self.zeroChunk, offset - size)
        zeros.initializeMemory(as: UInt8.self, repeating: 0)
        try writeBlocks(count: gap, at: size, size: size, from: nil) { target in
          target.copyMemory(from: UnsafeRawBufferPointer(rebasing: zeros[..<gap]))
          return true
        }
        size += gap
      }
    }
    try writeBlocks(count: count, at: offset, size: size, from: source, fill: fill)
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
      let result = tail.withUnsafeMutableBytes { raw in
        Result { () throws(ProtFSError) in
          try encrypt(raw, at: start)
          try writeCiphertext(UnsafeRawBufferPointer(raw), at: start)
        }
      }
      try result.get()
    }
  }

  /// Writes `count` bytes (`source`, or what `fill` puts in) at `offset` in a file of `size` bytes,
  /// with `offset` at most `size`: the blocks they touch are made in one buffer (the old plaintext of
  /// a first or last block they leave part of, then the new bytes), encrypted there and written at
  /// once. Only what the new bytes leave of the first and last blocks is zeroed first. The whole
  /// blocks `source` covers are encrypted from it into the buffer, not copied there first.
  private func writeBlocks(
    count: Int, at offset: Int, size: Int, from source: UnsafeRawBufferPointer?,
    fill: (UnsafeMutableRawBufferPointer) -> Bool
  ) throws(ProtFSError) {
    let end = offset + count
    let newSize = max(size, end)
    // The blocks to rewrite: those the new bytes touch, and the old last block when it grows.
    let start = min(offset, size) / Self.block * Self.block
    let stop = min(newSize, (end + Self.block - 1) / Self.block * Self.block)
    guard stop > start else { return }
    // The blocks `source` covers whole (to the file's end), encrypted from it; none without it.
    var whole = (
      (offset + Self.block - 1) / Self.block * Self.block, end == newSize ? end : end / Self.block * Self.block
    )
    if source == nil || whole.0 >= whole.1 { whole = (stop, stop) }
    try BlockBuffers.with(count: stop - start) { (buffer, holdsPlaintext) throws(ProtFSError) in
      buffer[..<(offset - start)].initializeMemory(as: UInt8.self, repeating: 0)
      buffer[(end - start)...].initializeMemory(as: UInt8.self, repeating: 0)
      let last = (stop - 1) / Self.block * Self.block
      try keepOldPlaintext(of: start, in: buffer, from: start, offset: offset, end: end, sizes: (size, newSize))
      if last != start {
        try keepOldPlaintext(of: last, in: buffer, from: start, offset: offset, end: end, sizes: (size, newSize))
      }
      if let source {
        for (from, to) in [(offset, min(end, whole.0)), (max(offset, whole.1), end)] where from < to {
          UnsafeMutableRawBufferPointer(rebasing: buffer[(from - start)..<(to - start)])
            .copyMemory(from: UnsafeRawBufferPointer(rebasing: source[(from - offset)..<(to - offset)]))
        }
      } else if !fill(UnsafeMutableRawBufferPointer(rebasing: buffer[(offset - start)..<(end - start)])) {
        throw ProtFSError.system("write", path: path, errno: EIO)
      }
      try encrypt(UnsafeMutableRawBufferPointer(rebasing: buffer[..<(whole.0 - start)]), at: start)
      if let source, whole.0 < whole.1 {
        do throws(SealError) {
          try cipher.encrypt(
            UnsafeRawBufferPointer(rebasing: source[(whole.0 - offset)..<(whole.1 - offset)]),
            into: UnsafeMutableRawBufferPointer(rebasing: buffer[(whole.0 - start)..<(whole.1 - start)]),
            at: UInt64(whole.0))
        } catch {
          throw error.protfsError(path: path)
        }
      }
      if whole.1 < stop {
        try encrypt(UnsafeMutableRawBufferPointer(rebasing: buffer[(whole.1 - start)...]), at: whole.1)
      }
      holdsPlaintext = false  // ciphertext now, all of it
      try writeCiphertext(UnsafeRawBufferPointer(buffer), at: start)
    }
  }

  /// Reads and decrypts into `buffer` (which holds the blocks from `start`) the old plaintext of the
  /// block at `blockStart`, unless it lies past the old end or the new bytes (`offset..<end`) cover it.
  private func keepOldPlaintext(
    of blockStart: Int, in buffer: UnsafeMutableRawBufferPointer, from start: Int, offset: Int, end: Int,
    sizes: (old: Int, new: Int)
  ) throws(ProtFSError) {
    guard blockStart < sizes.old else { return }
    guard offset > blockStart || end < min(sizes.new, blockStart + Self.block) else { return }
    let count = min(sizes.old, blockStart + Self.block) - blockStart
    let block = UnsafeMutableRawBufferPointer(rebasing: buffer[(blockStart - start)..<(blockStart - start + count)])
    let got = try readCiphertext(into: block, at: blockStart)  // shorter: shrunk meanwhile
    try decrypt(UnsafeMutableRawBufferPointer(rebasing: block[..<got]), at: blockStart)
  }

  /// Reads the ciphertext at `offset` into `buffer`, up to its size or the end of the file; the
  /// number of bytes read.
  private func readCiphertext(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(ProtFSError) -> Int {
    guard let base = buffer.baseAddress else { return 0 }
    var done = 0
    while done < buffer.count {
      let got = try Kernel.pread(fd, base + done, buffer.count - done, off_t(offset + done)).orThrow("read", path: path)
      guard got > 0 else { break }  // the end of the file
      done += got
    }
    return done
  }

  private func writeCiphertext(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(ProtFSError) {
    guard let base = bytes.baseAddress else { return }
    var done = 0
    while done < bytes.count {
      done += try Kernel.pwrite(fd, base + done, bytes.count - done, off_t(offset + done)).orThrow("write", path: path)
    }
  }

  private func encrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(ProtFSError) {
    do { try cipher.encrypt(buffer, at: UInt64(offset)) } catch { throw error.protfsError(path: path) }
  }

  private func decrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(ProtFSError) {
    do { try cipher.decrypt(buffer, at: UInt64(offset)) } catch { throw error.protfsError(path: path) }
  }

  private func erase(_ buffer: inout [UInt8]) {
    buffer.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
  }
}
