/// A sealed file's key as it is stored, in the extended attribute ``attributeName`` beside the
/// file's class: a random 64-byte AES-256-XTS key, wrapped with its class's key.
///
/// Layout: a version byte (1), the class code, for class B the 32-byte public half of the
/// ephemeral X25519 key the file's key was wrapped with, then the wrapped key (80 bytes). What is
/// wrapped is the file key followed by the file's inode number (8 bytes, big-endian), so the key
/// wrap's integrity check also proves that this record was made for this file: a record copied
/// from another file, or one whose class byte was changed, fails to unwrap.
///
/// Class B follows Apple's design: the file key is wrapped with a key agreed between a fresh
/// ephemeral X25519 key and the class's public key, so a locked device can still create class-B
/// files (the public key stays in memory), but once a file is closed only the class's private key,
/// evicted at lock, opens it again.
package struct FileKeyRecord: Sendable, Equatable {
  /// The extended attribute that holds the record.
  package static let attributeName = "user.protfs.key"
  /// The length of a file key: two AES-256 keys for XTS.
  package static let fileKeyLength = 64
  static let version: UInt8 = 1
  static let wrappedLength = fileKeyLength + 8 + 8

  /// The class whose key wraps the file key.
  package let code: ProtectionClassCode
  /// Class B's ephemeral public key; empty for the other classes.
  package let ephemeralPublicKey: [UInt8]
  /// The file key and the inode number, wrapped.
  package let wrappedKey: [UInt8]

  /// A fresh file key for the file numbered `inode` in class `code`, and its record. Class B needs
  /// only its public key, so a locked device can create such files.
  package static func make(
    for code: ProtectionClassCode, inode: UInt64, keys: ClassKeys
  ) throws(SealError) -> (FileKeyRecord, SecretBytes) {
    let fileKey = try SecretBytes.random(count: fileKeyLength)
    return (try wrap(fileKey, for: code, inode: inode, keys: keys), fileKey)
  }

  /// `fileKey` wrapped for the file numbered `inode` in class `code`: how a file's key moves to another
  /// class (or another file, an import) without its contents being encrypted again.
  package static func wrap(
    _ fileKey: SecretBytes, for code: ProtectionClassCode, inode: UInt64, keys: ClassKeys
  ) throws(SealError) -> FileKeyRecord {
    precondition(fileKey.count == fileKeyLength)
    let bound = SecretBytes(count: fileKeyLength + 8)
    bound.withUnsafeMutableBytes { out in
      fileKey.withUnsafeBytes { out.copyMemory(from: $0) }
      for i in 0..<8 { out[fileKeyLength + i] = UInt8(truncatingIfNeeded: inode >> (56 - 8 * UInt64(i))) }
    }
    if code == .b {
      let ephemeral = try SecretBytes.random(count: 32)
      let ephemeralPublic = try SealCrypto.x25519PublicKey(of: ephemeral)
      let kek = try classBWrappingKey(
        shared: SealCrypto.x25519(ephemeral, keys.classBPublicKey), ephemeralPublicKey: ephemeralPublic,
        classPublicKey: keys.classBPublicKey)
      return FileKeyRecord(
        code: .b, ephemeralPublicKey: ephemeralPublic, wrappedKey: try SealCrypto.wrap(bound, with: kek))
    }
    return FileKeyRecord(
      code: code, ephemeralPublicKey: [], wrappedKey: try SealCrypto.wrap(bound, with: keys.require(code)))
  }

  /// The file key, unwrapped with the class key in `keys`; the record must have been made for the file
  /// numbered `inode`, else ``SealError/keyMismatch``.
  package func unwrap(inode: UInt64, keys: ClassKeys) throws(SealError) -> SecretBytes {
    let kek: SecretBytes
    if code == .b {
      let shared = try SealCrypto.x25519(try keys.require(.b), ephemeralPublicKey)
      kek = try Self.classBWrappingKey(
        shared: shared, ephemeralPublicKey: ephemeralPublicKey, classPublicKey: keys.classBPublicKey)
    } else {
      kek = try keys.require(code)
    }
    let bound = try SealCrypto.unwrap(wrappedKey, with: kek)
    let boundInode = bound.withUnsafeBytes { bytes in
      (0..<8).reduce(UInt64(0)) { $0 << 8 | UInt64(bytes[Self.fileKeyLength + $1]) }
    }
    guard bound.count == Self.wrappedLength - 8, boundInode == inode else { throw .keyMismatch }
    return bound.withUnsafeBytes { SecretBytes(copying: UnsafeRawBufferPointer(rebasing: $0[..<Self.fileKeyLength])) }
  }

  /// The record's bytes, as stored in ``attributeName``.
  package var encoded: [UInt8] { [Self.version, code.rawValue] + ephemeralPublicKey + wrappedKey }

  /// The record in `bytes`; ``SealError/damagedFileKey(_:)`` says what is wrong when it is not one.
  package init(decoding bytes: [UInt8]) throws(SealError) {
    guard bytes.count >= 2 else { throw .damagedFileKey("its record holds \(bytes.count) bytes") }
    guard bytes[0] == Self.version else { throw .damagedFileKey("its record is of version \(bytes[0])") }
    guard let code = ProtectionClassCode(rawValue: bytes[1]) else {
      throw .damagedFileKey("its record names class \(bytes[1])")
    }
    let publicLength = code == .b ? 32 : 0
    guard bytes.count == 2 + publicLength + Self.wrappedLength else {
      throw .damagedFileKey("its record holds \(bytes.count) bytes, not \(2 + publicLength + Self.wrappedLength)")
    }
    self.init(
      code: code, ephemeralPublicKey: Array(bytes[2..<2 + publicLength]),
      wrappedKey: Array(bytes[(2 + publicLength)...]))
  }

  init(code: ProtectionClassCode, ephemeralPublicKey: [UInt8], wrappedKey: [UInt8]) {
    self.code = code
    self.ephemeralPublicKey = ephemeralPublicKey
    self.wrappedKey = wrappedKey
  }

  /// The key a class-B file key is wrapped with: an HMAC under the agreed secret of both public keys.
  private static func classBWrappingKey(
    shared: SecretBytes, ephemeralPublicKey: [UInt8], classPublicKey: [UInt8]
  ) throws(SealError) -> SecretBytes {
    try SealCrypto.hmac(shared, label: "protfs class B file key", context: ephemeralPublicKey + classPublicKey)
  }
}
