import Foundation
import ProtFS

/// What the parser found for one command: its values, and the environment it runs in.
struct Invocation: Sendable {
  /// The command words, for example `["protfs", "cache", "ls"]`.
  var commandPath: [String]
  /// Values of options, by long name, in the order given.
  var optionValues: [String: [String]] = [:]
  /// Flags given, by long name.
  var flags: Set<String> = []
  /// Values of positional arguments, by name.
  var positionals: [String: [String]] = [:]
  /// Everything after `--`, for commands that take a trailing command.
  var trailing: [String] = []
  /// The process environment.
  var environment: [String: String]

  /// The last value of option `name`.
  func value(_ name: String) -> String? { optionValues[name]?.last }
  /// All values of a repeatable option.
  func values(_ name: String) -> [String] { optionValues[name] ?? [] }
  /// Whether flag `name` was given.
  func flag(_ name: String) -> Bool { flags.contains(name) }
  /// The value of a single positional argument.
  func argument(_ name: String) -> String? { positionals[name]?.first }
  /// The values of a variadic positional argument.
  func arguments(_ name: String) -> [String] { positionals[name] ?? [] }

  /// The device chosen by `--device`, `PROTFS_DEVICE` or the XDG default.
  var device: Device { Device.locate(explicit: value("device"), environment: environment) }

  /// A usage error for this command.
  func usageError(_ message: String) -> UsageError { UsageError(message: message, commandPath: commandPath) }

  /// Parses a class option value, turning a bad name into a usage error with "did you mean".
  func protectionClass(_ text: String) throws -> ProtectionClass {
    do {
      return try ProtectionClass.parse(text)
    } catch {
      throw usageError(error.description)
    }
  }

  /// Parses a bundle id argument, turning a bad one into a usage error.
  func bundleID(_ text: String) throws -> BundleID {
    do {
      return try BundleID(text)
    } catch {
      throw usageError(error.description)
    }
  }
}

/// Writes to stdout and stderr.
enum Console {
  /// Writes `text` and a newline to standard output.
  static func out(_ text: String = "", terminator: String = "\n") { print(text, terminator: terminator) }

  /// Writes `text` and a newline to standard error.
  static func err(_ text: String) {
    fflush(nil)
    FileHandle.standardError.write(Data((text + "\n").utf8))
  }

  /// Encodes a value as pretty, key-sorted JSON on standard output.
  static func json<T: Encodable>(_ value: T) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.dateEncodingStrategy = .iso8601
    out(String(decoding: try encoder.encode(value), as: UTF8.self))
  }

  /// Whether standard output is a terminal.
  static var stdoutIsTerminal: Bool { isatty(STDOUT_FILENO) == 1 }
  /// Whether standard error is a terminal.
  static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
}
