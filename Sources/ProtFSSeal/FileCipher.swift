import CCrypto

/// A sealed file's contents cipher: AES-256-XTS per 4 KiB block with the file's key, as APFS
/// encrypts, the block's index in the file as the tweak.
///
/// Encryption keeps lengths: the ciphertext of a file is as long as its plaintext, so sizes, sparse
/// ranges and `stat` need no translation. XTS encrypts any data unit of 16 bytes or more (ciphertext
/// stealing covers a partial last AES block). A last block shorter than 16 bytes is combined with a
/// keystream, the XTS encryption of zeros under the block's tweak with a marker bit set: it hides the
/// bytes, though rewriting such a tail in place shows how the versions differ, as XTS shows which
/// blocks are unchanged. XTS authenticates nothing; see docs/sealed.md for what detects tampering.
package struct FileCipher: Sendable {
  /// The size of a data unit.
  package static let blockSize = 4096

  private let key: SecretBytes

  /// A cipher with `key`, a 64-byte file key.
  package init(key: SecretBytes) {
    precondition(key.count == FileKeyRecord.fileKeyLength)
    self.key = key
  }

  /// Encrypts `buffer` in place, whose first byte is at `offset` in the file (a multiple of
  /// ``blockSize``); the last block may be partial (the file's end).
  package func encrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SealError) {
    try crypt(buffer, at: offset, encrypting: true)
  }

  /// Decrypts `buffer` in place, as ``encrypt(_:at:)`` encrypted it.
  package func decrypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64) throws(SealError) {
    try crypt(buffer, at: offset, encrypting: false)
  }

  private func crypt(_ buffer: UnsafeMutableRawBufferPointer, at offset: UInt64, encrypting: Bool) throws(SealError) {
    precondition(offset % UInt64(Self.blockSize) == 0, "a sealed file is encrypted in whole blocks")
    guard let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self), !buffer.isEmpty else { return }
    try SealCrypto.requireLibcrypto()
    // XTS needs a context per direction; the tail's keystream is always an encryption.
    let cipher = try context(encrypting: encrypting)
    defer { protfs_cipher_free(cipher) }
    var start = 0
    var index = offset / UInt64(Self.blockSize)
    while start < buffer.count {
      let count = min(Self.blockSize, buffer.count - start)
      if count >= 16 {
        var tweak = Self.tweak(index, tail: false)
        guard protfs_aes256_xts(cipher, &tweak, base + start, Int32(count), base + start) == 0 else {
          throw .crypto("AES-XTS failed")
        }
      } else {
        try xorTail(base + start, count: count, index: index)
      }
      start += count
      index += 1
    }
  }

  private func xorTail(_ bytes: UnsafeMutablePointer<UInt8>, count: Int, index: UInt64) throws(SealError) {
    let cipher = try context(encrypting: true)
    defer { protfs_cipher_free(cipher) }
    var tweak = Self.tweak(index, tail: true)
    let stream = SecretBytes(count: 16)
    let status = stream.withUnsafeMutableBytes { out in
      protfs_aes256_xts(cipher, &tweak, out.mutableBound, 16, out.mutableBound)
    }
    guard status == 0 else { throw .crypto("AES-XTS failed") }
    stream.withUnsafeBytes { s in for i in 0..<count { bytes[i] ^= s[i] } }
  }

  private func context(encrypting: Bool) throws(SealError) -> OpaquePointer {
    let context = key.withUnsafeBytes { protfs_aes256_xts_new($0.bound, encrypting ? 1 : 0) }
    guard let context else { throw .crypto("OpenSSL refused the file's XTS key") }
    return context
  }

  /// The tweak of block `index`: the index, little-endian, as the sector number of IEEE 1619; the
  /// top byte set for a short tail's keystream (no file reaches 2^56 blocks).
  private static func tweak(_ index: UInt64, tail: Bool) -> [UInt8] {
    var tweak = (0..<8).map { UInt8(truncatingIfNeeded: index >> (8 * UInt64($0))) } + [UInt8](repeating: 0, count: 8)
    if tail { tweak[15] = 0x80 }
    return tweak
  }
}
