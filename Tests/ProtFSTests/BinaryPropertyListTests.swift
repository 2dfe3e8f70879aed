import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

@testable import ProtFSBackup

/// The binary plist reader the backup import and BoundedPropertyList use, against plists Python's `plistlib` writes
/// (every integer width, negative and 16-byte integers, ASCII and UTF-16 strings, data, UIDs,
/// counts that need an extra length object), and against hostile ones: truncated, a trailer whose
/// offsets point outside, references out of range, and UID loops, which cannot send it round
/// since it follows a reference only when asked.
@Suite struct BinaryPropertyListTests {
  /// The bytes `plistlib` writes for the Python expression `value` (binary format).
  func plist(_ value: String) async throws -> [UInt8] {
    let script = "import plistlib, sys; sys.stdout.buffer.write(plistlib.dumps(\(value), fmt=plistlib.FMT_BINARY))"
    let made = try await Protfs.runProgram("/usr/bin/python3", ["-c", script])
    #expect(made.status == 0, "\(made)")
    return Array(made.stdoutBytes)
  }

  @Test func readsWhatPlistlibWrites() async throws {
    let bytes = try await plist(
      """
      {'small': 7, 'byte': 200, 'short': 60000, 'int': 4_000_000_000, 'long': 2**62, 'negative': -5,
       'big': 2**63 + 1, 'ascii': 'MBFile', 'unicode': 'café ☕', 'data': bytes(range(40)),
       'uid': plistlib.UID(300), 'list': list(range(20)), 'true': True, 'real': 1.5}
      """)
    try bytes.withUnsafeBytes { raw in
      let plist = try #require(BinaryPropertyList(raw))
      let root = try #require(plist.dictionary(plist.top))
      #expect(root.count == 14)
      func integer(_ key: StaticString) -> Int64? { plist.value(root, key).flatMap(plist.integer) }
      #expect(integer("small") == 7 && integer("byte") == 200 && integer("short") == 60000)
      #expect(integer("int") == 4_000_000_000 && integer("long") == 1 << 62 && integer("negative") == -5)
      // 2^63 + 1 does not fit a signed 64-bit integer: no value, never a wrong one.
      #expect(plist.value(root, "big") != nil && integer("big") == nil)
      #expect(plist.value(root, "ascii").flatMap(plist.string) == "MBFile")
      #expect(plist.value(root, "ascii").map { plist.isString($0, "MBFile") } == true)
      #expect(plist.value(root, "unicode").flatMap(plist.string) == "café ☕")
      #expect(plist.value(root, "data").flatMap(plist.data) == Array(0..<40))
      #expect(plist.value(root, "uid").flatMap(plist.uid) == 300)
      let list = try #require(plist.value(root, "list").flatMap(plist.array))
      #expect(list.count == 20)
      #expect((0..<20).compactMap { plist.element(list, $0).flatMap(plist.integer) } == Array(0..<20))
      #expect(plist.element(list, 20) == nil)
      // Asked for the wrong type, every accessor answers nil.
      #expect(plist.value(root, "data").flatMap(plist.string) == nil)
      #expect(plist.value(root, "ascii").flatMap(plist.integer) == nil)
      #expect(plist.value(root, "missing") == nil)
    }
  }

  @Test func anMBFileArchiveDecodesAsTheBackupScriptWritesIt() async throws {
    let made = try await Protfs.runProgram(
      "/usr/bin/python3",
      [
        "-c",
        """
        import sys
        \(RepositoryLayout.makeBackupModule)
        sys.stdout.buffer.write(make.archive('Documents/a', 0o100644, 1234, 3, 'target', b'd' * 20, b'k' * 44))
        """,
      ])
    #expect(made.status == 0, "\(made)")
    let metadata = try #require(Array(made.stdoutBytes).withUnsafeBytes { BackupFileMetadata(archive: $0) })
    #expect(metadata.mode == 0o100644 && metadata.size == 1234 && metadata.protectionClass == 3)
    #expect(metadata.lastModified == 1_700_000_000 && metadata.birth == 1_700_000_000 - 86_400)
    #expect(metadata.target == "target" && metadata.digest == Data(repeating: 0x64, count: 20))
    #expect(metadata.encryptionKey == [UInt8](repeating: 0x6B, count: 44))
  }

  @Test func hostileBytesAreRefusedAndUIDLoopsEndWithoutAnAnswer() async throws {
    let good = try await plist("{'a': [1, 2, 3], 'b': 'text'}")
    // Every prefix, and every single byte changed in the trailer, is refused or read in bounds.
    for length in 0..<good.count {
      let cut = Array(good.prefix(length))
      cut.withUnsafeBytes { raw in
        if let plist = BinaryPropertyList(raw), let root = plist.dictionary(plist.top) {
          _ = plist.value(root, "a").flatMap(plist.array)
        }
      }
    }
    for index in good.count - 32..<good.count {
      for value: UInt8 in [0, 1, 0x7F, 0xFF] {
        var changed = good
        changed[index] = value
        changed.withUnsafeBytes { raw in
          guard let plist = BinaryPropertyList(raw), let root = plist.dictionary(plist.top) else { return }
          if let list = plist.value(root, "a").flatMap(plist.array) {
            for element in 0..<min(list.count, 100) { _ = plist.element(list, element).flatMap(plist.integer) }
          }
          _ = plist.value(root, "b").flatMap(plist.string)
        }
      }
    }
    #expect([UInt8]("bplist00".utf8).withUnsafeBytes { BinaryPropertyList($0) } == nil)
    // A keyed archive whose objects refer to each other in a loop, and one whose root UID is out
    // of range: no metadata, and an answer at once.
    let loop = try await plist(
      """
      {'$archiver': 'NSKeyedArchiver', '$top': {'root': plistlib.UID(1)},
       '$objects': ['$null', {'$class': plistlib.UID(1), 'Target': plistlib.UID(1)}]}
      """)
    #expect(loop.withUnsafeBytes { BackupFileMetadata(archive: $0) } == nil)
    let outside = try await plist(
      "{'$archiver': 'NSKeyedArchiver', '$top': {'root': plistlib.UID(9)}, '$objects': ['$null']}")
    #expect(outside.withUnsafeBytes { BackupFileMetadata(archive: $0) } == nil)
  }
}
