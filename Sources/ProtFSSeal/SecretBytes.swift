import Glibc
import ProtFSSystem

/// Key material held outside Swift's copyable values: locked in RAM (never swapped out, where the
/// process may lock memory) and overwritten with zeros when the last holder lets go or ``erase()``
/// is called, so an evicted key leaves no copy in the process.
///
/// Keys pass through it and through stack buffers the same function zeroes; an `Array` of key
/// bytes is never made, because copy-on-write leaves copies behind that nothing erases.
// `@unchecked Sendable`: the storage pointer never changes; its bytes are written by the maker before
// the value is shared, and by `erase()`, which a caller uses only on a key no one else holds (eviction
// drops references instead and lets `deinit` erase); every other access reads.
package final class SecretBytes: @unchecked Sendable {
  /// The number of bytes.
  package let count: Int
  private let storage: UnsafeMutableRawPointer
  private let locked: Bool

  /// `count` zero bytes.
  package init(count: Int) {
    precondition(count > 0, "a secret has at least one byte")
    self.count = count
    storage = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 16)
    storage.initializeMemory(as: UInt8.self, repeating: 0, count: count)
    // Best effort: without CAP_IPC_LOCK the RLIMIT_MEMLOCK budget may be spent; the key is then
    // still erased when dropped, only not pinned.
    locked = Kernel.mlock(storage, count) == 0
  }

  /// A copy of `bytes`, which the caller erases if they were secret.
  package convenience init(copying bytes: UnsafeRawBufferPointer) {
    self.init(count: bytes.count)
    if let base = bytes.baseAddress { storage.copyMemory(from: base, byteCount: bytes.count) }
  }

  /// `count` bytes from the kernel's random source through OpenSSL.
  package static func random(count: Int) throws(SealError) -> SecretBytes {
    let secret = SecretBytes(count: count)
    try secret.withUnsafeMutableBytes { (bytes) throws(SealError) in try SealCrypto.fillRandom(bytes) }
    return secret
  }

  deinit {
    erase()
    if locked { Kernel.munlock(storage, count) }
    storage.deallocate()
  }

  /// Overwrites the bytes with zeros (a write the compiler may not remove).
  package func erase() { explicit_bzero(storage, count) }

  /// Calls `body` with the bytes, which it must not keep.
  package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
    try body(UnsafeRawBufferPointer(start: storage, count: count))
  }

  /// Calls `body` with the bytes to fill or change, which it must not keep.
  package func withUnsafeMutableBytes<R, E: Error>(
    _ body: (UnsafeMutableRawBufferPointer) throws(E) -> R
  ) throws(E) -> R {
    try body(UnsafeMutableRawBufferPointer(start: storage, count: count))
  }

  /// Whether both hold the same bytes, compared in constant time.
  package func isEqual(to other: SecretBytes) -> Bool {
    guard count == other.count else { return false }
    return withUnsafeBytes { a in other.withUnsafeBytes { b in SealCrypto.constantTimeEqual(a, b) } }
  }
}
