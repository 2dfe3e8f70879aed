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
      bytes = try AtomicFile.read(named: name, in: directory, limit: limit)
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

  /// `date` as the state files write it: `2026-11-30T20:10:35.123Z`.
  package static func timestamp(_ date: Date) -> String {
    date.formatted(withMilliseconds)
  }

  /// The time `text` gives, with milliseconds or (as older files have it) without.
  package static func date(_ text: String) -> Date? {
    (try? withMilliseconds.parse(text)) ?? (try? withoutFraction.parse(text))
  }

  /// ISO 8601 with milliseconds, in UTC.
  private static let withMilliseconds = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
  /// ISO 8601 to the second, in UTC (`JSONEncoder`'s `.iso8601`).
  private static let withoutFraction = Date.ISO8601FormatStyle()
}
