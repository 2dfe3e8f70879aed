import ProtFSSystem

/// A validated reverse-DNS bundle identifier, such as `com.example.app`.
///
/// Apple allows letters, digits, hyphens and periods. protfs also requires at least two labels, no
/// empty label and at most 255 bytes, so an identifier is always a safe single path component.
public struct BundleID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
  /// The identifier's text.
  public let rawValue: String

  /// Validates `text`, or throws an error that says what is wrong with it.
  public init(_ text: String) throws(ProtFSError) {
    func invalid(_ why: String) -> ProtFSError {
      ProtFSError(
        .invalidArgument, "'\(text)' is not a valid bundle identifier: \(why).",
        remedy: .advice("use reverse-DNS form such as com.example.app (letters, digits, '-' and '.')"))
    }
    if text.isEmpty { throw invalid("it is empty") }
    if text.utf8.count > 255 { throw invalid("it is longer than 255 bytes") }
    if let bad = text.unicodeScalars.first(where: { !Self.isAllowed($0) }) {
      let shown = bad == " " ? "a space" : bad == "/" ? "'/'" : "'\(bad.escaped(asASCII: true))'"
      throw invalid("it contains \(shown)")
    }
    let labels = text.split(separator: ".", omittingEmptySubsequences: false)
    if labels.contains(where: \.isEmpty) { throw invalid("it has an empty label (a leading, trailing or double '.')") }
    if labels.count < 2 { throw invalid("it has a single label; reverse-DNS needs at least two") }
    rawValue = text
  }

  private static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar {
    case "a"..."z", "A"..."Z", "0"..."9", "-", ".": true
    default: false
    }
  }

  /// The identifier's text.
  public var description: String { rawValue }

  /// Orders by text.
  public static func < (lhs: BundleID, rhs: BundleID) -> Bool { lhs.rawValue < rhs.rawValue }

  /// Decodes and validates.
  public init(from decoder: any Decoder) throws {
    let text = try decoder.singleValueContainer().decode(String.self)
    try self.init(text)
  }

  /// Encodes as a string.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(rawValue)
  }
}
