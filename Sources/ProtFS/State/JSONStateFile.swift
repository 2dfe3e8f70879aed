import Foundation
import ProtFSSystem

/// The one codec of the JSON state files protfs keeps on the device (`lock-state.json` and the
/// transition journal, `.protfs/apps/<bundle-id>.json` and the crash reports,
/// `.protfs/mounts/<pid>.json`): one encoder and decoder configuration, one date format and one
/// answer to a file that does not decode.
///
/// Written: sorted keys, pretty-printed, a final newline; dates in ISO 8601 with milliseconds
/// (`2026-11-30T20:10:35.123Z`: the kill times of crash reports are checked to 100 ms). Read: the
/// same, and ISO 8601 without fractional seconds, which `lock-state.json` and the mounts' files
/// held before. A file that is not JSON of the expected shape is a `.malformed` `ProtFSError` that
/// names its path and says how to fix it.
package enum JSONStateFile {
  /// `value` as the bytes of its file; `path` names the file in the error.
  package static func encode<T: Encodable>(_ value: T, path: String) throws(ProtFSError) -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.dateEncodingStrategy = .custom { date, encoder in
      var container = encoder.singleValueContainer()
      try container.encode(timestamp(date))
    }
    do {
      return Array(try encoder.encode(value)) + [0x0A]
    } catch {
      throw ProtFSError(.io, "Cannot encode '\(path)': \(error).", path: path)
    }
  }

  /// The value that `bytes`, read from the file at `path`, hold. `what` names the file in the
  /// error ("the app record"), `remedy` says how to fix it.
  package static func decode<T: Decodable>(
    _ type: T.Type, from bytes: [UInt8], path: String, what: String, remedy: Remedy
  ) throws(ProtFSError) -> T {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .custom { decoder in
      let container = try decoder.singleValueContainer()
      let text = try container.decode(String.self)
      guard let date = date(text) else {
        throw DecodingError.dataCorruptedError(
          in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
      }
      return date
    }
    do {
      return try decoder.decode(type, from: Data(bytes))
    } catch {
      throw malformed(path: path, what: what, remedy: remedy, detail: describe(error))
    }
  }

  /// What a decoding error says, in a sentence: the field (as a dotted path) and what is wrong.
  private static func describe(_ error: any Error) -> String {
    func at(_ context: DecodingError.Context) -> String {
      let path = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }.joined(separator: ".")
      return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
    }
    switch error as? DecodingError {
    case .dataCorrupted(let context)?: return at(context)
    case .keyNotFound(let key, let context)?: return at(context) + " ('\(key.stringValue)' is missing)"
    case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?: return at(context)
    default: return "\(error)"
    }
  }

  /// The error for the file at `path` that does not hold what it should (`detail` says what is
  /// wrong, when known).
  package static func malformed(path: String, what: String, remedy: Remedy, detail: String? = nil) -> ProtFSError {
    ProtFSError(
      .malformed,
      "The \(what) '\(path)' is not valid JSON of the expected shape\(detail.map { ": \($0)" } ?? "").",
      path: path, remedy: remedy)
  }

  /// The value of the file `name` in `directory`; nil when there is no such file. At most `limit`
  /// bytes are read (`AtomicFile.read`: no symlink followed).
  package static func read<T: Decodable>(
    _ type: T.Type, named name: String, in directory: DirectoryHandle, limit: Int = 1 << 20, what: String,
    remedy: Remedy
  ) throws(ProtFSError) -> T? {
    let bytes: [UInt8]
    do {
      bytes = try AtomicFile.read(named: name, in: directory, limit: limit, stateFile: true)
    } catch  where error.code == .notFound {
      return nil
    }
    return try decode(type, from: bytes, path: directory.pathOf(name), what: what, remedy: remedy)
  }

  /// Writes `value` as the file `name` in `directory` (`AtomicFile.write` with `options`).
  package static func write<T: Encodable>(
    _ value: T, named name: String, in directory: DirectoryHandle, options: AtomicFile.Options = AtomicFile.Options()
  ) throws(ProtFSError) {
    try AtomicFile.write(
      try encode(value, path: directory.pathOf(name)), named: name, in: directory, options: options)
  }

  /// `date` as the state files write it: `2026-11-30T20:10:35.123Z`, in UTC, the milliseconds cut
  /// (not rounded), as `Date.ISO8601FormatStyle(includingFractionalSeconds: true)` writes it.
  /// Formatted by hand: the format style's first use costs a command about a millisecond (its
  /// calendar is made), and every launch writes dates. Without `milliseconds`, the seconds end
  /// it (`2026-11-30T20:10:35Z`), the fraction cut, as `ISO8601FormatStyle()` writes it.
  /// The seconds from 1970, either way, within which `timestamp` writes a date by hand: the years
  /// 1 to 9999 and a little more. Times protfs keeps stay within it.
  package static let timestampLimit: Double = 2.5e11

  package static func timestamp(_ date: Date, milliseconds: Bool = true) -> String {
    let interval = date.timeIntervalSince1970
    let whole = interval.rounded(.down)
    var parts = tm()
    guard whole.magnitude < timestampLimit, case var seconds = time_t(whole), gmtime_r(&seconds, &parts) != nil,
      (-1900...8099).contains(parts.tm_year)
    else { return date.formatted(milliseconds ? withMilliseconds : withoutFraction) }
    let millis = min(999, Int32(((interval - whole) * 1000).rounded(.down)))
    var text: [UInt8] = []
    text.reserveCapacity(24)
    func append(_ value: Int32, digits: Int, then separator: UInt8) {
      var divisor: Int32 = 1
      for _ in 1..<digits { divisor *= 10 }
      while divisor > 0 {
        text.append(UInt8(truncatingIfNeeded: 0x30 + value / divisor % 10))
        divisor /= 10
      }
      text.append(separator)
    }
    append(parts.tm_year + 1900, digits: 4, then: 0x2D)  // -
    append(parts.tm_mon + 1, digits: 2, then: 0x2D)
    append(parts.tm_mday, digits: 2, then: 0x54)  // T
    append(parts.tm_hour, digits: 2, then: 0x3A)  // :
    append(parts.tm_min, digits: 2, then: 0x3A)
    if milliseconds {
      append(parts.tm_sec, digits: 2, then: 0x2E)  // .
      append(millis, digits: 3, then: 0x5A)  // Z
    } else {
      append(parts.tm_sec, digits: 2, then: 0x5A)
    }
    return String(decoding: text, as: UTF8.self)
  }

  /// The time `text` gives, with milliseconds or (as older files have it) without.
  package static func date(_ text: String) -> Date? {
    if let date = utcDate(text) { return date }
    return (try? withMilliseconds.parse(text)) ?? (try? withoutFraction.parse(text))
  }

  /// `text` read without the format style when it is exactly what protfs writes
  /// (`YYYY-MM-DDTHH:MM:SS.mmmZ` or `YYYY-MM-DDTHH:MM:SSZ`) and names a time that exists; nil for
  /// anything else, which the format style decides.
  static func utcDate(_ text: String) -> Date? {
    let bytes = Array(text.utf8)
    guard bytes.count == 20 || bytes.count == 24, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54,
      bytes[13] == 0x3A, bytes[16] == 0x3A, bytes.last == 0x5A, bytes.count == 20 || bytes[19] == 0x2E
    else { return nil }
    func number(_ range: Range<Int>) -> Int32? {
      var value: Int32 = 0
      for index in range {
        let digit = bytes[index] &- 0x30
        guard digit < 10 else { return nil }
        value = value * 10 + Int32(digit)
      }
      return value
    }
    guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
      let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
      let millis = bytes.count == 24 ? number(20..<23) : 0
    else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = month - 1
    parts.tm_mday = day
    parts.tm_hour = hour
    parts.tm_min = minute
    parts.tm_sec = second
    var seconds = timegm(&parts)
    // timegm carries over (February 30 is March 2); only a time that exists as written is taken.
    var check = tm()
    guard gmtime_r(&seconds, &check) != nil, check.tm_year == year - 1900, check.tm_mon == month - 1,
      check.tm_mday == day, check.tm_hour == hour, check.tm_min == minute, check.tm_sec == second
    else { return nil }
    // From the reference date, as Foundation counts.
    return Date(
      timeIntervalSinceReferenceDate: Double(seconds) - Date.timeIntervalBetween1970AndReferenceDate
        + Double(millis) / 1000)
  }

  /// ISO 8601 with milliseconds, in UTC.
  private static let withMilliseconds = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
  /// ISO 8601 to the second, in UTC (`JSONEncoder`'s `.iso8601`).
  private static let withoutFraction = Date.ISO8601FormatStyle()
}
