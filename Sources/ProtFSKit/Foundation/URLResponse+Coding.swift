import Foundation

extension URLResponse {
  /// Responses archive with secure coding, as Foundation's.
  public class var supportsSecureCoding: Bool { true }
}

/// The one codec of an archived response (`URLResponse` and `HTTPURLResponse`'s `encode(with:)`
/// and `init?(coder:)`): each field is bytes or a number in the response's own entry, never an
/// object of its own. Reading back an archive someone changed then names no class (Foundation on
/// Linux stops the app at a class it did not expect) and a field of another kind reads as missing.
enum ResponseArchive {
  /// The URL's absolute string, UTF-8.
  static let url = "URL"
  /// The MIME type given to `URLResponse`'s initialiser, UTF-8.
  static let mimeType = "MIMEType"
  /// The text encoding's name given to it, UTF-8.
  static let textEncodingName = "textEncodingName"
  /// The expected length, a number.
  static let expectedContentLength = "expectedContentLength"
  /// An HTTP response's status, a number.
  static let statusCode = "statusCode"
  /// How many header fields there are, a number; field N is under `field.N.name` and `field.N.value`.
  static let fieldCount = "fieldCount"
  /// The most bytes a text and the most header fields read back: far past any response's.
  static let limit = 1 << 20

  /// The fields `URLResponse` archives.
  struct Fields {
    var url: URL?
    var mimeType: String?
    var textEncodingName: String?
    var expectedContentLength: Int64

    /// The fields in `coder`; nil when one is there but not of its kind (a URL that is not one,
    /// bytes that are not UTF-8, a length below -1).
    init?(_ coder: NSCoder) {
      typealias Archive = ResponseArchive
      guard coder.allowsKeyedCoding, let url = Archive.text(Archive.url, in: coder),
        let mimeType = Archive.text(Archive.mimeType, in: coder),
        let textEncodingName = Archive.text(Archive.textEncodingName, in: coder)
      else { return nil }
      if let url {
        guard let parsed = URL(string: url) else { return nil }
        self.url = parsed
      }
      self.mimeType = mimeType
      self.textEncodingName = textEncodingName
      expectedContentLength = coder.decodeInt64(forKey: Archive.expectedContentLength)
      guard expectedContentLength >= -1 else { return nil }
    }
  }

  /// Writes `text` under `key` as its UTF-8 bytes; nothing for nil.
  static func encode(_ text: String?, forKey key: String, to coder: NSCoder) {
    guard let text else { return }
    let bytes = Array(text.utf8)
    coder.encodeBytes(bytes, length: bytes.count, forKey: key)
  }

  /// Writes header fields, sorted by name so that a response archives one way.
  static func encode(_ fields: [String: String], to coder: NSCoder) {
    let sorted = fields.sorted { $0.key < $1.key }
    coder.encode(sorted.count, forKey: fieldCount)
    for (index, field) in sorted.enumerated() {
      encode(field.key, forKey: "field.\(index).name", to: coder)
      encode(field.value, forKey: "field.\(index).value", to: coder)
    }
  }

  /// The text under `key`: `.some(nil)` when there is none, nil when what is there is not UTF-8
  /// bytes within `limit`.
  static func text(_ key: String, in coder: NSCoder) -> String?? {
    guard coder.containsValue(forKey: key) else { return .some(nil) }
    let text = coder.withDecodedUnsafeBytes(forKey: key) { bytes -> String? in
      guard let bytes, bytes.count <= limit else { return nil }
      return String(validating: bytes, as: UTF8.self)
    }
    return text.map { .some($0) }
  }

  /// The header fields in `coder` (none when there is no count); nil when the count is past
  /// `limit` or a field is missing or not UTF-8.
  static func headerFields(in coder: NSCoder) -> [AnyHashable: Any]? {
    let count = coder.decodeInteger(forKey: fieldCount)
    guard (0...limit).contains(count) else { return nil }
    var fields: [AnyHashable: Any] = [:]
    for index in 0..<count {
      guard let name = text("field.\(index).name", in: coder) ?? nil,
        let value = text("field.\(index).value", in: coder) ?? nil
      else { return nil }
      fields[name] = value
    }
    return fields
  }
}
