import Foundation
import ProtFSSystem
import Testing

@testable import ProtFSSessions

/// Resume data in Apple's format: a keyed archive that an app reads and rewrites as iOS apps do,
/// and that protfs reads back within bounds from any form iOS has used.
struct AppleResumeDataTests {
  let sample = AppleResumeData(
    url: URL(string: "https://example.com/big.iso")!, bytesReceived: 300_000,
    temporaryFileName: "CFNetworkDownload_a1B2c3.tmp", entityTag: "\"e1\"",
    serverDownloadDate: "Mon, 07 Dec 2026 07:00:00 GMT", headers: ["Authorization": "Bearer t"])

  @Test func itIsAKeyedArchiveWithApplesKeysThatNSKeyedUnarchiverReads() throws {
    let data = sample.archived
    #expect(data.starts(with: Array("bplist00".utf8)))
    let plist = try #require(try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any])
    #expect(plist["$archiver"] as? String == "NSKeyedArchiver")
    // As download managers read it: unarchived, then looked up by Apple's keys.
    let root = try #require(
      try NSKeyedUnarchiver.unarchivedObject(
        ofClasses: [NSDictionary.self, NSString.self, NSNumber.self, NSData.self], from: data) as? NSDictionary)
    #expect(root["NSURLSessionResumeInfoVersion"] as? Int == 2)
    #expect(root["NSURLSessionDownloadURL"] as? String == "https://example.com/big.iso")
    #expect(root["NSURLSessionResumeBytesReceived"] as? Int == 300_000)
    #expect(root["NSURLSessionResumeInfoTempFileName"] as? String == "CFNetworkDownload_a1B2c3.tmp")
    #expect(root["NSURLSessionResumeEntityTag"] as? String == "\"e1\"")
    #expect(root["NSURLSessionResumeServerDownloadDate"] as? String == "Mon, 07 Dec 2026 07:00:00 GMT")
    #expect(root["NSURLSessionResumeCurrentRequest"] is Data && root["NSURLSessionResumeOriginalRequest"] is Data)
    #expect(try AppleResumeData(data) == sample)
  }

  /// The forms iOS 8 to 11 used, which the widely copied fixes write back: a plain dictionary in
  /// an XML or binary property list, version 1 naming the file by its path.
  @Test func anAppsRewriteAsAPlainPropertyListIsReadToo() throws {
    let root = try #require(
      try NSKeyedUnarchiver.unarchivedObject(
        ofClasses: [NSDictionary.self, NSString.self, NSNumber.self, NSData.self], from: sample.archived)
        as? [String: Any])
    for format in [PropertyListSerialization.PropertyListFormat.xml, .binary] {
      let rewritten = try PropertyListSerialization.data(fromPropertyList: root, format: format, options: 0)
      #expect(try AppleResumeData(rewritten) == sample, "\(format)")
    }
    var first = root
    first["NSURLSessionResumeInfoTempFileName"] = nil
    first["NSURLSessionResumeInfoVersion"] = 1
    first["NSURLSessionResumeInfoLocalPath"] = "/private/var/mobile/tmp/CFNetworkDownload_a1B2c3.tmp"
    let old = try PropertyListSerialization.data(fromPropertyList: first, format: .xml, options: 0)
    #expect(try AppleResumeData(old).temporaryFileName == "CFNetworkDownload_a1B2c3.tmp")
  }

  @Test(arguments: [
    ("garbage", Data("not a property list".utf8)),
    ("empty", Data()),
    ("too large", Data(repeating: 0x20, count: AppleResumeData.maximumSize + 1)),
    ("a bomb", AppleResumeDataTests.bomb(levels: 40)),
    ("a cycle", AppleResumeDataTests.selfReferencingDictionary()),
    ("an array", try! PropertyListSerialization.data(fromPropertyList: [1, 2], format: .binary, options: 0)),
  ])
  func bytesThatAreNotResumeDataAreRefusedAtOnce(name: String, bytes: Data) {
    #expect(throws: ProtFSError.self, "\(name)") { try AppleResumeData(bytes) }
  }

  @Test func valuesThatNameNoDownloadOfItsOwnAreRefused() throws {
    var changed = try #require(
      try NSKeyedUnarchiver.unarchivedObject(
        ofClasses: [NSDictionary.self, NSString.self, NSNumber.self, NSData.self], from: sample.archived)
        as? [String: Any])
    for (key, value) in [
      ("NSURLSessionResumeInfoTempFileName", "../../../.protfs/lock-state.json" as Any),
      ("NSURLSessionResumeInfoTempFileName", "lock-state.json"),
      ("NSURLSessionDownloadURL", "file:///etc/shadow"),
      ("NSURLSessionResumeBytesReceived", -1),
      ("NSURLSessionResumeBytesReceived", "many"),
    ] {
      let original = changed[key]
      changed[key] = value
      let data = try NSKeyedArchiver.archivedData(withRootObject: changed as NSDictionary, requiringSecureCoding: false)
      let error = #expect(throws: ProtFSError.self, "\(key) = \(value)") { try AppleResumeData(data) }
      #expect(error?.code == .resumeDataRefused)
      changed[key] = original
    }
  }

  /// A binary plist of `levels` arrays, each holding the one below twice: 2^levels nodes once
  /// expanded, in a few hundred bytes.
  static func bomb(levels: Int) -> Data {
    var objects: [[UInt8]] = [[0x10, 0x01]]  // the integer 1
    for level in 1...levels { objects.append([0xA2, UInt8(level - 1), UInt8(level - 1)]) }
    return binaryPlist(objects, top: levels)
  }

  /// A binary plist whose top dictionary's one value is itself.
  static func selfReferencingDictionary() -> Data {
    let key = Array("NSURLSessionDownloadURL".utf8)
    return binaryPlist([[0xD1, 0x01, 0x00], [0x5F, 0x10, UInt8(key.count)] + key], top: 0)
  }

  /// The bytes of a binary plist holding `objects` (each already encoded, referring to others by
  /// one-byte references), with `top` its top object.
  static func binaryPlist(_ objects: [[UInt8]], top: Int) -> Data {
    var bytes = Array("bplist00".utf8)
    var offsets: [Int] = []
    for object in objects {
      offsets.append(bytes.count)
      bytes += object
    }
    let table = bytes.count
    for offset in offsets { bytes += [UInt8(offset >> 8), UInt8(offset & 0xFF)] }
    bytes += [0, 0, 0, 0, 0, 0, 2, 1]
    bytes += (0..<8).map { UInt8(truncatingIfNeeded: objects.count >> (8 * (7 - $0))) }
    bytes += (0..<8).map { UInt8(truncatingIfNeeded: top >> (8 * (7 - $0))) }
    bytes += (0..<8).map { UInt8(truncatingIfNeeded: table >> (8 * (7 - $0))) }
    return Data(bytes)
  }
}
