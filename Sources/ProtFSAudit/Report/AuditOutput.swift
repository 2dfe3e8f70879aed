import Foundation
import ProtFSSystem

/// Where a report's bytes go: a file descriptor, through a buffer, or memory (for tests).
public final class AuditOutput {
  private let fd: Int32?
  private var buffer: [UInt8] = []
  /// The bytes written so far, when writing to memory.
  public private(set) var captured: [UInt8] = []
  /// The first write error, if any (for example EPIPE when the reader went away).
  public private(set) var writeError: ProtFSError?
  private let description: String

  /// Writes to `fd` (not closed); `description` names it in errors.
  public init(fileDescriptor fd: Int32, description: String) {
    self.fd = fd
    self.description = description
    buffer.reserveCapacity(1 << 16)
  }

  /// Keeps everything in `captured`.
  public init() {
    fd = nil
    description = "memory"
  }

  /// The captured bytes as text.
  public var text: String { String(decoding: captured, as: UTF8.self) }

  /// Appends text.
  public func write(_ text: String) {
    var text = text
    text.withUTF8 { buffer.append(contentsOf: $0) }
    if buffer.count >= 1 << 16 { flush() }
  }

  /// Appends constant text without building a `String`.
  public func writeConstant(_ text: StaticString) {
    text.withUTF8Buffer { buffer.append(contentsOf: $0) }
  }

  /// Appends `text` as a JSON string literal, quotes included.
  public func writeJSON(_ text: String) {
    Escape.appendJSON(text, to: &buffer)
    if buffer.count >= 1 << 16 { flush() }
  }

  /// Appends a finding's path as `AuditFinding.path` would show it, as a JSON string.
  public func writeJSONPath(_ bytes: ArraySlice<UInt8>) {
    withBuffer { Escape.appendJSONPath(bytes, to: &$0) }
  }

  /// Lets `body` append to the buffer directly: one exclusive access for a whole record instead
  /// of one per piece (a report of many findings pays the runtime's access check per call).
  public func withBuffer(_ body: (inout [UInt8]) -> Void) {
    body(&buffer)
    if buffer.count >= 1 << 16 { flush() }
  }

  /// Appends an optional string as JSON (`null` when nil).
  public func writeJSON(_ text: String?) {
    if let text { writeJSON(text) } else { writeConstant("null") }
  }

  /// Writes out what is buffered.
  public func flush() {
    guard let fd else {
      captured += buffer
      buffer.removeAll(keepingCapacity: true)
      return
    }
    if writeError == nil {
      do {
        try AtomicFile.writeAll(fd, buffer, path: description)
      } catch {
        writeError = error
      }
    }
    buffer.removeAll(keepingCapacity: true)
  }
}

/// The report formats `protfs audit --format` offers.
public enum AuditFormat: String, Sendable, CaseIterable {
  /// For people: findings grouped by container.
  case text
  /// For scripts: one object with a `findings` array.
  case json
  /// SARIF 2.1.0, for code-scanning dashboards.
  case sarif
  /// JUnit XML: a test suite per container, a test case per finding and per rule it passed.
  case junit

  /// A reporter writing this format to `output`, shaped by `options` where the format has a use for them.
  public func reporter(_ output: AuditOutput, options: AuditReportOptions = AuditReportOptions()) -> any AuditReporter {
    switch self {
    case .text: TextAuditReporter(output)
    case .json: JSONAuditReporter(output)
    case .sarif: SARIFAuditReporter(output, root: options.sarifRoot)
    case .junit: JUnitAuditReporter(output, options: options)
    }
  }
}

/// Escaping shared by the machine-readable formats.
package enum Escape {
  /// Appends `text` as a JSON string literal, quotes included, escaping on the bytes: this is the hot
  /// path of big reports, so runs that need no escape are copied whole.
  package static func appendJSON(_ text: String, to buffer: inout [UInt8]) {
    var text = text
    text.withUTF8 { utf8 in
      buffer.append(UInt8(ascii: "\""))
      var start = 0
      for index in 0..<utf8.count {
        let byte = utf8[index]
        guard byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte < 0x20 else { continue }
        buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
        switch byte {
        case UInt8(ascii: "\""): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
        case UInt8(ascii: "\\"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
        case UInt8(ascii: "\n"): buffer.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
        default:
          let digits = Array("0123456789abcdef".utf8)
          buffer.append(contentsOf: Array("\\u00".utf8) + [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
        }
        start = index + 1
      }
      buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
      buffer.append(UInt8(ascii: "\""))
    }
  }

  /// Appends constant text.
  package static func append(_ text: StaticString, to buffer: inout [UInt8]) {
    text.withUTF8Buffer { buffer.append(contentsOf: $0) }
  }

  /// Appends an optional string as JSON (`null` when nil).
  package static func appendJSON(_ text: String?, to buffer: inout [UInt8]) {
    if let text { appendJSON(text, to: &buffer) } else { append("null", to: &buffer) }
  }

  /// Appends a finding's path bytes as `AuditFinding.path` would show them, as a JSON string: a
  /// path of plain printable ASCII (nearly all of them) goes straight from its bytes.
  package static func appendJSONPath(_ bytes: ArraySlice<UInt8>, to buffer: inout [UInt8]) {
    var bytes = bytes
    if bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    guard !bytes.isEmpty,
      bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
    else { return appendJSON(DisplayPath.relative(bytes), to: &buffer) }
    buffer.append(UInt8(ascii: "\""))
    buffer.append(contentsOf: bytes)
    buffer.append(UInt8(ascii: "\""))
  }

  /// A JSON string literal, quotes included.
  package static func json(_ text: String) -> String {
    var bytes: [UInt8] = []
    appendJSON(text, to: &bytes)
    return String(decoding: bytes, as: UTF8.self)
  }

  /// A JSON value for an optional string.
  package static func json(_ text: String?) -> String { text.map { json($0) } ?? "null" }

  /// Text for XML content and attribute values; characters XML 1.0 forbids become `\xNN`.
  package static func xml(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      case "'": out += "&apos;"
      case "\n", "\t": out.unicodeScalars.append(scalar)
      case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF:
        out += "\\x" + String(scalar.value, radix: 16, uppercase: true)
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// A relative URI reference for raw path bytes: unreserved characters and `/` as is, the rest percent-encoded.
  package static func uri(_ bytes: [UInt8]) -> String {
    var out = ""
    for byte in bytes {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"), UInt8(ascii: "/"):
        out.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        let hex = String(byte, radix: 16, uppercase: true)
        out += "%" + (hex.count == 1 ? "0" : "") + hex
      }
    }
    return out
  }
}
