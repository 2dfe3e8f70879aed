import Foundation
import ProtFS

/// The one way the command line writes JSON: every `--json` document, every JSON line (`watch`,
/// `tasks events --json`, `--progress json`) goes through these encoders, so that keys, escaping
/// and dates are the same everywhere.
///
/// Dates are ISO 8601 in UTC with milliseconds, `2026-12-02T04:10:00.123Z`: exact enough for a
/// task's timestamps, and read by every ISO 8601 parser. The files protfs keeps on the device have
/// their own codecs; only their dates are written alike.
package enum JSONOutput {
  /// An encoder for one pretty, key-sorted document (`--json`).
  package static func documentEncoder() -> JSONEncoder {
    encoder([.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
  }

  /// An encoder for one compact, key-sorted line (JSON Lines).
  package static func lineEncoder() -> JSONEncoder { encoder([.sortedKeys, .withoutEscapingSlashes]) }

  /// `date` as the JSON output writes it (without quotes): `2026-12-02T04:10:00.123Z`, the state
  /// files' own text (`JSONStateFile.timestamp`, the format style's, written without its cost).
  package static func string(_ date: Date) -> String { JSONStateFile.timestamp(date) }

  /// `secondsSince1970` (the task store's timestamps) as a date.
  package static func date(secondsSince1970: Double) -> Date { Date(timeIntervalSince1970: secondsSince1970) }

  private static func encoder(_ formatting: JSONEncoder.OutputFormatting) -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = formatting
    encoder.dateEncodingStrategy = .custom { date, encoder in
      var container = encoder.singleValueContainer()
      try container.encode(string(date))
    }
    return encoder
  }
}
