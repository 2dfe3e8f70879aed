import Foundation
import ProtFSSeal
import ProtFSSystem
import Synchronization
import Testing

/// A cipher keeps its OpenSSL contexts for its next calls (one per direction and per thread at once):
/// reused contexts encrypt each block with its own tweak, a short tail after a full block takes its
/// keystream from an encrypting context also while decrypting, and threads sharing one cipher each
/// get a context of their own.
@Suite struct FileCipherReuseTests {
  static func randomKey() throws -> SecretBytes { try SecretBytes.random(count: FileKeyRecord.fileKeyLength) }

  /// `bytes` encrypted at `offset` by a cipher made for this call alone (nothing reused).
  static func freshlyEncrypted(_ bytes: [UInt8], key: SecretBytes, at offset: UInt64) throws -> [UInt8] {
    var copy = bytes
    let cipher = FileCipher(key: key.withUnsafeBytes { SecretBytes(copying: $0) })
    try copy.withUnsafeMutableBytes { try cipher.encrypt($0, at: offset) }
    return copy
  }

  @Test func aReusedCipherEncryptsAsAFreshOneAtEveryOffsetAndLength() throws {
    let key = try Self.randomKey()
    let cipher = FileCipher(key: key)
    let block = FileCipher.blockSize
    for (length, offset) in [(block, 0), (3 * block + 5, block), (block + 16, 7 * block), (9, 2 * block), (40, 0)] {
      let plain = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ length) }
      var bytes = plain
      try bytes.withUnsafeMutableBytes { try cipher.encrypt($0, at: UInt64(offset)) }
      #expect(bytes == (try Self.freshlyEncrypted(plain, key: key, at: UInt64(offset))), "\(length) at \(offset)")
      try bytes.withUnsafeMutableBytes { try cipher.decrypt($0, at: UInt64(offset)) }
      #expect(bytes == plain, "\(length) at \(offset)")
    }
  }

  @Test func aShortTailAfterAFullBlockDecryptsWithTheSameCipher() throws {
    let cipher = FileCipher(key: try Self.randomKey())
    for tail in [1, 5, 15, 16, 17] {
      let plain = (0..<(FileCipher.blockSize + tail)).map { UInt8(truncatingIfNeeded: $0 ^ tail) }
      var bytes = plain
      try bytes.withUnsafeMutableBytes { try cipher.encrypt($0, at: 0) }
      #expect(bytes[FileCipher.blockSize...] != plain[FileCipher.blockSize...], "tail \(tail) is hidden")
      // Twice: the second decryption takes the contexts the first gave back.
      for _ in 0..<2 {
        var copy = bytes
        try copy.withUnsafeMutableBytes { try cipher.decrypt($0, at: 0) }
        #expect(copy == plain, "tail \(tail)")
      }
    }
  }

  @Test func twoHandlesOfOneFileReadAndWriteEachOthersBlocks() throws {
    let (first, directory) = try SealedFileIOTests.sealedFile()
    defer { SealedFileIOTests.cleanUp(first, directory) }
    let fd = open(first.path, O_RDWR | O_CLOEXEC)
    try #require(fd >= 0)
    defer { close(fd) }
    // A second handle with a cipher of its own (the mount unwraps the key at each open).
    let key = try Self.randomKey()
    let a = SealedFileIO(fd: first.fd, cipher: FileCipher(key: key), path: first.path)
    let b = SealedFileIO(
      fd: fd, cipher: FileCipher(key: key.withUnsafeBytes { SecretBytes(copying: $0) }), path: first.path)
    let one = [UInt8](repeating: 1, count: 10_000)
    let two = [UInt8](repeating: 2, count: 3_000)
    try a.write(one, at: 0)
    try b.write(two, at: 5_000)
    try a.write([3, 3, 3], at: 10_000)
    let expected = Array(one[..<5_000]) + two + Array(one[8_000...]) + [3, 3, 3]
    #expect(try a.read(at: 0, count: 20_000) == expected)
    #expect(try b.read(at: 0, count: 20_000) == expected)
    #expect(try b.read(at: 4_090, count: 20) == Array(expected[4_090..<4_110]))
  }

  @Test func concurrentReadsThroughOneHandleEachGetTheirBlocks() throws {
    let (io, directory) = try SealedFileIOTests.sealedFile()
    defer { SealedFileIOTests.cleanUp(io, directory) }
    let size = 64 * FileCipher.blockSize + 7
    let plain = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 12) }
    try io.write(plain, at: 0)
    let mismatches = Mutex(0)
    DispatchQueue.concurrentPerform(iterations: 64) { i in
      for round in 0..<20 {
        let offset = (i * 977 + round * 4_096) % size
        let count = 1 + (i * 131 + round * 8_191) % 20_000
        let got = (try? io.read(at: offset, count: count)) ?? []
        if got != Array(plain[offset..<min(size, offset + count)]) { mismatches.withLock { $0 += 1 } }
      }
    }
    #expect(mismatches.withLock { $0 } == 0)
  }

  @Test func plaintextComesStraightFromTheBlocksWithoutACopy() throws {
    let (io, directory) = try SealedFileIOTests.sealedFile()
    defer { SealedFileIOTests.cleanUp(io, directory) }
    let plain = (0..<9_000).map { UInt8(truncatingIfNeeded: $0) }
    try plain.withUnsafeBytes { try io.write($0, at: 0) }
    let middle = try io.withPlaintext(at: 4_000, count: 200) { Array($0) }
    #expect(middle == Array(plain[4_000..<4_200]))
    let end = try io.withPlaintext(at: 8_990, count: 100) { Array($0) }
    #expect(end == Array(plain[8_990...]))
    #expect(try io.withPlaintext(at: 9_000, count: 10) { $0.count } == 0)
  }
}
