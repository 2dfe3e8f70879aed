import CCrypto
import Foundation
import ProtFSSystem

/// The digest a backup's manifest records for a file's contents: SHA-1 (20 bytes, what iTunes and
/// idevicebackup2 write) or SHA-256 (32 bytes). Any other length is not a digest protfs can check.
enum ContentDigest {
  /// Whether the contents of `fd` (read from its start with `pread`, so its offset is left alone;
  /// its first `length` bytes at most) have the digest `expected`; nil when `expected` is no SHA-1
  /// or SHA-256, or `fd` cannot be read.
  static func matches(_ fd: Int32, _ expected: Data, length: Int64 = .max) -> Bool? {
    matches(expected, length: length) { buffer, count, offset in
      guard case .success(let read) = Kernel.pread(fd, buffer, count, off_t(offset)) else { return nil }
      return read
    }
  }

  /// Whether the bytes `read` gives (up to `count` of them at `offset` into the buffer, how many it
  /// put there, 0 at the end, nil when it cannot; its first `length` bytes at most) have the digest
  /// `expected`; nil when `expected` is no SHA-1 or SHA-256, or `read` fails.
  static func matches(
    _ expected: Data, length: Int64 = .max, read: (UnsafeMutableRawPointer, Int, Int64) -> Int?
  ) -> Bool? {
    guard expected.count == 20 || expected.count == 32 else { return nil }
    guard let context = expected.count == 20 ? protfs_sha1_context_new() : protfs_sha256_context_new() else {
      return nil
    }
    defer { protfs_sha256_context_free(context) }
    let chunk = 1 << 20
    let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
    defer {
      explicit_bzero(buffer, chunk)
      buffer.deallocate()
    }
    var offset: Int64 = 0
    while offset < length {
      let asked = Int(min(Int64(chunk), length - offset))
      guard let count = read(buffer, asked, offset) else { return nil }
      if count == 0 { break }
      protfs_sha256_context_update(context, buffer, count)
      offset += Int64(count)
    }
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    guard protfs_sha256_context_final(context, &digest, &length) == 1 else { return nil }
    return Data(digest.prefix(Int(length))) == expected
  }
}
