import Foundation

/// A name in a directory as the kernel keeps it: any bytes but `/` and NUL, UTF-8 or not.
///
/// A Swift `String` holds Unicode only, so a name that is not UTF-8 cannot pass through one
/// unchanged (decoding replaces its bytes with U+FFFD, and the name no longer opens). Whatever may
/// carry such a name, a path from the command line or a directory entry, keeps it as a `FileName`
/// down to the system call; messages show it escaped (`description`).
public struct FileName: Hashable, Sendable, Comparable, CustomStringConvertible {
  /// The bytes, without a terminating NUL.
  public let bytes: [UInt8]

  /// The name `text`, as UTF-8.
  public init(_ text: String) { bytes = Array(text.utf8) }

  /// The name made of `bytes` (no `/`, no NUL: one path component).
  public init(bytes: some Sequence<UInt8>) { self.bytes = Array(bytes) }

  /// The name in the C string `name` (a `dirent`'s, say).
  public init(cString name: UnsafePointer<CChar>) {
    bytes = Array(UnsafeBufferPointer(start: name, count: strlen(name))).map { UInt8(bitPattern: $0) }
  }

  /// The name as text when it is UTF-8; nil when it is not.
  public var text: String? { String(validating: bytes, as: UTF8.self) }

  /// The name as messages and listings show it (`DisplayText.escaping`): UTF-8 as it is, control
  /// characters and bytes that are not UTF-8 as `\xNN`.
  public var description: String { DisplayText.escaping(bytes) }

  /// The name NUL-terminated, for a system call's `const char *`.
  public var cString: [CChar] { bytes.map { CChar(bitPattern: $0) } + [0] }

  /// Calls `body` with the name NUL-terminated, in temporary memory (on the stack for a name of
  /// the usual length): no allocation per call, for the hot paths of a walk.
  public func withCString<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
    let count = bytes.count
    return try withUnsafeTemporaryAllocation(of: CChar.self, capacity: count + 1) { (buffer) throws(E) -> R in
      bytes.withUnsafeBufferPointer { source in
        for index in 0..<count { buffer[index] = CChar(bitPattern: source[index]) }
      }
      buffer[count] = 0
      return try body(UnsafePointer(buffer.baseAddress!))
    }
  }

  /// Orders byte by byte, as `ls` in the C locale does.
  public static func < (lhs: FileName, rhs: FileName) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

/// Raw bytes (a path, a link's target) as text for people: the one escaping every listing, message
/// and report of protfs uses for names that are not plain UTF-8.
public enum DisplayText {
  /// UTF-8 as is, except control characters and bytes that are not UTF-8, which become `\xNN`.
  public static func escaping(_ bytes: some Collection<UInt8>) -> String {
    if bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) { return String(decoding: bytes, as: UTF8.self) }
    var out = ""
    // Decode scalar by scalar, keeping the bytes of each so that an invalid sequence is shown byte for byte.
    var index = bytes.startIndex
    while index != bytes.endIndex {
      guard let (scalar, next) = UTF8Scalar.decode(bytes, at: index) else { break }
      let count = bytes.distance(from: index, to: next)
      if scalar & 0x8000_0000 != 0 || (scalar >= 0xD800 && scalar <= 0xDFFF) || scalar > 0x10FFFF
        || (count == 3 && scalar < 0x800) || (count == 4 && scalar < 0x10000)
      {
        for byte in bytes[index..<next] { out += "\\x" + hex(byte) }
      } else if scalar < 0x20 || scalar == 0x7F {
        out += "\\x" + hex(UInt8(scalar))
      } else {
        out.unicodeScalars.append(Unicode.Scalar(scalar)!)
      }
      index = next
    }
    return out
  }

  private static func hex(_ byte: UInt8) -> String {
    let digits = Array("0123456789ABCDEF")
    return String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
  }
}

/// Decoding UTF-8 one scalar at a time, leniently: what does not start valid UTF-8 is one byte.
package enum UTF8Scalar {
  /// Decodes one UTF-8 scalar at `index`; a byte that does not start valid UTF-8 counts as itself,
  /// with bit 31 set (outside Unicode). Nil at the end.
  package static func decode<C: Collection<UInt8>>(_ bytes: C, at index: C.Index) -> (UInt32, C.Index)? {
    guard index < bytes.endIndex else { return nil }
    let lead = bytes[index]
    let length: Int
    switch lead {
    case 0..<0x80: return (UInt32(lead), bytes.index(after: index))
    case 0xC2..<0xE0: length = 2
    case 0xE0..<0xF0: length = 3
    case 0xF0..<0xF5: length = 4
    default: return (UInt32(lead) | 0x8000_0000, bytes.index(after: index))  // a lone byte, outside Unicode
    }
    var value = UInt32(lead) & (0xFF >> (length + 1))
    var i = bytes.index(after: index)
    for _ in 1..<length {
      guard i < bytes.endIndex, bytes[i] & 0xC0 == 0x80 else {
        return (UInt32(lead) | 0x8000_0000, bytes.index(after: index))
      }
      value = value << 6 | UInt32(bytes[i] & 0x3F)
      i = bytes.index(after: i)
    }
    return (value, i)
  }
}
