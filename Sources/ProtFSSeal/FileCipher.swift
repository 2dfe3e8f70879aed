import CCrypto
import Glibc
import Synchronization

/// A sealed file's contents cipher: AES-256-XTS per 4 KiB block with the file's key, as APFS
/// encrypts, the block's index in the file as the tweak.
///
/// Encryption keeps lengths: the ciphertext of a file is as long as its plaintext, so sizes, sparse
/// ranges and `stat` need no translation. XTS encrypts any data unit of 16 bytes or more (ciphertext
/// stealing covers a partial last AES block). A last block shorter than 16 bytes is combined with a
/// keystream, the XTS encryption of zeros under the block's tweak with a marker bit set: it hides the
/// bytes, though rewriting such a tail in place shows how the versions differ, as XTS shows which
/// blocks are unchanged. XTS authenticates nothing; see docs/sealed.md for what detects tampering.
///
/// A cipher keeps the OpenSSL contexts it made (its key expanded, one per direction and per thread
/// using it at once) for its next calls, and frees them when its last copy goes: a file's reads and
/// writes pay for the key schedule once, not per call.
package struct FileCipher: Sendable {
  /// The size of a data unit.
  package static let blockSize = 4096

  private let contexts: XTSContexts

  /// A cipher with `key`, a 64-byte file key.
  package init(key: SecretBytes) {
    precondition(key.count == FileKeyRecord.fileKeyLength)
    contexts = XTSContexts(key: key)
  }

  /// Encrypts `buffer` in place, whose first byte is at `offset` in the file (a multiple of
  /// ``blockSize``); the last block may be partial (the file's end).
  package func encrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SealError) {
    try crypt(buffer, at: offset, encrypting: true)
  }

  /// Encrypts `plaintext` into `buffer`, as long, as ``encrypt(_:at:)`` does in place: the
  /// plaintext is read once, where a copy into the buffer first would read it twice.
  package func encrypt(
    _ plaintext: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer, at offset: UInt64
  ) throws(SealError) {
    precondition(plaintext.count == buffer.count)
    try crypt(buffer, from: plaintext.baseAddress, at: offset, encrypting: true)
  }

  /// Decrypts `buffer` in place, as ``encrypt(_:at:)`` encrypted it.
  package func decrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SealError) {
    try crypt(buffer, at: offset, encrypting: false)
  }

  /// Encrypts or decrypts into `buffer` its own bytes, or as many from `source` when given.
  private func crypt(
    _ buffer: UnsafeMutableRawBufferPointer, from source: UnsafeRawPointer? = nil, at offset: UInt64, encrypting: Bool
  ) throws(SealError) {
    precondition(offset % UInt64(Self.blockSize) == 0, "a sealed file is encrypted in whole blocks")
    guard let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), !buffer.isEmpty else { return }
    let input = source?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(base)
    try SealCrypto.requireLibcrypto()
    // XTS needs a context per direction; the tail's keystream is always an encryption.
    let cipher = try contexts.take(encrypting: encrypting)
    defer { contexts.giveBack(cipher, encrypting: encrypting) }
    var start = 0
    var index = offset / UInt64(Self.blockSize)
    while start < buffer.count {
      let count = min(Self.blockSize, buffer.count - start)
      if count >= 16 {
        var tweak = Self.tweak(index, tail: false)
        let status = withUnsafeBytes(of: &tweak) { t in
          protfs_aes256_xts(cipher, t.bound, input + start, Int32(count), base + start)
        }
        guard status == 0 else { throw .crypto("AES-XTS failed") }
      } else if encrypting {
        if source != nil { (base + start).update(from: input + start, count: count) }
        try Self.xorTail(base + start, count: count, index: index, cipher)
      } else {
        if source != nil { (base + start).update(from: input + start, count: count) }
        let encryptor = try contexts.take(encrypting: true)
        defer { contexts.giveBack(encryptor, encrypting: true) }
        try Self.xorTail(base + start, count: count, index: index, encryptor)
      }
      start += count
      index += 1
    }
  }

  /// Combines the `count` (< 16) bytes at `bytes` with block `index`'s tail keystream, made with the
  /// encrypting context `cipher`.
  private static func xorTail(_ bytes: UnsafeMutablePointer<UInt8>, count: Int, index: UInt64, _ cipher: OpaquePointer)
    throws(SealError)
  {
    var tweak = tweak(index, tail: true)
    // The keystream, on the stack and zeroed after use (a 16-byte data unit of zeros, encrypted).
    var stream: (UInt64, UInt64) = (0, 0)
    defer { withUnsafeMutableBytes(of: &stream) { explicit_bzero($0.baseAddress!, $0.count) } }
    let status = withUnsafeBytes(of: &tweak) { t in
      withUnsafeMutableBytes(of: &stream) { s in protfs_aes256_xts(cipher, t.bound, s.mutableBound, 16, s.mutableBound)
      }
    }
    guard status == 0 else { throw .crypto("AES-XTS failed") }
    withUnsafeBytes(of: &stream) { s in for i in 0..<count { bytes[i] ^= s[i] } }
  }

  /// The tweak of block `index`: the index, little-endian, as the sector number of IEEE 1619; the
  /// top byte set for a short tail's keystream (no file reaches 2^56 blocks).
  private static func tweak(_ index: UInt64, tail: Bool) -> (UInt64, UInt64) {
    (index.littleEndian, (tail ? UInt64(0x80) << 56 : 0).littleEndian)
  }
}

/// The OpenSSL XTS contexts of one file key, kept for reuse. An EVP context serves one thread at a
/// time: a caller takes one (made when none is free) and gives it back; a few are kept per
/// direction, the rest freed.
private final class XTSContexts: Sendable {
  /// How many free contexts are kept per direction (one per thread that uses the file at once).
  static let kept = 4

  /// The key (new contexts are made from it) and the free contexts, encrypting and decrypting.
  private let state: Mutex<(key: SecretBytes, encrypting: [XTSContext], decrypting: [XTSContext])>

  init(key: SecretBytes) {
    state = Mutex((key, [], []))
  }

  deinit {
    state.withLock { state in
      for context in state.encrypting + state.decrypting { protfs_cipher_free(context.pointer) }
    }
  }

  /// A context of the given direction, for the caller alone until ``giveBack(_:encrypting:)``.
  func take(encrypting: Bool) throws(SealError) -> OpaquePointer {
    let (free, key) = state.withLock { state -> (XTSContext?, SecretBytes) in
      let context = encrypting ? state.encrypting.popLast() : state.decrypting.popLast()
      return (context, state.key)
    }
    if let free { return free.pointer }
    let context = key.withUnsafeBytes { protfs_aes256_xts_new($0.bound, encrypting ? 1 : 0) }
    guard let context else { throw .crypto("OpenSSL refused the file's XTS key") }
    return context
  }

  /// Returns `context`, taken with ``take(encrypting:)``, for the next caller.
  func giveBack(_ context: OpaquePointer, encrypting: Bool) {
    let kept = state.withLock { state -> Bool in
      if encrypting, state.encrypting.count < Self.kept {
        state.encrypting.append(XTSContext(pointer: context))
        return true
      } else if !encrypting, state.decrypting.count < Self.kept {
        state.decrypting.append(XTSContext(pointer: context))
        return true
      }
      return false
    }
    if !kept { protfs_cipher_free(context) }
  }
}

/// An OpenSSL context in the pool of ``XTSContexts``.
// `@unchecked Sendable`: a context is used by one thread at a time, the one that took it from the
// pool; the pool's lock hands it from one thread to the next.
private struct XTSContext: @unchecked Sendable {
  let pointer: OpaquePointer
}
