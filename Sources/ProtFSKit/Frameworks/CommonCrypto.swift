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
  fileprivate init(
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
  fileprivate init(
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
  fileprivate init(
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
  fileprivate init(
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
fileprivate typealias Block = (
  CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG, CC_LONG,
  CC_LONG, CC_LONG, CC_LONG, CC_LONG
)
/// Sixteen 64-bit words: a block of SHA-512 input.
fileprivate typealias Block64 = (
  CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64,
  CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64, CC_LONG64
)
private let zeroBlock: Block = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

// MARK: - MD5

/// Computes the MD5 digest of the `len` bytes at `data` into `md` (`CC_MD5_DIGEST_LENGTH` bytes);
/// returns `md`. MD5 is broken for security: use it for names and checksums only, as iOS warns.
@discardableResult
public func CC_MD5(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_MD5_CTX()
  return digest(&context, data, len, into: md, CC_MD5_Init, CC_MD5_Update, CC_MD5_Final)
}

/// Starts an MD5 computation in `c`; 1.
@discardableResult
public func CC_MD5_Init(_ c: UnsafeMutablePointer<CC_MD5_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_md5_init($0) }
}

/// Adds the `len` bytes at `data` to the MD5 computation in `c`; 1.
@discardableResult
public func CC_MD5_Update(_ c: UnsafeMutablePointer<CC_MD5_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG) -> Int32 {
  guard data != nil || len == 0 else { return 0 }
  return withLibcrypto(c) { protfs_md5_update($0, data, Int(len)) }
}

/// Ends the MD5 computation in `c`, its digest into `md` (`CC_MD5_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_MD5_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_MD5_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c) { protfs_md5_final(md, $0) }
}

// MARK: - SHA-1

/// Computes the SHA-1 digest of the `len` bytes at `data` into `md` (`CC_SHA1_DIGEST_LENGTH`
/// bytes); returns `md`.
@discardableResult
public func CC_SHA1(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_SHA1_CTX()
  return digest(&context, data, len, into: md, CC_SHA1_Init, CC_SHA1_Update, CC_SHA1_Final)
}

/// Starts a SHA-1 computation in `c`; 1.
@discardableResult
public func CC_SHA1_Init(_ c: UnsafeMutablePointer<CC_SHA1_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_sha1_init($0) }
}

/// Adds the `len` bytes at `data` to the SHA-1 computation in `c`; 1.
@discardableResult
public func CC_SHA1_Update(_ c: UnsafeMutablePointer<CC_SHA1_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG)
  -> Int32
{
  guard data != nil || len == 0 else { return 0 }
  return withLibcrypto(c) { protfs_sha1_update($0, data, Int(len)) }
}

/// Ends the SHA-1 computation in `c`, its digest into `md` (`CC_SHA1_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_SHA1_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_SHA1_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c) { protfs_sha1_final(md, $0) }
}

// MARK: - SHA-224 and SHA-256

/// Computes the SHA-224 digest of the `len` bytes at `data` into `md` (`CC_SHA224_DIGEST_LENGTH`
/// bytes); returns `md`.
@discardableResult
public func CC_SHA224(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_SHA256_CTX()
  return digest(&context, data, len, into: md, CC_SHA224_Init, CC_SHA224_Update, CC_SHA224_Final)
}

/// Starts a SHA-224 computation in `c`; 1.
@discardableResult
public func CC_SHA224_Init(_ c: UnsafeMutablePointer<CC_SHA256_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_sha224_init($0) }
}

/// Adds the `len` bytes at `data` to the SHA-224 computation in `c`; 1.
@discardableResult
public func CC_SHA224_Update(_ c: UnsafeMutablePointer<CC_SHA256_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG)
  -> Int32
{
  CC_SHA256_Update(c, data, len)
}

/// Ends the SHA-224 computation in `c`, its digest into `md` (`CC_SHA224_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_SHA224_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_SHA256_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c, digestLength: CC_SHA224_DIGEST_LENGTH) { protfs_sha256_final(md, $0) }
}

/// Computes the SHA-256 digest of the `len` bytes at `data` into `md` (`CC_SHA256_DIGEST_LENGTH`
/// bytes); returns `md`.
@discardableResult
public func CC_SHA256(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_SHA256_CTX()
  return digest(&context, data, len, into: md, CC_SHA256_Init, CC_SHA256_Update, CC_SHA256_Final)
}

/// Starts a SHA-256 computation in `c`; 1.
@discardableResult
public func CC_SHA256_Init(_ c: UnsafeMutablePointer<CC_SHA256_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_sha256_init($0) }
}

/// Adds the `len` bytes at `data` to the SHA-256 computation in `c`; 1.
@discardableResult
public func CC_SHA256_Update(_ c: UnsafeMutablePointer<CC_SHA256_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG)
  -> Int32
{
  guard data != nil || len == 0 else { return 0 }
  return withLibcrypto(c) { protfs_sha256_update($0, data, Int(len)) }
}

/// Ends the SHA-256 computation in `c`, its digest into `md` (`CC_SHA256_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_SHA256_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_SHA256_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c, digestLength: CC_SHA256_DIGEST_LENGTH) { protfs_sha256_final(md, $0) }
}

// MARK: - SHA-384 and SHA-512

/// Computes the SHA-384 digest of the `len` bytes at `data` into `md` (`CC_SHA384_DIGEST_LENGTH`
/// bytes); returns `md`.
@discardableResult
public func CC_SHA384(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_SHA512_CTX()
  return digest(&context, data, len, into: md, CC_SHA384_Init, CC_SHA384_Update, CC_SHA384_Final)
}

/// Starts a SHA-384 computation in `c`; 1.
@discardableResult
public func CC_SHA384_Init(_ c: UnsafeMutablePointer<CC_SHA512_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_sha384_init($0) }
}

/// Adds the `len` bytes at `data` to the SHA-384 computation in `c`; 1.
@discardableResult
public func CC_SHA384_Update(_ c: UnsafeMutablePointer<CC_SHA512_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG)
  -> Int32
{
  CC_SHA512_Update(c, data, len)
}

/// Ends the SHA-384 computation in `c`, its digest into `md` (`CC_SHA384_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_SHA384_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_SHA512_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c, digestLength: CC_SHA384_DIGEST_LENGTH) { protfs_sha512_final(md, $0) }
}

/// Computes the SHA-512 digest of the `len` bytes at `data` into `md` (`CC_SHA512_DIGEST_LENGTH`
/// bytes); returns `md`.
@discardableResult
public func CC_SHA512(_ data: UnsafeRawPointer!, _ len: CC_LONG, _ md: UnsafeMutablePointer<UInt8>!)
  -> UnsafeMutablePointer<UInt8>!
{
  var context = CC_SHA512_CTX()
  return digest(&context, data, len, into: md, CC_SHA512_Init, CC_SHA512_Update, CC_SHA512_Final)
}

/// Starts a SHA-512 computation in `c`; 1.
@discardableResult
public func CC_SHA512_Init(_ c: UnsafeMutablePointer<CC_SHA512_CTX>!) -> Int32 {
  withLibcrypto(c) { protfs_sha512_init($0) }
}

/// Adds the `len` bytes at `data` to the SHA-512 computation in `c`; 1.
@discardableResult
public func CC_SHA512_Update(_ c: UnsafeMutablePointer<CC_SHA512_CTX>!, _ data: UnsafeRawPointer!, _ len: CC_LONG)
  -> Int32
{
  guard data != nil || len == 0 else { return 0 }
  return withLibcrypto(c) { protfs_sha512_update($0, data, Int(len)) }
}

/// Ends the SHA-512 computation in `c`, its digest into `md` (`CC_SHA512_DIGEST_LENGTH` bytes); 1.
@discardableResult
public func CC_SHA512_Final(_ md: UnsafeMutablePointer<UInt8>!, _ c: UnsafeMutablePointer<CC_SHA512_CTX>!) -> Int32 {
  guard let md else { return 0 }
  return withLibcrypto(c, digestLength: CC_SHA512_DIGEST_LENGTH) { protfs_sha512_final(md, $0) }
}

// MARK: - CommonCrypto's contexts as libcrypto's

/// A CommonCrypto context and libcrypto's context of the same digest, which holds the same state
/// (for SHA-256 and SHA-512 in other fields, and with the digest's length).
private protocol LibcryptoContext {
  /// libcrypto's context.
  associatedtype Native
  /// The state as libcrypto's context, for a digest of `digestLength` bytes.
  func native(digestLength: Int32) -> Native
  /// The state libcrypto's `native` holds.
  init(_ native: Native)
}

/// Runs `call` on libcrypto's form of the context at `context` and stores what it left there: 1
/// when libcrypto did, 0 (and nothing called) for a nil context.
private func withLibcrypto<Context: LibcryptoContext>(
  _ context: UnsafeMutablePointer<Context>?, digestLength: Int32 = 0,
  _ call: (UnsafeMutablePointer<Context.Native>) -> Int32
) -> Int32 {
  guard let context else { return 0 }
  var native = context.pointee.native(digestLength: digestLength)
  let result = call(&native)
  context.pointee = Context(native)
  return result
}

/// The one-shot form of a digest: `initialise`, `update` and `finish` a fresh `context` over the
/// `count` bytes at `data`, into `md`; `md`, or nil when `md` is nil or a step failed.
private func digest<Context>(
  _ context: inout Context, _ data: UnsafeRawPointer?, _ count: CC_LONG, into md: UnsafeMutablePointer<UInt8>?,
  _ initialise: (UnsafeMutablePointer<Context>?) -> Int32,
  _ update: (UnsafeMutablePointer<Context>?, UnsafeRawPointer?, CC_LONG) -> Int32,
  _ finish: (UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<Context>?) -> Int32
) -> UnsafeMutablePointer<UInt8>? {
  guard let md, initialise(&context) == 1, update(&context, data, count) == 1, finish(md, &context) == 1 else {
    return nil
  }
  return md
}

extension CC_MD5state_st: LibcryptoContext {
  fileprivate func native(digestLength: Int32) -> MD5_CTX {
    MD5_CTX(A: A, B: B, C: C, D: D, Nl: Nl, Nh: Nh, data: data, num: UInt32(bitPattern: num))
  }
  fileprivate init(_ native: MD5_CTX) {
    self.init(
      A: native.A, B: native.B, C: native.C, D: native.D, Nl: native.Nl, Nh: native.Nh, data: native.data,
      num: Int32(bitPattern: native.num))
  }
}

extension CC_SHA1state_st: LibcryptoContext {
  fileprivate func native(digestLength: Int32) -> SHA_CTX {
    SHA_CTX(h0: h0, h1: h1, h2: h2, h3: h3, h4: h4, Nl: Nl, Nh: Nh, data: data, num: UInt32(bitPattern: num))
  }
  fileprivate init(_ native: SHA_CTX) {
    self.init(
      h0: native.h0, h1: native.h1, h2: native.h2, h3: native.h3, h4: native.h4, Nl: native.Nl, Nh: native.Nh,
      data: native.data, num: Int32(bitPattern: native.num))
  }
}

extension CC_SHA256state_st: LibcryptoContext {
  // libcrypto keeps how many bytes wait in the block (`num`), which the count of bits says too.
  fileprivate func native(digestLength: Int32) -> SHA256_CTX {
    SHA256_CTX(
      h: hash, Nl: count.0, Nh: count.1, data: wbuf, num: (count.0 >> 3) % UInt32(CC_SHA256_BLOCK_BYTES),
      md_len: UInt32(digestLength))
  }
  fileprivate init(_ native: SHA256_CTX) {
    self.init(count: (native.Nl, native.Nh), hash: native.h, wbuf: native.data)
  }
}

extension CC_SHA512state_st: LibcryptoContext {
  fileprivate func native(digestLength: Int32) -> SHA512_CTX {
    SHA512_CTX(
      h: hash, Nl: count.0, Nh: count.1, u: .init(d: wbuf),
      num: UInt32((count.0 >> 3) % UInt64(CC_SHA512_BLOCK_BYTES)), md_len: UInt32(digestLength))
  }
  fileprivate init(_ native: SHA512_CTX) {
    self.init(count: (native.Nl, native.Nh), hash: native.h, wbuf: native.u.d)
  }
}
