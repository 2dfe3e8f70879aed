import CCrypto
import Glibc
import ProtFSSystem

/// The few cryptographic operations a sealed device is built from, on OpenSSL's libcrypto.
///
/// Secret results come back as ``SecretBytes``; public ones (wrapped keys, public keys, salts) as
/// arrays. Every function loads libcrypto first and throws when it cannot.
package enum SealCrypto {
  /// Fills `bytes` from OpenSSL's random generator (seeded by the kernel).
  package static func fillRandom(_ bytes: UnsafeMutableRawBufferPointer) throws(SealError) {
    try requireLibcrypto()
    guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
    guard protfs_rand_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(bytes.count)) == 1 else {
      throw .crypto("no random bytes")
    }
  }

  /// `count` public random bytes (a salt, a keybag's UUID).
  package static func randomBytes(_ count: Int) throws(SealError) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    let filled = bytes.withUnsafeMutableBytes { buffer in Result { () throws(SealError) in try fillRandom(buffer) } }
    try filled.get()
    return bytes
  }

  /// Whether `a` and `b` hold the same bytes, in time that depends on their length only.
  package static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
    guard a.count == b.count else { return false }
    guard let x = a.baseAddress, let y = b.baseAddress else { return a.count == 0 }
    return protfs_crypto_memcmp(x, y, a.count) == 0
  }

  /// `key` wrapped with the 32-byte `kek` (AES key wrap, RFC 3394): 8 bytes longer than the key.
  package static func wrap(_ key: SecretBytes, with kek: SecretBytes) throws(SealError) -> [UInt8] {
    try requireLibcrypto()
    precondition(kek.count == 32 && key.count % 8 == 0 && (16...128).contains(key.count))
    var wrapped = [UInt8](repeating: 0, count: key.count + 8)
    let length = kek.withUnsafeBytes { k in
      key.withUnsafeBytes { plain in
        protfs_aes256_wrap(k.bound, plain.bound, Int32(plain.count), &wrapped)
      }
    }
    guard length == wrapped.count else { throw .crypto("AES key wrap failed") }
    return wrapped
  }

  /// The key inside `wrapped`, unwrapped with the 32-byte `kek`; ``SealError/keyMismatch`` when the
  /// integrity check of RFC 3394 fails (another key wrapped it, or the bytes were changed).
  package static func unwrap(_ wrapped: [UInt8], with kek: SecretBytes) throws(SealError) -> SecretBytes {
    try requireLibcrypto()
    precondition(kek.count == 32)
    guard wrapped.count % 8 == 0, (24...136).contains(wrapped.count) else {
      throw .damagedFileKey("a wrapped key of \(wrapped.count) bytes")
    }
    let key = SecretBytes(count: wrapped.count - 8)
    let length = kek.withUnsafeBytes { k in
      key.withUnsafeMutableBytes { out in protfs_aes256_unwrap(k.bound, wrapped, Int32(wrapped.count), out.mutableBound)
      }
    }
    guard length == key.count else { throw .keyMismatch }
    return key
  }

  /// HMAC-SHA256 with `key` of `label`, then `secret`'s bytes, then `context`: 32 secret bytes (a
  /// derived key). The message is assembled in erased memory, since `secret` may be a key.
  package static func hmac(
    _ key: SecretBytes, label: String, secret: SecretBytes? = nil, context: [UInt8] = []
  ) throws(SealError) -> SecretBytes {
    try requireLibcrypto()
    let prefix = Array(label.utf8)
    let message = SecretBytes(count: prefix.count + (secret?.count ?? 0) + context.count + 1)
    message.withUnsafeMutableBytes { out in
      out.copyBytes(from: prefix)
      secret?.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[prefix.count...]).copyMemory(from: $0) }
      UnsafeMutableRawBufferPointer(rebasing: out[(prefix.count + (secret?.count ?? 0))...]).copyBytes(from: context)
    }
    let digest = SecretBytes(count: 32)
    let status = key.withUnsafeBytes { k in
      message.withUnsafeBytes { m in
        digest.withUnsafeMutableBytes { out in
          protfs_hmac_sha256(k.baseAddress, Int32(k.count), m.baseAddress, m.count - 1, out.mutableBound)
        }
      }
    }
    guard status == 0 else { throw .crypto("HMAC-SHA256 failed") }
    return digest
  }

  /// PBKDF2-HMAC-SHA256 of `passcode` with `salt` and `iterations` rounds: a 32-byte key.
  package static func pbkdf2(_ passcode: String, salt: [UInt8], iterations: Int) throws(SealError) -> SecretBytes {
    try requireLibcrypto()
    let key = SecretBytes(count: 32)
    var bytes = Array(passcode.utf8) + [0]  // never an empty buffer with a nil base address
    defer { bytes.withUnsafeMutableBytes { explicit_bzero($0.baseAddress!, $0.count) } }
    let status = bytes.withUnsafeBufferPointer { pass in
      key.withUnsafeMutableBytes { out in
        UnsafeRawPointer(pass.baseAddress!).withMemoryRebound(to: CChar.self, capacity: pass.count) { text in
          protfs_pbkdf2_hmac_sha256(
            text, Int32(pass.count - 1), salt, Int32(salt.count), Int32(iterations), 32, out.mutableBound)
        }
      }
    }
    guard status == 1 else { throw .crypto("PBKDF2 failed") }
    return key
  }

  /// The X25519 public key of a 32-byte private key.
  package static func x25519PublicKey(of privateKey: SecretBytes) throws(SealError) -> [UInt8] {
    try requireLibcrypto()
    var publicKey = [UInt8](repeating: 0, count: 32)
    let status = privateKey.withUnsafeBytes { p in protfs_x25519_public_key(p.bound, &publicKey) }
    guard status == 0 else { throw .crypto("X25519 refused the private key") }
    return publicKey
  }

  /// The X25519 shared secret of `privateKey` and `peerPublicKey`: 32 secret bytes. A peer key of
  /// small order gives none, and ``SealError/keyMismatch``.
  package static func x25519(_ privateKey: SecretBytes, _ peerPublicKey: [UInt8]) throws(SealError) -> SecretBytes {
    try requireLibcrypto()
    guard peerPublicKey.count == 32 else { throw .damagedFileKey("an X25519 key of \(peerPublicKey.count) bytes") }
    let shared = SecretBytes(count: 32)
    let status = privateKey.withUnsafeBytes { p in
      shared.withUnsafeMutableBytes { out in protfs_x25519(p.bound, peerPublicKey, out.mutableBound) }
    }
    guard status == 0 else { throw .keyMismatch }
    return shared
  }

  static func requireLibcrypto() throws(SealError) {
    if let failure = protfs_crypto_load() { throw .crypto("libcrypto cannot be loaded (\(String(cString: failure)))") }
  }
}

extension UnsafeRawBufferPointer {
  var bound: UnsafePointer<UInt8> { baseAddress!.assumingMemoryBound(to: UInt8.self) }
}

extension UnsafeMutableRawBufferPointer {
  var mutableBound: UnsafeMutablePointer<UInt8> { baseAddress!.assumingMemoryBound(to: UInt8.self) }
}
