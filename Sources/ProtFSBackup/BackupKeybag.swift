import CCrypto
import Foundation
import ProtFS
import ProtFSSystem

/// The keys of an encrypted iOS backup (docs/import-backup.md): the keybag that `Manifest.plist`
/// records as `BackupKeyBag`, unlocked with the backup's password.
///
/// The keybag is a list of tag, length and value records (a four-letter ASCII tag, a 32-bit
/// big-endian length, the value; a value of four bytes is a number). Its header has `SALT` and
/// `ITER` (and, from iOS 10.2, `DPSL` and `DPIC`); then, from the second `UUID` on, one record
/// group per protection class: `CLAS` (its number), `WRAP` (2: wrapped by the passcode key) and
/// `WPKY` (the class key, AES-wrapped). The passcode key is derived twice: PBKDF2-HMAC-SHA256 of
/// the password with `DPSL` and `DPIC` rounds, then PBKDF2-HMAC-SHA1 of that with `SALT` and
/// `ITER` (only the second for older backups). Each class key is unwrapped with it (RFC 3394,
/// whose check fails for a wrong password); each file's own key (and `Manifest.db`'s) is four
/// bytes naming its class, little-endian, and the key wrapped by that class's key.
package struct BackupKeys: Sendable {
  /// The class keys, by class number.
  let classKeys: [UInt32: [UInt8]]

  /// The most rounds of either derivation protfs runs: iOS asks for 10,000,000 of the first and
  /// 10,000 of the second; a hostile keybag asking for billions would hold the import for hours.
  package static let roundLimit = 100_000_000

  /// The keys of `keybag` (read from `where_`), unlocked with `password`. Throws naming `where_`
  /// when the keybag is not one, and naming `backup` when `password` does not open it.
  package init(keybag: [UInt8], password: [UInt8], where where_: String, backup: String) throws(ProtFSError) {
    func malformed(_ why: String) -> ProtFSError {
      ProtFSError(.malformed, "The backup's keybag in '\(where_)' is damaged: \(why).", path: where_)
    }
    var header: [String: [UInt8]] = [:]
    var classes: [[String: [UInt8]]] = []
    var offset = 0
    var uuids = 0
    while offset < keybag.count {
      guard keybag.count - offset >= 8 else { throw malformed("a record is cut short at byte \(offset)") }
      let tag = String(decoding: keybag[offset..<offset + 4], as: UTF8.self)
      let length = keybag[offset + 4..<offset + 8].reduce(0) { $0 << 8 | Int($1) }
      guard length <= keybag.count - offset - 8 else {
        throw malformed("the record \(tag) at byte \(offset) is longer than the keybag")
      }
      let value = Array(keybag[offset + 8..<offset + 8 + length])
      offset += 8 + length
      if tag == "UUID" {
        uuids += 1
        if uuids >= 2 { classes.append([:]) }
      }
      if classes.isEmpty { header[tag] = value } else { classes[classes.count - 1][tag] = value }
    }
    func numeric(_ value: [UInt8]?) -> Int? {
      guard let value, value.count == 4 else { return nil }
      return value.reduce(0) { $0 << 8 | Int($1) }
    }
    guard let salt = header["SALT"], let iterations = numeric(header["ITER"]), iterations >= 1 else {
      throw malformed("it has no SALT and ITER")
    }
    var secret = password
    if let dpsl = header["DPSL"] {
      guard let dpic = numeric(header["DPIC"]), dpic >= 1 else { throw malformed("it has DPSL without DPIC") }
      guard dpic <= Self.roundLimit else {
        throw malformed("it asks for \(dpic) rounds of PBKDF2, more than the \(Self.roundLimit) protfs runs")
      }
      secret = try Self.derive(secret, salt: dpsl, rounds: dpic, sha1: false)
    }
    guard iterations <= Self.roundLimit else {
      throw malformed("it asks for \(iterations) rounds of PBKDF2, more than the \(Self.roundLimit) protfs runs")
    }
    let passcodeKey = try Self.derive(secret, salt: salt, rounds: iterations, sha1: true)
    var keys: [UInt32: [UInt8]] = [:]
    var wrappedByPasscode = 0
    for record in classes {
      guard let number = numeric(record["CLAS"]), let wrap = numeric(record["WRAP"]), let wrapped = record["WPKY"]
      else { continue }
      // Class keys wrapped by the device's own key (WRAP 1) cannot be opened off the phone.
      guard wrap & 2 != 0 else { continue }
      wrappedByPasscode += 1
      guard let key = Self.unwrap(wrapped, with: passcodeKey) else {
        throw ProtFSError(
          .permissionDenied, "The password does not open the encrypted backup '\(backup)'.", path: backup,
          remedy: .advice("give the password the backup was made with (Finder's \"Encrypt local backup\")"))
      }
      keys[UInt32(number)] = key
    }
    guard wrappedByPasscode > 0 else { throw malformed("it holds no class key wrapped by the password") }
    classKeys = keys
  }

  /// PBKDF2 of `secret` with `salt`: HMAC-SHA1 or HMAC-SHA256, 32 bytes.
  private static func derive(_ secret: [UInt8], salt: [UInt8], rounds: Int, sha1: Bool) throws(ProtFSError)
    -> [UInt8]
  {
    try ProtFSError.requireLibcrypto()
    var key = [UInt8](repeating: 0, count: 32)
    let done = secret.withUnsafeBufferPointer { secret in
      salt.withUnsafeBufferPointer { salt in
        sha1
          ? protfs_pbkdf2_hmac_sha1(
            secret.baseAddress, Int32(secret.count), salt.baseAddress, Int32(salt.count), Int32(rounds), 32, &key)
          : protfs_pbkdf2_hmac_sha256(
            secret.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, Int32(secret.count),
            salt.baseAddress, Int32(salt.count), Int32(rounds), 32, &key)
      }
    }
    guard done == 1 else { throw ProtFSError(.io, "Cannot derive the backup's passcode key (libcrypto failed).") }
    return key
  }

  /// `wrapped` unwrapped with `key` (AES key wrap), or nil when the key does not unwrap it.
  static func unwrap(_ wrapped: [UInt8], with key: [UInt8]) -> [UInt8]? {
    guard key.count == 32, wrapped.count >= 24, wrapped.count <= 72, wrapped.count % 8 == 0 else { return nil }
    var unwrapped = [UInt8](repeating: 0, count: wrapped.count)
    let length = protfs_aes256_unwrap(key, wrapped, Int32(wrapped.count), &unwrapped)
    guard length == wrapped.count - 8 else { return nil }
    return Array(unwrapped.prefix(Int(length)))
  }

  /// The key `protected` names: its first four bytes, little-endian, are the class whose key
  /// wraps the rest. Nil when the class has no key here or its key does not unwrap it.
  package func key(_ protected: [UInt8]) -> [UInt8]? {
    guard protected.count > 4 else { return nil }
    let number = protected[0..<4].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    guard let classKey = classKeys[number], let key = Self.unwrap(Array(protected[4...]), with: classKey),
      key.count == 32
    else { return nil }
    return key
  }
}

/// AES-256-CBC decryption of an encrypted backup's files and database (a zero IV, as iOS writes
/// them), from one descriptor to another in blocks of 1 MiB.
enum BackupCipher {
  enum Failure: Error {
    /// The input is not whole 16-byte blocks: not what iOS writes.
    case notWholeBlocks
    /// Reading, writing or libcrypto failed.
    case failed(ProtFSError)
  }

  /// Decrypts `input` (from its start, by `pread`; its first `limit` bytes at most, whatever it
  /// grows to meanwhile) into `output` (from where it is): the number of bytes written, padding
  /// included.
  static func decrypt(_ input: Int32, into output: Int32, key: [UInt8], path: String, limit: Int64)
    -> Result<Int, Failure>
  {
    decrypt(input, key: key, path: path, limit: limit) { (plain, _) throws(ProtFSError) in
      try AtomicFile.writeAll(output, plain, path: path)
    }
  }

  /// Decrypts `input` as ``decrypt(_:into:key:path:limit:)`` does, handing each run of plaintext
  /// to `write` with its offset in the decrypted file (a sealed file's writer encrypts it again):
  /// the number of bytes handed, padding included. The plaintext buffer is zeroed once done.
  static func decrypt(
    _ input: Int32, key: [UInt8], path: String, limit: Int64,
    write: (UnsafeRawBufferPointer, Int) throws(ProtFSError) -> Void
  ) -> Result<Int, Failure> {
    guard key.count == 32, let context = protfs_aes256_cbc_decryptor(key) else {
      return .failure(.failed(ProtFSError(.io, "Cannot start decrypting '\(path)' (libcrypto failed).", path: path)))
    }
    defer { protfs_cipher_free(context) }
    let chunk = 1 << 20
    let input_ = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk)
    defer { input_.deallocate() }
    let plain = UnsafeMutablePointer<UInt8>.allocate(capacity: chunk + 16)
    defer {
      explicit_bzero(plain, chunk + 16)
      plain.deallocate()
    }
    var offset: off_t = 0
    while Int64(offset) < limit {
      let asked = Int(min(Int64(chunk), limit - Int64(offset)))
      let count: Int
      switch Kernel.pread(input, input_, asked, offset) {
      case .success(let read): count = read
      case .failure(let e): return .failure(.failed(ProtFSError.system("read the encrypted", path: path, errno: e)))
      }
      if count == 0 { break }
      // A read that ends within a block is read again from the block's start: only the file's
      // end may leave less than a block, and that is no AES-CBC output.
      let whole = count - count % 16
      let start = Int(offset)
      offset += off_t(whole)
      if whole == 0 { return .failure(.notWholeBlocks) }
      let produced = protfs_cipher_update(context, input_, Int32(whole), plain)
      guard produced == whole else {
        return .failure(.failed(ProtFSError(.io, "Cannot decrypt '\(path)' (libcrypto failed).", path: path)))
      }
      do {
        try write(UnsafeRawBufferPointer(start: plain, count: whole), start)
      } catch {
        return .failure(.failed(error))
      }
    }
    return .success(Int(offset))
  }
}
