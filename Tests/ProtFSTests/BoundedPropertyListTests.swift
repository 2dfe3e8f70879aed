import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `BoundedPropertyList`, the one reader of property lists someone else wrote (a backup's
/// `Manifest.plist`, an app's `Info.plist`, entitlements): what plistlib writes is read as
/// PropertyListSerialization reads it; what would expand without end, hold itself, nest too deep
/// or be too large is refused at once, saying why.
@Suite struct BoundedPropertyListTests {
  /// A binary plist of `objects` (each already encoded; references are one byte, offsets two).
  static func binary(_ objects: [[UInt8]], top: Int) -> [UInt8] {
    var bytes = Array("bplist00".utf8)
    var offsets: [Int] = []
    for object in objects {
      offsets.append(bytes.count)
      bytes += object
    }
    let table = bytes.count
    for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
    func bigEndian(_ value: Int) -> [UInt8] { (0..<8).reversed().map { UInt8((value >> ($0 * 8)) & 0xFF) } }
    return bytes + [UInt8](repeating: 0, count: 6) + [2, 1] + bigEndian(objects.count) + bigEndian(top)
      + bigEndian(table)
  }

  /// `levels` arrays, each holding the one before twice: 2^levels nodes once expanded.
  static func bomb(levels: Int) -> [UInt8] {
    binary([[0xA0]] + (1..<levels).map { [0xA2, UInt8($0 - 1), UInt8($0 - 1)] }, top: levels - 1)
  }

  /// The bytes `plistlib` writes for the Python expression `value` (`fmt` FMT_BINARY or FMT_XML).
  func plistlib(_ value: String, format: String = "FMT_BINARY") async throws -> [UInt8] {
    let script = "import plistlib, sys; sys.stdout.buffer.write(plistlib.dumps(\(value), fmt=plistlib.\(format)))"
    let made = try await Protfs.runProgram("/usr/bin/python3", ["-c", script])
    #expect(made.status == 0, "\(made)")
    return Array(made.stdoutBytes)
  }

  /// The reason `bytes` are refused within `limits` (1 MiB by default), or nil when they are read.
  func refusal(_ bytes: [UInt8], _ limits: BoundedPropertyList.Limits = .init(bytes: 1 << 20)) -> String? {
    switch BoundedPropertyList.parse(bytes, limits: limits) {
    case .success: return nil
    case .failure(let refusal): return refusal.reason
    }
  }

  @Test(arguments: ["FMT_BINARY", "FMT_XML"])
  func readsWhatPlistlibWrites(format: String) async throws {
    let bytes = try await plistlib(
      """
      {'CFBundleIdentifier': 'com.example.app', 'UIBackgroundModes': ['fetch', 'audio'], 'Data': bytes(40),
       'Nested': {'a': [[1, 2], [3, {'b': True}]]}, 'Shared': ['same'] * 500, 'Real': 1.5}
      """, format: format)
    let parsed = try BoundedPropertyList.parse(bytes, limits: .init(bytes: 1 << 20)).get()
    let plist = try #require(parsed as? [String: Any])
    #expect(plist["CFBundleIdentifier"] as? String == "com.example.app")
    #expect(plist["UIBackgroundModes"] as? [String] == ["fetch", "audio"])
    #expect((plist["Shared"] as? [String])?.count == 500)
    #expect((plist["Data"] as? Data)?.count == 40)
  }

  @Test func anObjectGraphThatExpandsWithoutEndIsRefusedAtOnce() {
    let bytes = Self.bomb(levels: 60)
    #expect(bytes.count < 400)
    let started = Date()
    let reason = refusal(bytes)
    #expect(reason?.contains("expand to more than 100000 nodes") == true, "\(String(describing: reason))")
    #expect(Date().timeIntervalSince(started) < 1)
    // 16 levels are 65,535 nodes: within the budget, and read.
    #expect(refusal(Self.bomb(levels: 16)) == nil)
  }

  @Test func anArrayThatHoldsItselfIsRefused() {
    #expect(refusal(Self.binary([[0xA1, 0]], top: 0)) == "an array or dictionary in it holds itself")
    // Through a dictionary: {"k": [dictionary]}.
    let indirect = Self.binary([[0xD1, 1, 2], [0x51, UInt8(ascii: "k")], [0xA1, 0]], top: 0)
    #expect(refusal(indirect) == "an array or dictionary in it holds itself")
  }

  @Test func nestingDeeperThanTheLimitIsRefusedInBothFormats() {
    let deep = Self.binary([[0xA0]] + (1..<100).map { [0xA1, UInt8($0 - 1)] }, top: 99)
    #expect(refusal(deep)?.contains("deeper than 64 levels") == true, "\(String(describing: refusal(deep)))")
    let xml =
      "<?xml version=\"1.0\"?><plist version=\"1.0\">" + String(repeating: "<array>", count: 10_000)
      + String(repeating: "</array>", count: 10_000) + "</plist>"
    #expect(refusal(Array(xml.utf8))?.contains("deeper than 64 levels") == true)
    let shallow =
      "<plist>" + String(repeating: "<array>", count: 64) + String(repeating: "</array>", count: 64)
      + "</plist>"
    #expect(refusal(Array(shallow.utf8)) == nil, "\(String(describing: refusal(Array(shallow.utf8))))")
  }

  @Test func elementsInCommentsDoNotCountAndQuotedAttributesHideNone() {
    let commented = "<plist><!-- " + String(repeating: "<array>", count: 100) + " --><array/></plist>"
    #expect(refusal(Array(commented.utf8)) == nil)
    let quoted =
      "<plist version=\"<!--\">" + String(repeating: "<array>", count: 70)
      + String(repeating: "</array>", count: 70) + "</plist>"
    #expect(refusal(Array(quoted.utf8))?.contains("deeper than 64 levels") == true)
  }

  @Test func sizeObjectsAndExpandedBytesAreBounded() async throws {
    #expect(refusal([UInt8](repeating: 0x20, count: 2 << 20))?.contains("larger than 1048576 bytes") == true)
    var few = BoundedPropertyList.Limits(bytes: 1 << 20)
    few.nodes = 10
    let list = try await plistlib("list(range(20))")
    #expect(refusal(list, few)?.contains("holds 21 objects, more than the 10") == true)
    // A KiB of data referenced a hundred times: 100 KiB once expanded, against a budget of 4 KiB.
    let blob = try await plistlib("[b'x' * 1024] * 100")
    #expect(refusal(blob, .init(bytes: 1024 + 512))?.contains("strings and data expand") == true)
  }

  @Test func whatIsNoXMLNorBinaryPlistOrIsDamagedIsRefused() {
    #expect(refusal(Array("{ a = (b, c); }".utf8)) == "it is neither an XML nor a binary property list")
    #expect(refusal(Array("bplist00".utf8) + [0, 0]) != nil)
    // A marker of no property-list kind (0x7), and a reference past the last object.
    #expect(refusal(Self.binary([[0xA1, 1], [0x70]], top: 0))?.contains("object 1 cannot be read") == true)
    #expect(refusal(Self.binary([[0xA1, 9]], top: 0))?.contains("object 9 cannot be read") == true)
  }
}
