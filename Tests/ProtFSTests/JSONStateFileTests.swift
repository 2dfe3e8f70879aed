import Foundation
import ProtFSApp
import ProtFSLock
import ProtFSMount
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// `JSONStateFile`, the one codec of the device's JSON state files: one date format written, the
/// older one still read, and one error for a file that does not decode.
@Suite struct JSONStateFileTests {
  /// The bytes an older protfs wrote for `value`: ISO 8601 dates to the second.
  private func olderFormat<T: Encodable>(_ value: T) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .iso8601
    return Array(try encoder.encode(value)) + [0x0A]
  }

  @Test func datesAreWrittenWithMillisecondsAndReadBack() throws {
    let t = try TestDevice()
    let store = try LockStore(t.device)
    let since = Date(timeIntervalSince1970: 1_800_000_000.125)
    try store.write(LockRecord.initial(at: since))
    let text = try String(contentsOfFile: t.device.stateDirectory + "/lock-state.json", encoding: .utf8)
    #expect(text.contains(#""since" : "2027-01-15T08:00:00.125Z""#), "\(text)")
    let read = try store.record(now: Date())
    #expect(abs(read.since.timeIntervalSince(since)) < 0.001)
    #expect(JSONStateFile.date(JSONStateFile.timestamp(since)).map { abs($0.timeIntervalSince(since)) < 0.001 } == true)
  }

  /// The timestamps are written and read by hand (the format style costs each command about a
  /// millisecond at its first use): the same text as `Date.ISO8601FormatStyle`, before 1970 and at
  /// the edges of a second too, and the same time read back; what the hand-written reader does not
  /// take (a day that does not exist, another zone) goes to the format style, as before.
  @Test func handWrittenTimestampsAreTheFormatStylesOwn() {
    let style = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
    var generator = SystemRandomNumberGenerator()
    var intervals: [Double] = [
      0, -0.0005, 0.9995, 1.0005, -1.5, 1_000_000_000.0009999, 1_796_308_132.9999, 0.5, -0.5, 2.5, 1.4999, -2.5,
    ]
    // A thousand: enough to meet every kind of second, cheap enough not to hold a thread of the
    // cooperative pool that the end-to-end tests wait on (20,000 held one for 40 s in the suite).
    for _ in 0..<1_000 {
      let whole = Double(Int64.random(in: -2_000_000_000...4_000_000_000, using: &generator))
      intervals.append(whole + Double(Int.random(in: 0...999, using: &generator)) / 1000)
    }
    var written: [String] = []
    var read: [String] = []
    // To the second, as `status` prints its dates. (ISO8601DateFormatter, which it used before,
    // rounds to the millisecond first: it differs where a fraction is within half of one of a
    // whole second.)
    let seconds = Date.ISO8601FormatStyle()
    for interval in intervals {
      let date = Date(timeIntervalSince1970: interval)
      let text = JSONStateFile.timestamp(date)
      if text != date.formatted(style) { written.append("\(interval): \(text), not \(date.formatted(style))") }
      let short = JSONStateFile.timestamp(date, milliseconds: false)
      if short != date.formatted(seconds) { written.append("\(interval): \(short), not \(date.formatted(seconds))") }
      guard let mine = JSONStateFile.utcDate(text), let theirs = try? style.parse(text),
        abs(mine.timeIntervalSince(theirs)) < 1e-6
      else {
        read.append(text)
        continue
      }
    }
    #expect(written.isEmpty, "\(written.prefix(5))")
    #expect(read.isEmpty, "\(read.prefix(5))")
    #expect(
      JSONStateFile.utcDate("2026-12-03T10:00:00Z") == (try? Date.ISO8601FormatStyle().parse("2026-12-03T10:00:00Z")))
    for other in [
      "2026-02-30T00:00:00Z", "2026-12-03T24:00:00Z", "2026-12-03T10:00:00+00:00", "2026-12-03T10:00:00.5Z",
    ] {
      #expect(JSONStateFile.utcDate(other) == nil, "\(other)")
      #expect(JSONStateFile.date(other) == (try? style.parse(other)) ?? (try? Date.ISO8601FormatStyle().parse(other)))
    }
    #expect(JSONStateFile.date("2026-13-01T00:00:00Z") == nil)
    #expect(JSONStateFile.date("garbage") == nil)
  }

  @Test func theLockStateAndMountsOfAnOlderProtfsAreStillRead() throws {
    let t = try TestDevice()
    let store = try LockStore(t.device)
    var record = LockRecord.initial(at: Date(timeIntervalSince1970: 1_800_000_000))
    record.state = .locked
    record.retryAfter = Date(timeIntervalSince1970: 1_800_000_060)
    try LockStore.replace(LockStore.stateFileName, in: store.directory, with: olderFormat(record))
    #expect(try store.record(now: Date()) == record)

    let registry = MountRegistry(device: t.device)
    let mount = MountRecord(
      mountpoint: t.directory + "/mnt", pid: getpid(), since: Date(timeIntervalSince1970: 1_800_000_000))
    try registry.register(mount)
    let mounts = try DirectoryHandle(path: t.device.stateDirectory + "/mounts")
    try AtomicFile.write(olderFormat(mount), named: "\(getpid()).json", in: mounts)
    #expect(registry.readRecords().records == [mount])
  }

  @Test func anAppRecordOfAnOlderProtfsIsStillRead() throws {
    let t = try TestDevice()
    let older =
      #"{"backgroundTime":30,"bundleID":"com.example.app","forceQuit":false,"lastFetch":{"duration":0.5,"result":"newData","time":"2026-11-30T20:10:35.123Z"},"lastLaunchCommand":[],"state":"notRunning","tasks":[]}"#
    try FileManager.default.createDirectory(
      atPath: t.device.stateDirectory + "/apps", withIntermediateDirectories: true)
    try Data(older.utf8).write(to: URL(fileURLWithPath: t.device.stateDirectory + "/apps/com.example.app.json"))
    let record = try #require(try AppStore(device: t.device).record(BundleID("com.example.app")))
    #expect(record.lastFetch?.result == "newData")
    #expect(record.lastFetch.map { JSONStateFile.timestamp($0.time) } == "2026-11-30T20:10:35.123Z")
  }

  @Test func aFileThatDoesNotDecodeIsAnErrorNamingItsPathAndAFix() throws {
    let t = try TestDevice()
    let state = t.device.stateDirectory
    try FileManager.default.createDirectory(atPath: state + "/apps", withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: state + "/mounts", withIntermediateDirectories: true)
    try Data("garbage{".utf8).write(to: URL(fileURLWithPath: state + "/apps/com.example.app.json"))
    try Data(#"{"pid": 12}"#.utf8).write(to: URL(fileURLWithPath: state + "/mounts/12.json"))
    try Data("{}".utf8).write(to: URL(fileURLWithPath: state + "/lock-state.json"))

    let app = #expect(throws: ProtFSError.self) { try AppStore(device: t.device).record(BundleID("com.example.app")) }
    let (mounts, unreadable) = MountRegistry(device: t.device).readRecords()
    let lock = #expect(throws: ProtFSError.self) { try LockStore(t.device).record(now: Date()) }
    #expect(mounts.isEmpty && unreadable.count == 1)
    let paths = [state + "/apps/com.example.app.json", state + "/mounts/12.json", state + "/lock-state.json"]
    for (error, path) in zip([app, unreadable.first, lock], paths) {
      #expect(error?.code == .malformed)
      #expect(error?.path == path)
      #expect(
        error?.message.contains("'\(path)' is not valid JSON of the expected shape") == true,
        "\(String(describing: error))")
      #expect(error?.remedy != nil)
    }
    #expect(unreadable.first?.message.contains("'mountpoint' is missing") == true)
  }

  @Test func anAppRecordNamingAnotherAppIsRefused() throws {
    let t = try TestDevice()
    let store = AppStore(device: t.device)
    try store.write(AppRecord(bundleID: "com.example.other", backgroundTime: 30))
    let apps = t.device.stateDirectory + "/apps"
    try FileManager.default.moveItem(atPath: apps + "/com.example.other.json", toPath: apps + "/com.example.app.json")
    let error = #expect(throws: ProtFSError.self) { try store.record(BundleID("com.example.app")) }
    #expect(error?.message.contains("it is the record of 'com.example.other'") == true)
  }
}
