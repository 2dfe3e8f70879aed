import CCrypto

// CommonCrypto's one-shot digests and their Init/Update/Final steps, on libcrypto's
// (CommonCrypto+Libcrypto.swift).

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
