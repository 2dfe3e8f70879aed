import CCrypto

// CommonCrypto's contexts as libcrypto's: each holds the same state as libcrypto's context of its
// digest, so a call converts the context, lets libcrypto run, and converts it back.

/// A CommonCrypto context and libcrypto's context of the same digest, which holds the same state
/// (for SHA-256 and SHA-512 in other fields, and with the digest's length).
protocol LibcryptoContext {
  /// libcrypto's context.
  associatedtype Native
  /// The state as libcrypto's context, for a digest of `digestLength` bytes.
  func native(digestLength: Int32) -> Native
  /// The state libcrypto's `native` holds.
  init(_ native: Native)
}

/// Runs `call` on libcrypto's form of the context at `context` and stores what it left there: 1
/// when libcrypto did, 0 (and nothing called) for a nil context.
func withLibcrypto<Context: LibcryptoContext>(
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
func digest<Context>(
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
  func native(digestLength: Int32) -> MD5_CTX {
    MD5_CTX(A: A, B: B, C: C, D: D, Nl: Nl, Nh: Nh, data: data, num: UInt32(bitPattern: num))
  }
  init(_ native: MD5_CTX) {
    self.init(
      A: native.A, B: native.B, C: native.C, D: native.D, Nl: native.Nl, Nh: native.Nh, data: native.data,
      num: Int32(bitPattern: native.num))
  }
}

extension CC_SHA1state_st: LibcryptoContext {
  func native(digestLength: Int32) -> SHA_CTX {
    SHA_CTX(h0: h0, h1: h1, h2: h2, h3: h3, h4: h4, Nl: Nl, Nh: Nh, data: data, num: UInt32(bitPattern: num))
  }
  init(_ native: SHA_CTX) {
    self.init(
      h0: native.h0, h1: native.h1, h2: native.h2, h3: native.h3, h4: native.h4, Nl: native.Nl, Nh: native.Nh,
      data: native.data, num: Int32(bitPattern: native.num))
  }
}

extension CC_SHA256state_st: LibcryptoContext {
  // libcrypto keeps how many bytes wait in the block (`num`), which the count of bits says too.
  func native(digestLength: Int32) -> SHA256_CTX {
    SHA256_CTX(
      h: hash, Nl: count.0, Nh: count.1, data: wbuf, num: (count.0 >> 3) % UInt32(CC_SHA256_BLOCK_BYTES),
      md_len: UInt32(digestLength))
  }
  init(_ native: SHA256_CTX) {
    self.init(count: (native.Nl, native.Nh), hash: native.h, wbuf: native.data)
  }
}

extension CC_SHA512state_st: LibcryptoContext {
  func native(digestLength: Int32) -> SHA512_CTX {
    SHA512_CTX(
      h: hash, Nl: count.0, Nh: count.1, u: .init(d: wbuf),
      num: UInt32((count.0 >> 3) % UInt64(CC_SHA512_BLOCK_BYTES)), md_len: UInt32(digestLength))
  }
  init(_ native: SHA512_CTX) {
    self.init(count: (native.Nl, native.Nh), hash: native.h, wbuf: native.u.d)
  }
}
