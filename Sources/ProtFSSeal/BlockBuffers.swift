import Glibc
import Synchronization

/// The buffers a sealed file's blocks are decrypted and encrypted in, kept from one I/O to the
/// next: a fresh megabyte per request costs a page fault and a zeroed page for every 4 KiB of it
/// (glibc maps and unmaps an allocation that large), more than the cipher does.
///
/// A buffer is zeroed when it goes back to the pool if it held plaintext (the caller says), so a
/// kept buffer never holds a file's contents between two I/Os.
package enum BlockBuffers {
  /// The size of a kept buffer: the largest request the mount takes (1 MiB) and its two partial
  /// edge blocks. A larger I/O gets a buffer of its own, freed after.
  package static let size = (1 << 20) + 2 * FileCipher.blockSize

  /// How many free buffers are kept (one per thread doing sealed I/O at once).
  static let kept = 4

  private static let free = Mutex<[KeptBuffer]>([])

  /// Calls `body` with a buffer of `count` bytes (its contents undefined); `holdsPlaintext` says,
  /// after `body` returns or throws, whether the buffer must be zeroed before it is used again.
  package static func with<R, E: Error>(
    count: Int, _ body: (UnsafeMutableRawBufferPointer, inout Bool) throws(E) -> R
  ) throws(E) -> R {
    let buffer = take(count)
    var holdsPlaintext = true
    defer { giveBack(buffer, zeroing: holdsPlaintext ? count : 0) }
    return try body(UnsafeMutableRawBufferPointer(rebasing: buffer[..<count]), &holdsPlaintext)
  }

  private static func take(_ count: Int) -> UnsafeMutableRawBufferPointer {
    if count <= size, let kept = free.withLock({ $0.popLast() }) { return kept.buffer }
    return .allocate(byteCount: max(count, size), alignment: 64)
  }

  private static func giveBack(_ buffer: UnsafeMutableRawBufferPointer, zeroing count: Int) {
    if count > 0, let base = buffer.baseAddress { explicit_bzero(base, count) }
    let kept =
      buffer.count == size
      && free.withLock { free in
        guard free.count < Self.kept else { return false }
        free.append(KeptBuffer(buffer: buffer))
        return true
      }
    if !kept { buffer.deallocate() }
  }
}

/// A free buffer in ``BlockBuffers``' pool.
// `@unchecked Sendable`: a buffer is used by one thread at a time, the one that took it from the
// pool; the pool's lock hands it from one thread to the next.
private struct KeptBuffer: @unchecked Sendable {
  let buffer: UnsafeMutableRawBufferPointer
}
