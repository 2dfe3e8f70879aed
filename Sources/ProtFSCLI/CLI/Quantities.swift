import Foundation
import ProtFSSystem

/// Byte sizes as people write them: `500`, `10K`, `1.5GiB`, `100MB`.
///
/// A bare K, M, G or T (and KiB, MiB, …) is binary (1024), as `du -h` and `ls -h` print; KB, MB, …
/// are decimal (1000).
package enum ByteSize {
  /// Parses a size, or throws an error with examples of the right format.
  package static func parse(_ text: String) throws(ProtFSError) -> Int64 {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    let number = trimmed.prefix { $0.isNumber || $0 == "." }
    let unit = trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces).lowercased()
    let multipliers: [String: Double] = [
      "": 1, "b": 1, "k": 1024, "kib": 1024, "kb": 1000, "m": 1_048_576, "mib": 1_048_576, "mb": 1e6,
      "g": 1_073_741_824, "gib": 1_073_741_824, "gb": 1e9, "t": 1_099_511_627_776, "tib": 1_099_511_627_776, "tb": 1e12,
    ]
    guard let value = Double(number), value >= 0, let multiplier = multipliers[unit], value * multiplier < 9e18 else {
      throw ProtFSError(
        .invalidArgument, "'\(text)' is not a size.",
        remedy: .advice(
          "use a number with an optional unit, for example 500, 64K, 10MiB, 1.5G or 100MB (K/M/G/T are 1024-based, KB/MB/GB/TB 1000-based)"
        )
      )
    }
    return Int64(value * multiplier)
  }

  /// `1.5 MiB`-style text.
  package static func format(_ bytes: Int64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var index = 0
    while value >= 1024 && index < units.count - 1 {
      value /= 1024
      index += 1
    }
    return index == 0 ? "\(bytes) B" : String(format: "%.1f %@", value, units[index])
  }
}

/// Durations as people write them: `30s`, `15m`, `2h`, `7d`, `1w`, `1h30m`.
package enum HumanDuration {
  /// The longest duration accepted: 100 years. Longer is a typo, and would overflow the
  /// nanosecond and date arithmetic it feeds.
  package static let maximum: TimeInterval = 100 * 365.25 * 86_400

  /// Parses a duration into seconds, or throws an error with examples of the right format.
  ///
  /// `range` bounds the value (default: 0 to ``maximum``); outside it is an error naming the range.
  package static func parse(_ text: String, in range: ClosedRange<TimeInterval> = 0...maximum) throws(ProtFSError)
    -> TimeInterval
  {
    let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604_800]
    var total: TimeInterval = 0
    var number = ""
    var sawUnit = false
    for character in text.lowercased() {
      if character.isNumber || character == "." {
        number.append(character)
      } else if let unit = units[character], let value = Double(number) {
        total += value * unit
        number = ""
        sawUnit = true
      } else {
        sawUnit = false
        break
      }
    }
    guard sawUnit, number.isEmpty, !text.isEmpty else {
      throw ProtFSError(
        .invalidArgument, "'\(text)' is not a duration.",
        remedy: .advice("use numbers with units s, m, h, d or w, for example 30s, 15m, 2h, 7d or 1h30m"))
    }
    guard total.isFinite, range.contains(total) else {
      throw ProtFSError(
        .invalidArgument, "The duration '\(text)' is out of range.",
        remedy: .advice("use a duration from \(format(range.lowerBound)) to \(format(range.upperBound))"))
    }
    return total
  }

  /// `90s`, `15m`, `2h`, `7d`-style text: the largest unit that divides `seconds` exactly.
  package static func format(_ seconds: TimeInterval) -> String {
    for (unit, size) in [("y", 365.25 * 86_400), ("d", 86_400.0), ("h", 3600.0), ("m", 60.0)]
    where seconds >= size && (seconds / size).rounded() == seconds / size {
      return unit == "y" ? "\(Int(seconds / size)) years" : "\(Int(seconds / size))\(unit)"
    }
    return seconds == seconds.rounded() ? "\(Int(seconds))s" : "\(seconds)s"
  }
}
