import Foundation

/// How a logged value is shown, as the `os` module's `OSLogPrivacy`. As in a device's log, a
/// value is redacted (`<private>`) unless it is public: by default (`.auto`) strings and objects
/// are private and numbers and booleans public, so what an app logs here is what it would leak
/// to a phone's log.
public struct OSLogPrivacy: Sendable, Equatable {
  enum Kind: Sendable, Equatable { case auto, `public`, `private`, sensitive }
  let kind: Kind
  /// Numbers and booleans shown, the rest redacted.
  public static let auto = OSLogPrivacy(kind: .auto)
  /// Shown.
  public static let `public` = OSLogPrivacy(kind: .public)
  /// Redacted.
  public static let `private` = OSLogPrivacy(kind: .private)
  /// Redacted, always.
  public static let sensitive = OSLogPrivacy(kind: .sensitive)
  /// Redacted (the hash a device shows for it is not computed here).
  public static func `private`(mask: OSLogPrivacy.Mask) -> OSLogPrivacy { .private }
  /// Redacted.
  public static func sensitive(mask: OSLogPrivacy.Mask) -> OSLogPrivacy { .sensitive }

  /// How a redacted value is masked.
  public struct Mask: Sendable, Equatable {
    /// A hash in place of the value.
    public static let hash = Mask()
    /// Nothing.
    public static let none = Mask()
  }
}

/// The level of a log message, as `OSLogType`.
public struct OSLogType: Sendable, Equatable, RawRepresentable {
  /// Its value.
  public let rawValue: UInt8
  /// Wraps a value.
  public init(rawValue: UInt8) { self.rawValue = rawValue }
  /// The default level (notice).
  public static let `default` = OSLogType(rawValue: 0)
  /// Information.
  public static let info = OSLogType(rawValue: 1)
  /// Debugging.
  public static let debug = OSLogType(rawValue: 2)
  /// An error.
  public static let error = OSLogType(rawValue: 16)
  /// A fault.
  public static let fault = OSLogType(rawValue: 17)

  var name: String {
    switch self {
    case .info: "info"
    case .debug: "debug"
    case .error: "error"
    case .fault: "fault"
    default: "notice"
    }
  }
}

/// How a logged integer is written.
public struct OSLogIntegerFormatting: Sendable {
  let radix: Int
  let prefix: Bool
  /// In decimal.
  public static let decimal = OSLogIntegerFormatting(radix: 10, prefix: false)
  /// In hexadecimal.
  public static let hex = OSLogIntegerFormatting(radix: 16, prefix: false)
  /// In octal.
  public static let octal = OSLogIntegerFormatting(radix: 8, prefix: false)
  /// In hexadecimal, with `0x` when `explicitPositiveSign`… as the module spells it.
  public static func hex(explicitPositiveSign: Bool = false, includePrefix: Bool = false, uppercase: Bool = false)
    -> OSLogIntegerFormatting
  { OSLogIntegerFormatting(radix: 16, prefix: includePrefix) }
  /// In decimal.
  public static func decimal(explicitPositiveSign: Bool = false, minDigits: Int = 0) -> OSLogIntegerFormatting {
    .decimal
  }
}

/// How a logged floating-point number is written.
public struct OSLogFloatFormatting: Sendable {
  let precision: Int?
  /// With `precision` digits after the point.
  public static func fixed(precision: Int) -> OSLogFloatFormatting { OSLogFloatFormatting(precision: precision) }
  /// As Swift writes it.
  public static let fixed = OSLogFloatFormatting(precision: nil)
}

/// A log message with interpolated values and their privacy, as `OSLogMessage`.
public struct OSLogMessage: ExpressibleByStringInterpolation, ExpressibleByStringLiteral, Sendable {
  /// The message as the log shows it.
  let text: String

  /// A message without values.
  public init(stringLiteral value: String) { text = value }
  /// A message with values.
  public init(stringInterpolation: StringInterpolation) { text = stringInterpolation.text }

  /// The parts of a message, and how each value is shown.
  public struct StringInterpolation: StringInterpolationProtocol, Sendable {
    var text = ""
    /// An empty message.
    public init(literalCapacity: Int, interpolationCount: Int) { text.reserveCapacity(literalCapacity) }
    /// Text as it is.
    public mutating func appendLiteral(_ literal: String) { text += literal }

    /// A string (private unless public).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> String, align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) {
      text += privacy.kind == .public ? value() : "<private>"
    }

    /// An integer (public unless private).
    public mutating func appendInterpolation<T: BinaryInteger>(
      _ value: @autoclosure () -> T, format: OSLogIntegerFormatting = .decimal, align: OSLogStringAlignment = .none,
      privacy: OSLogPrivacy = .auto
    ) {
      appendInteger(value(), format: format, privacy: privacy)
    }

    /// An `Int` (public unless private): the integers' own overload, which Swift prefers to the
    /// catch-all below.
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Int, format: OSLogIntegerFormatting = .decimal, align: OSLogStringAlignment = .none,
      privacy: OSLogPrivacy = .auto
    ) {
      appendInteger(value(), format: format, privacy: privacy)
    }

    /// An `Int8` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Int8, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `Int16` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Int16, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `Int32` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Int32, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `Int64` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Int64, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `UInt` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> UInt, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `UInt8` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> UInt8, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `UInt16` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> UInt16, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `UInt32` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> UInt32, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// An `UInt64` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> UInt64, format: OSLogIntegerFormatting = .decimal,
      align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) { appendInteger(value(), format: format, privacy: privacy) }

    /// A `Float` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Float, format: OSLogFloatFormatting = .fixed, align: OSLogStringAlignment = .none,
      privacy: OSLogPrivacy = .auto
    ) { appendInterpolation(Double(value()), format: format, align: align, privacy: privacy) }

    /// Writes an integer as `format` says, or `<private>`.
    private mutating func appendInteger<T: BinaryInteger>(
      _ value: T, format: OSLogIntegerFormatting, privacy: OSLogPrivacy
    ) {
      guard privacy.kind == .auto || privacy.kind == .public else { return text += "<private>" }
      text += (format.prefix && format.radix == 16 ? "0x" : "") + String(value, radix: format.radix)
    }

    /// A `Double` (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Double, format: OSLogFloatFormatting = .fixed, align: OSLogStringAlignment = .none,
      privacy: OSLogPrivacy = .auto
    ) {
      guard privacy.kind == .auto || privacy.kind == .public else { return text += "<private>" }
      let number = value()
      text += format.precision.map { String(format: "%.\($0)f", number) } ?? number.description
    }

    /// A floating-point number (public unless private).
    public mutating func appendInterpolation<T: BinaryFloatingPoint & CustomStringConvertible>(
      _ value: @autoclosure () -> T, format: OSLogFloatFormatting = .fixed, align: OSLogStringAlignment = .none,
      privacy: OSLogPrivacy = .auto
    ) {
      guard privacy.kind == .auto || privacy.kind == .public else { return text += "<private>" }
      let number = value()
      text += format.precision.map { String(format: "%.\($0)f", Double(number)) } ?? number.description
    }

    /// A boolean (public unless private).
    public mutating func appendInterpolation(
      _ value: @autoclosure () -> Bool, format: OSLogBoolFormat = .truth, privacy: OSLogPrivacy = .auto
    ) {
      guard privacy.kind == .auto || privacy.kind == .public else { return text += "<private>" }
      text += format == .answer ? (value() ? "YES" : "NO") : (value() ? "true" : "false")
    }

    /// Any other value, as `String(describing:)` (private unless public).
    public mutating func appendInterpolation<T>(
      _ value: @autoclosure () -> T, align: OSLogStringAlignment = .none, privacy: OSLogPrivacy = .auto
    ) {
      text += privacy.kind == .public ? String(describing: value()) : "<private>"
    }
  }
}

/// How a logged value is aligned (kept: the text is written as it is).
public struct OSLogStringAlignment: Sendable {
  /// As it is.
  public static let none = OSLogStringAlignment()
  /// To the right in `columns`.
  public static func right(columns: Int) -> OSLogStringAlignment { .none }
  /// To the left in `columns`.
  public static func left(columns: Int) -> OSLogStringAlignment { .none }
}

/// How a logged boolean is written.
public enum OSLogBoolFormat: Sendable {
  /// `true` / `false`.
  case truth
  /// `YES` / `NO`.
  case answer
}

/// A log of a subsystem and category, as `OSLog`.
public final class OSLog: Sendable {
  let subsystem: String
  let category: String
  let enabled: Bool
  /// The log of `subsystem`'s `category`.
  public init(subsystem: String, category: String) {
    self.subsystem = subsystem
    self.category = category
    enabled = true
  }
  private init(disabled: Void) {
    subsystem = ""
    category = ""
    enabled = false
  }
  /// The app's default log.
  public static let `default` = OSLog(subsystem: "", category: "")
  /// A log that writes nothing.
  public static let disabled = OSLog(disabled: ())
}

/// A logger, as the `os` module's `Logger` (iOS 14): each message is one line on the app's
/// standard error, `[SUBSYSTEM:CATEGORY] LEVEL: MESSAGE`, with private values redacted as a
/// device's log shows them. Replace `import os` with `import ProtFSKit`.
public struct Logger: Sendable {
  let log: OSLog

  /// A logger of `subsystem`'s `category`.
  public init(subsystem: String, category: String) { log = OSLog(subsystem: subsystem, category: category) }
  /// The app's default logger.
  public init() { log = .default }
  /// A logger writing to `log`.
  public init(_ log: OSLog) { self.log = log }

  /// Logs `message` at `level`.
  public func log(level: OSLogType, _ message: OSLogMessage) { write(log, level, message.text) }
  /// Logs `message` at the default level.
  public func log(_ message: OSLogMessage) { write(log, .default, message.text) }
  /// Logs `message` for tracing (debug).
  public func trace(_ message: OSLogMessage) { write(log, .debug, message.text) }
  /// Logs `message` for debugging.
  public func debug(_ message: OSLogMessage) { write(log, .debug, message.text) }
  /// Logs `message` as information.
  public func info(_ message: OSLogMessage) { write(log, .info, message.text) }
  /// Logs `message` as a notice (the default level).
  public func notice(_ message: OSLogMessage) { write(log, .default, message.text) }
  /// Logs `message` as a warning (an error).
  public func warning(_ message: OSLogMessage) { write(log, .error, message.text) }
  /// Logs `message` as an error.
  public func error(_ message: OSLogMessage) { write(log, .error, message.text) }
  /// Logs `message` as critical (a fault).
  public func critical(_ message: OSLogMessage) { write(log, .fault, message.text) }
  /// Logs `message` as a fault.
  public func fault(_ message: OSLogMessage) { write(log, .fault, message.text) }
}

/// Logs `message` (a printf format; its `%{public}@` and `%@` arguments, as a device's log shows
/// them: `%@` and `%s` without `{public}` redacted) to `log`, as the `os` module's `os_log`.
public func os_log(_ message: StaticString, log: OSLog = .default, type: OSLogType = .default, _ args: any CVarArg...) {
  var format = message.description
  var values = args
  var shown: [any CVarArg] = []
  // Each conversion: public ones shown, strings and objects redacted unless marked public.
  var result = ""
  var index = format.startIndex
  while index < format.endIndex {
    let character = format[index]
    guard character == "%", format.index(after: index) < format.endIndex else {
      result.append(character)
      index = format.index(after: index)
      continue
    }
    var end = format.index(after: index)
    if format[end] == "%" {
      result += "%%"
      index = format.index(after: end)
      continue
    }
    var privacy = ""
    if format[end] == "{", let close = format[end...].firstIndex(of: "}") {
      privacy = String(format[format.index(after: end)..<close])
      end = format.index(after: close)
    }
    var spec = ""
    while end < format.endIndex, !"@dDiuUxXoOfFeEgGcsSpaA".contains(format[end]) {
      spec.append(format[end])
      end = format.index(after: end)
    }
    guard end < format.endIndex else { break }
    let conversion = format[end]
    let value = values.isEmpty ? nil : values.removeFirst()
    let redacted =
      privacy.contains("private")
      || (!privacy.contains("public") && (conversion == "@" || conversion == "s" || conversion == "S"))
    if redacted || value == nil {
      result += "<private>"
    } else if let value {
      result += "%" + spec + String(conversion)
      shown.append(value)
    }
    index = format.index(after: end)
  }
  format = result
  write(log, type, String(format: format, arguments: shown.map { $0 }))
}

/// Logs `message` at `type` to `log`, as the `os` module's `os_log(_:log:_:)`.
public func os_log(_ type: OSLogType, log: OSLog = .default, _ message: OSLogMessage) {
  write(log, type, message.text)
}

/// One line on standard error for a message of `log` at `level`.
private func write(_ log: OSLog, _ level: OSLogType, _ text: String) {
  guard log.enabled else { return }
  let source = log.subsystem.isEmpty ? "" : "[\(log.subsystem):\(log.category)] "
  FileHandle.standardError.write(Data("\(source)\(level.name): \(text)\n".utf8))
}
