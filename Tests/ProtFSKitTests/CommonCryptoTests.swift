import Foundation
import ProtFSKit
import Testing

/// CommonCrypto's digests as iOS code calls them, against the test vectors of RFC 1321 (MD5),
/// RFC 3174 (SHA-1) and RFC 6234 (SHA-224, SHA-256, SHA-384, SHA-512).
@Suite struct CommonCryptoTests {
  /// A digest function as CommonDigest.h declares them all.
  typealias OneShot = (UnsafeRawPointer?, CC_LONG, UnsafeMutablePointer<UInt8>?) -> UnsafeMutablePointer<UInt8>?

  /// A message of the RFCs and its digest, in hex.
  struct Vector: Sendable, CustomTestStringConvertible {
    let algorithm: String
    let message: String
    let repeats: Int
    let hex: String
    var testDescription: String { "\(algorithm) of \(message.prefix(16))… ×\(repeats)" }
    init(_ algorithm: String, _ message: String, _ hex: String, repeats: Int = 1) {
      (self.algorithm, self.message, self.hex, self.repeats) = (algorithm, message, hex, repeats)
    }
    var bytes: [UInt8] { Array(String(repeating: message, count: repeats).utf8) }
  }

  static let vectors: [Vector] = [
    Vector("MD5", "", "d41d8cd98f00b204e9800998ecf8427e"),
    Vector("MD5", "a", "0cc175b9c0f1b6a831c399e269772661"),
    Vector("MD5", "abc", "900150983cd24fb0d6963f7d28e17f72"),
    Vector("MD5", "message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
    Vector("MD5", "abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
    Vector("MD5", "1234567890", "57edf4a22be3c955ac49da2e2107b67a", repeats: 8),
    Vector("SHA1", "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
    Vector(
      "SHA1", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
    Vector("SHA1", "a", "34aa973cd4c4daa4f61eeb2bdbad27316534016f", repeats: 1_000_000),
    Vector("SHA224", "abc", "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7"),
    Vector("SHA256", "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
    Vector(
      "SHA256", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    Vector("SHA256", "a", "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0", repeats: 1_000_000),
    Vector(
      "SHA384", "abc",
      "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"),
    Vector(
      "SHA512", "abc",
      "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
        + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"),
    Vector(
      "SHA512",
      "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
      "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
        + "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"),
  ]

  /// The one-shot function of `algorithm` and its digest's length.
  static func oneShot(_ algorithm: String) -> (OneShot, Int32) {
    switch algorithm {
    case "MD5": (CC_MD5, CC_MD5_DIGEST_LENGTH)
    case "SHA1": (CC_SHA1, CC_SHA1_DIGEST_LENGTH)
    case "SHA224": (CC_SHA224, CC_SHA224_DIGEST_LENGTH)
    case "SHA256": (CC_SHA256, CC_SHA256_DIGEST_LENGTH)
    case "SHA384": (CC_SHA384, CC_SHA384_DIGEST_LENGTH)
    default: (CC_SHA512, CC_SHA512_DIGEST_LENGTH)
    }
  }

  static func hex(_ digest: [UInt8]) -> String { digest.map { String(format: "%02x", $0) }.joined() }

  /// The one-shot calls, as iOS code writes them (`&digest` for the output), return the output.
  @Test(arguments: vectors) func theOneShotDigestIsTheRFCs(_ vector: Vector) {
    let (function, length) = Self.oneShot(vector.algorithm)
    let message = vector.bytes
    var digest = [UInt8](repeating: 0, count: Int(length))
    let returned = digest.withUnsafeMutableBufferPointer { output in
      message.withUnsafeBytes { function($0.baseAddress, CC_LONG(message.count), output.baseAddress) }
        == output.baseAddress
    }
    #expect(returned)
    #expect(Self.hex(digest) == vector.hex)
  }

  /// The incremental calls, fed in uneven pieces, give the one-shot digest; a context copied half
  /// way goes on from there on its own, as a C struct does.
  @Test func theIncrementalCallsGiveTheSameDigestsAndContextsAreValues() {
    let message = [UInt8]((0..<100_003).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    let pieces = [0, 1, 63, 64, 65, 127, 128, 129, 1000, 4096]
    func feed(_ update: (UnsafeRawPointer?, CC_LONG) -> Int32) {
      var offset = 0
      var index = 0
      message.withUnsafeBytes { bytes in
        while offset < message.count {
          let count = min(pieces[index % pieces.count], message.count - offset)
          #expect(update(bytes.baseAddress.map { $0 + offset }, CC_LONG(count)) == 1)
          offset += count
          index += 1
        }
      }
    }
    func oneShot(_ algorithm: String) -> String {
      let (function, length) = Self.oneShot(algorithm)
      var digest = [UInt8](repeating: 0, count: Int(length))
      message.withUnsafeBytes { _ = function($0.baseAddress, CC_LONG(message.count), &digest) }
      return Self.hex(digest)
    }

    var md5 = CC_MD5_CTX()
    #expect(CC_MD5_Init(&md5) == 1)
    feed { CC_MD5_Update(&md5, $0, $1) }
    var md5Digest = [UInt8](repeating: 0, count: Int(CC_MD5_DIGEST_LENGTH))
    #expect(CC_MD5_Final(&md5Digest, &md5) == 1)
    #expect(Self.hex(md5Digest) == oneShot("MD5"))

    var sha1 = CC_SHA1_CTX()
    CC_SHA1_Init(&sha1)
    feed { CC_SHA1_Update(&sha1, $0, $1) }
    var sha1Digest = [UInt8](repeating: 0, count: Int(CC_SHA1_DIGEST_LENGTH))
    CC_SHA1_Final(&sha1Digest, &sha1)
    #expect(Self.hex(sha1Digest) == oneShot("SHA1"))

    var sha256 = CC_SHA256_CTX()
    CC_SHA256_Init(&sha256)
    feed { CC_SHA256_Update(&sha256, $0, $1) }
    var sha256Digest = [UInt8](repeating: 0, count: Int(CC_SHA256_DIGEST_LENGTH))
    CC_SHA256_Final(&sha256Digest, &sha256)
    #expect(Self.hex(sha256Digest) == oneShot("SHA256"))

    var sha512 = CC_SHA512_CTX()
    CC_SHA512_Init(&sha512)
    feed { CC_SHA512_Update(&sha512, $0, $1) }
    var sha512Digest = [UInt8](repeating: 0, count: Int(CC_SHA512_DIGEST_LENGTH))
    CC_SHA512_Final(&sha512Digest, &sha512)
    #expect(Self.hex(sha512Digest) == oneShot("SHA512"))

    // "abc" is "ab" then "c": a copy of the context after "ab" finishes "abd" on its own.
    var sha256ab = CC_SHA256_CTX()
    CC_SHA256_Init(&sha256ab)
    CC_SHA256_Update(&sha256ab, "ab", 2)
    var copy = sha256ab
    CC_SHA256_Update(&sha256ab, "c", 1)
    CC_SHA256_Update(&copy, "d", 1)
    var abc = [UInt8](repeating: 0, count: 32)
    var abd = [UInt8](repeating: 0, count: 32)
    CC_SHA256_Final(&abc, &sha256ab)
    CC_SHA256_Final(&abd, &copy)
    #expect(Self.hex(abc) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    var expected = [UInt8](repeating: 0, count: 32)
    CC_SHA256("abd", 3, &expected)
    #expect(abd == expected)
  }

  /// The forms download managers use for cache file names: a `String`'s bytes through
  /// `withUnsafeBytes`, and the digest as a lowercase hex name.
  @Test func aCacheFileNameAsDownloadManagersMakeIt() {
    let url = "https://example.com/video.mp4"
    let data = Data(url.utf8)
    var digest = [UInt8](repeating: 0, count: Int(CC_MD5_DIGEST_LENGTH))
    _ = data.withUnsafeBytes { bytes in CC_MD5(bytes.baseAddress, CC_LONG(data.count), &digest) }
    var fromString = [UInt8](repeating: 0, count: Int(CC_MD5_DIGEST_LENGTH))
    CC_MD5(url, CC_LONG(url.lengthOfBytes(using: .utf8)), &fromString)
    #expect(digest == fromString)
    #expect(digest.map { String(format: "%02x", $0) }.joined().count == 32)
  }

  /// A nil output gives nil, as nothing can be written; an empty input may be nil.
  @Test func nilPointersAreRefusedNotFollowed() {
    #expect(CC_SHA256("abc", 3, nil) == nil)
    var digest = [UInt8](repeating: 0, count: Int(CC_SHA256_DIGEST_LENGTH))
    #expect(CC_SHA256(nil, 0, &digest) != nil)
    #expect(Self.hex(digest) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    #expect(CC_SHA256(nil, 5, &digest) == nil)
    #expect(CC_MD5_Init(nil) == 0)
  }
}
