import CCrypto
import Foundation
import ProtFS
import ProtFSSystem

extension PasscodeHash {
  /// PBKDF2 rounds for new passcodes: slow enough to make guessing costly, ~50 ms here.
  public static let defaultIterations = 200_000

  /// Hashes `passcode` with a fresh random salt.
  public static func make(_ passcode: String, iterations: Int = defaultIterations) throws(ProtFSError) -> PasscodeHash {
    try ProtFSError.requireLibcrypto()
    var salt = [UInt8](repeating: 0, count: 16)
    guard protfs_rand_bytes(&salt, Int32(salt.count)) == 1 else {
      throw ProtFSError(.io, "Cannot draw a random salt for the passcode from OpenSSL.")
    }
    let key = try derive(passcode, salt: salt, iterations: iterations)
    return PasscodeHash(
      algorithm: "pbkdf2-hmac-sha256", iterations: iterations, salt: Data(salt).base64EncodedString(),
      hash: Data(key).base64EncodedString())
  }

  /// Whether `passcode` is the one hashed here (compared in constant time).
  public func matches(_ passcode: String) throws(ProtFSError) -> Bool {
    guard algorithm == "pbkdf2-hmac-sha256", (1...10_000_000).contains(iterations),
      let salt = Data(base64Encoded: salt), let expected = Data(base64Encoded: hash), expected.count == 32
    else {
      throw ProtFSError(
        .malformed, "The stored passcode hash is not a PBKDF2-HMAC-SHA256 hash protfs can check.",
        remedy: .resetPasscode)
    }
    try ProtFSError.requireLibcrypto()
    let key = try Self.derive(passcode, salt: Array(salt), iterations: iterations)
    return key.withUnsafeBytes { a in
      Array(expected).withUnsafeBytes { b in protfs_crypto_memcmp(a.baseAddress, b.baseAddress, 32) == 0 }
    }
  }

  private static func derive(_ passcode: String, salt: [UInt8], iterations: Int) throws(ProtFSError) -> [UInt8] {
    var key = [UInt8](repeating: 0, count: 32)
    let bytes = Array(passcode.utf8) + [0]  // never an empty buffer with a nil base address
    let ok = bytes.withUnsafeBufferPointer { pass in
      protfs_pbkdf2_hmac_sha256(
        UnsafeRawPointer(pass.baseAddress!).assumingMemoryBound(to: CChar.self), Int32(pass.count - 1), salt,
        Int32(salt.count), Int32(iterations), Int32(key.count), &key)
    }
    guard ok == 1 else { throw ProtFSError(.io, "OpenSSL could not derive the passcode hash.") }
    return key
  }
}

/// iOS's escalating delays after wrong passcodes: none for the first four, then 1, 5, 15, 15 and 60 minutes.
public enum PasscodeBackoff {
  /// How long unlock attempts are refused after `failures` wrong passcodes in a row.
  public static func delay(afterFailures failures: Int) -> TimeInterval {
    switch failures {
    case ..<5: 0
    case 5: 60
    case 6: 5 * 60
    case 7, 8: 15 * 60
    default: 60 * 60
    }
  }
}
