import Foundation
import ProtFSKit
import Testing

/// An archived object that refuses to decode, as a damaged archive would (top-level: Foundation on
/// Linux archives no nested class).
final class RefusingArchive: NSObject, NSSecureCoding {
  static var supportsSecureCoding: Bool { true }
  override init() { super.init() }
  func encode(with coder: NSCoder) { coder.encode(Int64(1), forKey: "version") }
  init?(coder: NSCoder) { nil }
}

/// What Foundation on Linux lacks or refuses of what iOS code calls, as ProtFSKit adds it.
@Suite struct FoundationAdditionsTests {
  /// `Progress()`, as iOS code makes one to fill in later.
  @Test func aProgressWithoutArguments() {
    let progress = Progress()
    #expect(progress.totalUnitCount == 0)
    #expect(progress.completedUnitCount == 0)
    progress.totalUnitCount = 4
    progress.completedUnitCount = 2
    #expect(progress.fractionCompleted == 0.5)
  }

  /// `NSMutableDictionary(dictionary:)` of an `NSDictionary` is a mutable copy of it.
  @Test func aMutableCopyOfAnNSDictionary() {
    let original: NSDictionary = ["etag": "\"v1\"", "length": 10]
    let copy = NSMutableDictionary(dictionary: original)
    copy["length"] = 20
    copy["offset"] = 5
    #expect(copy["etag"] as? String == "\"v1\"")
    #expect(copy["length"] as? Int == 20)
    #expect(original["length"] as? Int == 10)
    #expect(original["offset"] == nil)
    #expect(NSMutableDictionary(dictionary: ["literal": 1]).count == 1)
  }

  /// `decodeTopLevelObject(of:forKey:)` decodes, and throws where decoding fails instead of
  /// stopping the app.
  @Test func decodeTopLevelObjectDecodesAndThrows() throws {
    let dictionary: NSDictionary = ["NSURLSessionResumeBytesReceived": 1024]
    let data = try NSKeyedArchiver.archivedData(withRootObject: dictionary, requiringSecureCoding: true)
    let unarchiver = try NSKeyedUnarchiver(forReadingFrom: data)
    let decoded = try unarchiver.decodeTopLevelObject(of: [NSDictionary.self, NSNumber.self], forKey: "root")
    #expect((decoded as? NSDictionary)?["NSURLSessionResumeBytesReceived"] as? Int == 1024)

    let refused = try NSKeyedArchiver.archivedData(withRootObject: RefusingArchive(), requiringSecureCoding: true)
    let failing = try NSKeyedUnarchiver(forReadingFrom: refused)
    #expect(throws: (any Error).self) {
      try failing.decodeTopLevelObject(of: RefusingArchive.self, forKey: NSKeyedArchiveRootObjectKey)
    }
  }

  /// A key the archive lacks gives nil and no error, and the unarchiver goes on: Tiercel reads
  /// resume data by trying the key "NSKeyedArchiveRootObjectKey" first, then
  /// `NSKeyedArchiveRootObjectKey` ("root"); the first try used to fail the second.
  @Test func aMissingKeyGivesNilAndTheNextDecodeStillWorks() throws {
    let dictionary: NSDictionary = ["NSURLSessionResumeInfoTempFileName": "CFNetworkDownload_a.tmp"]
    let data = try NSKeyedArchiver.archivedData(withRootObject: dictionary, requiringSecureCoding: true)
    let unarchiver = NSKeyedUnarchiver(forReadingWith: data)
    #expect(try unarchiver.decodeTopLevelObject(of: NSDictionary.self, forKey: "NSKeyedArchiveRootObjectKey") == nil)
    let root = try unarchiver.decodeTopLevelObject(forKey: NSKeyedArchiveRootObjectKey) as? NSDictionary
    #expect(root?["NSURLSessionResumeInfoTempFileName"] as? String == "CFNetworkDownload_a.tmp")
  }

  /// The volume's space for important use is what `statvfs(3)` says is available.
  @Test func theVolumesAvailableCapacityForImportantUsage() throws {
    let directory = URL(fileURLWithPath: NSTemporaryDirectory())
    let values = try directory.resourceValues(forKeys: [
      .volumeAvailableCapacityForImportantUsageKey, .volumeAvailableCapacityForOpportunisticUsageKey,
    ])
    var volume = statvfs()
    #expect(statvfs(directory.path, &volume) == 0)
    let available = Int64(volume.f_bavail) * Int64(volume.f_frsize)
    let important = try #require(values.volumeAvailableCapacityForImportantUsage)
    #expect(abs(important - available) < 64 << 20)
    #expect(values.volumeAvailableCapacityForOpportunisticUsage == important)
  }

  /// A formatter as download managers set one up for the time remaining.
  static func formatter(
    _ style: DateComponentsFormatter.UnitsStyle, _ units: NSCalendar.Unit = [.hour, .minute, .second],
    zeros: DateComponentsFormatter.ZeroFormattingBehavior = .default
  ) -> DateComponentsFormatter {
    let formatter = DateComponentsFormatter()
    formatter.unitsStyle = style
    formatter.allowedUnits = units
    formatter.zeroFormattingBehavior = zeros
    return formatter
  }

  /// Each style writes a duration as an `en_US` device does.
  @Test func dateComponentsFormatterWritesEachStyle() {
    #expect(Self.formatter(.positional).string(from: 3725) == "1:02:05")
    #expect(Self.formatter(.positional).string(from: 3610) == "1:00:10")
    #expect(Self.formatter(.positional).string(from: 65) == "1:05")
    #expect(Self.formatter(.positional, zeros: .pad).string(from: 65) == "0:01:05")
    #expect(Self.formatter(.positional, [.minute, .second]).string(from: 3725) == "62:05")
    #expect(Self.formatter(.abbreviated).string(from: 3610) == "1h 10s")
    #expect(Self.formatter(.abbreviated, zeros: .pad).string(from: 3600) == "1h 0m 0s")
    #expect(Self.formatter(.short).string(from: 7325) == "2 hr, 2 min, 5 sec")
    #expect(Self.formatter(.full).string(from: 3725) == "1 hour, 2 minutes, 5 seconds")
    #expect(Self.formatter(.spellOut).string(from: 3725) == "one hour, two minutes, five seconds")
    #expect(Self.formatter(.brief).string(from: 3725) == "1hr 2min 5sec")
    #expect(Self.formatter(.abbreviated).string(from: 0) == "0s")
    #expect(Self.formatter(.positional).string(from: -65) == "-1:05")
    #expect(Self.formatter(.full, [.day, .hour]).string(from: 2 * 86_400 + 3 * 3600) == "2 days, 3 hours")
  }

  /// The phrases, the unit count, collapsing, and the other ways in.
  @Test func dateComponentsFormatterPhrasesAndLimits() {
    let remaining = Self.formatter(.full)
    remaining.includesApproximationPhrase = true
    remaining.includesTimeRemainingPhrase = true
    remaining.maximumUnitCount = 1
    #expect(remaining.string(from: 5 * 60 + 7) == "About 5 minutes remaining")
    let collapsing = Self.formatter(.full, [.minute, .second])
    collapsing.collapsesLargestUnit = true
    #expect(collapsing.string(from: 65) == "65 seconds")
    #expect(collapsing.string(from: 125) == "2 minutes, 5 seconds")
    let formatter = Self.formatter(.abbreviated)
    var components = DateComponents()
    components.minute = 90
    #expect(formatter.string(from: components) == "1h 30m")
    #expect(formatter.string(for: components) == "1h 30m")
    #expect(formatter.string(for: 42.0) == "42s")
    #expect(formatter.string(for: "42") == nil)
    let start = Date(timeIntervalSinceReferenceDate: 0)
    #expect(formatter.string(from: start, to: start + 61) == "1m 1s")
    #expect(DateComponentsFormatter.localizedString(from: components, unitsStyle: .positional) == "1:30:00")
  }
}
