import Foundation

/// A property list's value, written with `PropertyListEncoder`.
///
/// `PropertyListSerialization.data(fromPropertyList:)` goes through CoreFoundation, which in a
/// binary linked with `--static-swift-stdlib` (how protfs ships) cannot bridge a Swift array: every
/// Info.plist holding one failed to install ("An error occurred in the destination for the
/// data"). The encoder is Swift throughout, so protfs builds its values as these. Encoded with a
/// `JSONEncoder`, a value is the JSON value itself (an app's entitlements in `inspect --json`).
package indirect enum PropertyListValue: Encodable, Equatable, Sendable {
  case string(String)
  case integer(Int64)
  case real(Double)
  case bool(Bool)
  case date(Date)
  case data(Data)
  case array([PropertyListValue])
  case dictionary([String: PropertyListValue])

  /// The value of `parsed`, something `PropertyListSerialization` read; nil for anything a
  /// property list cannot hold.
  package init?(_ parsed: Any) {
    switch parsed {
    // Before the numbers: an `NSNumber` of 0 or 1 would also cast to `Bool`. (A parsed
    // `<true/>` is a `Bool`.)
    case let value as Bool where type(of: parsed) == Bool.self: self = .bool(value)
    case let value as NSNumber:
      let kind = String(cString: value.objCType)
      if kind == "B" {
        self = .bool(value.boolValue)
      } else if kind == "d" || kind == "f" {
        self = .real(value.doubleValue)
      } else {
        self = .integer(value.int64Value)
      }
    case let value as String: self = .string(value)
    case let value as Int: self = .integer(Int64(value))
    case let value as Double: self = .real(value)
    case let value as Date: self = .date(value)
    case let value as Data: self = .data(value)
    case let value as [Any]:
      var items: [PropertyListValue] = []
      for item in value {
        guard let converted = PropertyListValue(item) else { return nil }
        items.append(converted)
      }
      self = .array(items)
    case let value as [String: Any]:
      var items: [String: PropertyListValue] = [:]
      for (key, item) in value {
        guard let converted = PropertyListValue(item) else { return nil }
        items[key] = converted
      }
      self = .dictionary(items)
    default: return nil
    }
  }

  package func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .string(let value): try container.encode(value)
    case .integer(let value): try container.encode(value)
    case .real(let value): try container.encode(value)
    case .bool(let value): try container.encode(value)
    case .date(let value): try container.encode(value)
    case .data(let value): try container.encode(value)
    case .array(let value): try container.encode(value)
    case .dictionary(let value): try container.encode(value)
    }
  }

  /// The value as an XML property list.
  package func xml() throws -> Data {
    let encoder = PropertyListEncoder()
    encoder.outputFormat = .xml
    return try encoder.encode(self)
  }
}
