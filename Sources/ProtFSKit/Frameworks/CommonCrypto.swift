import CCrypto

// CommonCrypto's message digests, `import CommonCrypto` becoming `import ProtFSKit`: the names,
// signatures and contexts of CommonDigest.h, computed by libcrypto (loaded when first used,
// Sources/CCrypto). As imported C functions, the calls' results may be ignored, and a context is a
// value: a copy goes on from where the original was.

/// A length, as CommonCrypto counts bytes (`uint32_t`).
public typealias CC_LONG = UInt32
/// A 64-bit word of a SHA-384 or SHA-512 context (`uint64_t`).
public typealias CC_LONG64 = UInt64

/// The length of an MD5 digest, in bytes.
public let CC_MD5_DIGEST_LENGTH: Int32 = 16
/// The length of an MD5 block, in bytes.
public let CC_MD5_BLOCK_BYTES: Int32 = 64
/// The length of a SHA-1 digest, in bytes.
public let CC_SHA1_DIGEST_LENGTH: Int32 = 20
/// The length of a SHA-1 block, in bytes.
public let CC_SHA1_BLOCK_BYTES: Int32 = 64
/// The length of a SHA-224 digest, in bytes.
public let CC_SHA224_DIGEST_LENGTH: Int32 = 28
/// The length of a SHA-256 digest, in bytes.
public let CC_SHA256_DIGEST_LENGTH: Int32 = 32
/// The length of a SHA-256 (and SHA-224) block, in bytes.
public let CC_SHA256_BLOCK_BYTES: Int32 = 64
/// The length of a SHA-384 digest, in bytes.
public let CC_SHA384_DIGEST_LENGTH: Int32 = 48
/// The length of a SHA-512 digest, in bytes.
public let CC_SHA512_DIGEST_LENGTH: Int32 = 64
/// The length of a SHA-512 (and SHA-384) block, in bytes.
public let CC_SHA512_BLOCK_BYTES: Int32 = 128

/// An MD5 computation in progress, as CommonCrypto's `CC_MD5_CTX` (the same fields).
public struct CC_MD5state_st: Sendable {
  /// The chaining value's first word.
  public var A: CC_LONG
  /// Its second.
  public var B: CC_LONG
  /// Its third.
  public var C: CC_LONG
  /// Its fourth.
  public var D: CC_LONG
  /// The count of bits hashed, low word.
  public var Nl: CC_LONG
  /// Its high word.
  public var Nh: CC_LONG
  /// The bytes of the block not hashed yet.
  public var data:
    (
      CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG,
      CC_LONG, CC_LONG, CC_LONG, CC_LONG
    )
  /// How many of them there are.
  public var num: Int32

  /// A context to give `CC_MD5_Init` (all zero, as C's `CC_MD5_CTX context = {0}`).
  public init() { self.init(A: 0, B: 0, C: 0, D: 0, Nl: 0, Nh: 0, data: zeroBlock, num: 0) }

  /// A context with these fields.
  init(
    A: CC_LONG, B: CC_LONG, C: CC_LONG, D: CC_LONG, Nl: CC_LONG, Nh: CC_LONG, data: Block, num: Int32
  ) {
    (self.A, self.B, self.C, self.D, self.Nl, self.Nh, self.data, self.num) = (A, B, C, D, Nl, Nh, data, num)
  }
}

/// An MD5 computation in progress.
public typealias CC_MD5_CTX = CC_MD5state_st

/// A SHA-1 computation in progress, as CommonCrypto's `CC_SHA1_CTX` (the same fields).
public struct CC_SHA1state_st: Sendable {
  /// The chaining value's first word.
  public var h0: CC_LONG
  /// Its second.
  public var h1: CC_LONG
  /// Its third.
  public var h2: CC_LONG
  /// Its fourth.
  public var h3: CC_LONG
  /// Its fifth.
  public var h4: CC_LONG
  /// The count of bits hashed, low word.
  public var Nl: CC_LONG
  /// Its high word.
  public var Nh: CC_LONG
  /// The bytes of the block not hashed yet.
  public var data:
    (
      CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG,
      CC_LONG, CC_LONG, CC_LONG, CC_LONG
    )
  /// How many of them there are.
  public var num: Int32

  /// A context to give `CC_SHA1_Init` (all zero).
  public init() { self.init(h0: 0, h1: 0, h2: 0, h3: 0, h4: 0, Nl: 0, Nh: 0, data: zeroBlock, num: 0) }

  /// A context with these fields.
  init(
    h0: CC_LONG, h1: CC_LONG, h2: CC_LONG, h3: CC_LONG, h4: CC_LONG, Nl: CC_LONG, Nh: CC_LONG, data: Block,
    num: Int32
  ) {
    (self.h0, self.h1, self.h2, self.h3, self.h4) = (h0, h1, h2, h3, h4)
    (self.Nl, self.Nh, self.data, self.num) = (Nl, Nh, data, num)
  }
}

/// A SHA-1 computation in progress.
public typealias CC_SHA1_CTX = CC_SHA1state_st

/// A SHA-256 or SHA-224 computation in progress, as CommonCrypto's `CC_SHA256_CTX` (the same
/// fields).
public struct CC_SHA256state_st: Sendable {
  /// The count of bits hashed, low word first.
  public var count: (CC_LONG, CC_LONG)
  /// The chaining value.
  public var hash: (CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG)
  /// The bytes of the block not hashed yet (as many as `count` says past a whole block).
  public var wbuf:
    (
      CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG,
      CC_LONG, CC_LONG, CC_LONG, CC_LONG
    )

  /// A context to give `CC_SHA256_Init` or `CC_SHA224_Init` (all zero).
  public init() { self.init(count: (0, 0), hash: (0, 0, 0, 0, 0, 0, 0, 0), wbuf: zeroBlock) }

  /// A context with these fields.
  init(
    count: (CC_LONG, CC_LONG), hash: (CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG),
    wbuf: Block
  ) {
    (self.count, self.hash, self.wbuf) = (count, hash, wbuf)
  }
}

/// A SHA-256 or SHA-224 computation in progress.
public typealias CC_SHA256_CTX = CC_SHA256state_st

/// A SHA-512 or SHA-384 computation in progress, as CommonCrypto's `CC_SHA512_CTX` (the same
/// fields).
public struct CC_SHA512state_st: Sendable {
  /// The count of bits hashed, low word first.
  public var count: (CC_LONG64, CC_LONG64)
  /// The chaining value.
  public var hash: (CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64)
  /// The bytes of the block not hashed yet (as many as `count` says past a whole block).
  public var wbuf:
    (
      CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64,
      CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64
    )

  /// A context to give `CC_SHA512_Init` or `CC_SHA384_Init` (all zero).
  public init() {
    self.init(count: (0, 0), hash: (0, 0, 0, 0, 0, 0, 0, 0), wbuf: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
  }

  /// A context with these fields.
  init(
    count: (CC_LONG64, CC_LONG64),
    hash: (CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64),
    wbuf: Block64
  ) {
    (self.count, self.hash, self.wbuf) = (count, hash, wbuf)
  }
}

/// A SHA-512 or SHA-384 computation in progress.
public typealias CC_SHA512_CTX = CC_SHA512state_st

/// Sixteen 32-bit words: a block of MD5, SHA-1 or SHA-256 input.
typealias Block = (
  CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG,
  CC_LONG, CC_LONG, CC_LONG, CC_LONG
)
/// Sixteen 64-bit words: a block of SHA-512 input.
typealias Block64 = (
  CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64,
  CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64
)
private let zeroBlock: Block = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
