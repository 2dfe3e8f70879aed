import Foundation
import ProtFSSeal
import ProtFSSystem
import Testing

/// A sealed file read and written at any offset and length behaves as a plain file would, and what
/// is on disk is ciphertext of the same length.
@Suite struct SealedFileIOTests {
  /// A fresh empty backing file and its I/O, with a random key.
  static func sealedFile() throws -> (SealedFileIO, String) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sealed-io-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
    let path = directory.appendingPathComponent("file").path
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    try #require(fd >= 0)
    let cipher = FileCipher(key: try SecretBytes.random(count: FileKeyRecord.fileKeyLength))
    return (SealedFileIO(fd: fd, cipher: cipher, path: path), directory.path)
  }

  static func cleanUp(_ io: SealedFileIO, _ directory: String) {
    close(io.fd)
    try? FileManager.default.removeItem(atPath: directory)  // a temporary directory: nothing to report
  }

  @Test func randomWritesAndTruncationsReadBackAsAPlainFile() throws {
    let (io, directory) = try Self.sealedFile()
    defer { Self.cleanUp(io, directory) }
    var model: [UInt8] = []
    var generator = SystemRandomNumberGenerator()
    let offsets = [0, 1, 15, 16, 17, 4080, 4095, 4096, 4097, 8191, 8192, 12_000, 20_000]
    for step in 0..<300 {
      let offset = offsets.randomElement(using: &generator)! + Int.random(in: 0..<3, using: &generator)
      if step % 10 == 9 {
        try io.truncate(to: offset)
        if offset < model.count {
          model.removeSubrange(offset...)
        } else {
          model += [UInt8](repeating: 0, count: offset - model.count)
        }
      } else {
        let count = [0, 1, 5, 15, 16, 100, 4096, 5000].randomElement(using: &generator)!
        let bytes = (0..<count).map { _ in UInt8.random(in: 1...255, using: &generator) }
        try io.write(bytes, at: offset)
        if offset > model.count { model += [UInt8](repeating: 0, count: offset - model.count) }
        let end = offset + count
        if end > model.count { model += [UInt8](repeating: 0, count: end - model.count) }
        model.replaceSubrange(offset..<end, with: bytes)
      }
      #expect(try io.size() == model.count, "step \(step)")
      let at = Int.random(in: 0...max(0, model.count), using: &generator)
      let count = Int.random(in: 0...9000, using: &generator)
      let expected = at < model.count ? Array(model[at..<min(model.count, at + count)]) : []
      let got = try io.read(at: at, count: count)
      #expect(got == expected, "step \(step): read \(count) at \(at) of \(model.count)")
      if got != expected { break }
    }
    #expect(try io.read(at: 0, count: model.count) == model)
  }

  /// The same writes made from memory (whole blocks encrypted straight from the caller's bytes) and
  /// through a fill (every byte copied into the buffer first) leave the same ciphertext on disk.
  @Test func writesFromMemoryAndThroughAFillLeaveTheSameCiphertext() throws {
    let (direct, first) = try Self.sealedFile()
    defer { Self.cleanUp(direct, first) }
    let (filled, second) = try Self.sealedFile()
    defer { Self.cleanUp(filled, second) }
    let twin = SealedFileIO(fd: filled.fd, cipher: direct.cipher, path: filled.path)
    var generator = SystemRandomNumberGenerator()
    let offsets = [0, 1, 4095, 4096, 4097, 8192, 12_000, 40_000]
    let counts = [1, 15, 16, 17, 4096, 4097, 12_289, 65_536, (1 << 20) + 3]
    var noise = [UInt64](repeating: 0, count: (counts.max()! + 64) / 8 + 1)
    for index in noise.indices { noise[index] = generator.next() }
    for step in 0..<120 {
      let offset = offsets.randomElement(using: &generator)! + Int.random(in: 0..<3, using: &generator)
      let count = counts.randomElement(using: &generator)!
      let skip = Int.random(in: 0..<64, using: &generator)
      let bytes = noise.withUnsafeBytes { Array($0[skip..<skip + count]) }
      try direct.write(bytes, at: offset)
      try twin.write(count: count, at: offset) { target in
        bytes.withUnsafeBytes { target.copyMemory(from: $0) }
        return true
      }
      let size = try direct.size()
      #expect(try twin.size() == size, "step \(step)")
      #expect(Self.backing(direct.fd, size) == Self.backing(filled.fd, size), "step \(step): \(count) at \(offset)")
    }
  }

  /// The ciphertext `fd` holds.
  static func backing(_ fd: Int32, _ size: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: size)
    let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, size, 0) }
    return Array(bytes[..<max(0, got)])
  }

  @Test func theDiskHoldsCiphertextOfTheSameLength() throws {
    let (io, directory) = try Self.sealedFile()
    defer { Self.cleanUp(io, directory) }
    let plain = Array(String(repeating: "a secret in class A. ", count: 500).utf8)
    try io.write(plain, at: 0)
    let onDisk = try #require(FileManager.default.contents(atPath: io.path))
    #expect(onDisk.count == plain.count)
    #expect(!onDisk.contains(Data("secret".utf8)))
    #expect(try io.read(at: 0, count: plain.count) == plain)
  }

  @Test func aFileGrownPastItsEndReadsZerosInTheGap() throws {
    let (io, directory) = try Self.sealedFile()
    defer { Self.cleanUp(io, directory) }
    try io.write([1, 2, 3], at: 0)
    try io.write([9], at: 3 * 1_048_576 + 10)  // past several zero chunks
    #expect(try io.size() == 3 * 1_048_576 + 11)
    #expect(try io.read(at: 0, count: 5) == [1, 2, 3, 0, 0])
    #expect(try io.read(at: 2 * 1_048_576, count: 4) == [0, 0, 0, 0])
    #expect(try io.read(at: 3 * 1_048_576 + 8, count: 10) == [0, 0, 9])
    try io.truncate(to: 5_000_000)
    #expect(try io.read(at: 4_999_990, count: 100) == [UInt8](repeating: 0, count: 10))
  }
}
