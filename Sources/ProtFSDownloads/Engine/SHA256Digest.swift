import CCrypto

/// An incremental SHA-256, through libcrypto (which uses the CPU's SHA instructions).
///
/// Used from one thread at a time: the engine thread while bytes arrive, then the finisher.
///
/// `@unchecked Sendable`: the libcrypto context is used by one thread at a time, handed from the
/// engine thread to the finisher with the transfer that owns it.
package final class SHA256Digest: @unchecked Sendable {
  private let context: OpaquePointer

  package init() {
    // The context is only missing when out of memory, where nothing else could go on either.
    context = protfs_sha256_context_new()!
  }

  deinit { protfs_sha256_context_free(context) }

  /// Starts over, for a transfer that restarts from byte 0.
  package func reset() { protfs_sha256_context_reset(context) }

  /// Adds `count` bytes.
  package func update(_ bytes: UnsafeRawPointer, count: Int) { protfs_sha256_context_update(context, bytes, count) }

  /// The digest as lowercase hex; the digest cannot be updated afterwards.
  package func finalizeHex() -> String {
    var out = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    protfs_sha256_context_final(context, &out, &length)
    let digits = Array("0123456789abcdef".utf8)
    var text = [UInt8]()
    text.reserveCapacity(64)
    for byte in out.prefix(Int(length)) {
      text.append(digits[Int(byte >> 4)])
      text.append(digits[Int(byte & 0xF)])
    }
    return String(decoding: text, as: UTF8.self)
  }
}
