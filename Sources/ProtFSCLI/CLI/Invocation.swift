import Foundation
import ProtFS
import ProtFSSystem

/// What the parser found for one command: its values, and the environment it runs in.
///
/// Values are read through the declarations (`invocation.flag(CommonOptions.json)`,
/// `invocation.value(LockCommand.grace)`, `invocation.required(InitCommand.bundleID)`). Reading an
/// option or argument that `command` does not declare, or reading a flag as a value, is a
/// programmer error: it traps with `preconditionFailure`, so the first test that runs the
/// command finds it.
package struct Invocation: Sendable {
  /// The command the words were parsed for; every accessor checks its declarations.
  private(set) var command: Command
  /// The command words, for example `["protfs", "cache", "ls"]`.
  private(set) var commandPath: [String]
  /// Values of options, by long name, in the order given.
  private var optionValues: [String: [String]] = [:]
  /// Flags given, by long name.
  private var flags: Set<String> = []
  /// Values of positional arguments, by name.
  private var positionals: [String: [String]] = [:]
  /// The same values as the process got them, bytes that may not be UTF-8, by name.
  private var positionalBytes: [String: [[UInt8]]] = [:]
  /// Everything after `--`, for commands that take a trailing command.
  package var trailing: [String] = []
  /// The process environment.
  package var environment: [String: String]

  /// An invocation of `command` (the top command, until the parser descends), with nothing given yet.
  package init(command: Command, environment: [String: String]) {
    self.command = command
    self.commandPath = [command.name]
    self.environment = environment
  }

  // MARK: Recording (the parser)

  /// Makes `subcommand` the command parsed for; values given so far stay.
  package mutating func descend(into subcommand: Command) {
    command = subcommand
    commandPath.append(subcommand.name)
  }

  /// Records that flag `option` was given.
  package mutating func record(flag option: Option) { flags.insert(option.long) }

  /// Records one `value` of `option`.
  package mutating func record(_ option: Option, value: String) { optionValues[option.long, default: []].append(value) }

  /// Whether `option` was given: a flag, or one with a value (already given one).
  package func isGiven(_ option: Option) -> Bool { optionValues[option.long] != nil || flags.contains(option.long) }

  /// Records the values of positional `argument`: each as text and as the bytes it was given as.
  package mutating func assign(_ values: [(String, [UInt8])], to argument: Argument) {
    positionals[argument.name] = values.map(\.0)
    positionalBytes[argument.name] = values.map(\.1)
  }

  // MARK: Reading (the commands)

  /// Whether flag `option` was given.
  package func flag(_ option: Option) -> Bool {
    check(option, isFlag: true)
    return flags.contains(option.long)
  }

  /// The last value of `option`, or nil when it was not given.
  package func value(_ option: Option) -> String? {
    check(option, isFlag: false)
    return optionValues[option.long]?.last
  }

  /// Every value of `option`, in the order given (for a repeatable option).
  package func values(_ option: Option) -> [String] {
    check(option, isFlag: false)
    return optionValues[option.long] ?? []
  }

  /// The value of a required positional argument (the parser refused the words without it).
  package func required(_ argument: Argument) -> String {
    check(argument, arities: [.required])
    guard let value = positionals[argument.name]?.first else {
      preconditionFailure("The parser left the required argument <\(argument.name)> without a value.")
    }
    return value
  }

  /// The value of an optional positional argument, or nil.
  package func argument(_ argument: Argument) -> String? {
    check(argument, arities: [.required, .optional])
    return positionals[argument.name]?.first
  }

  /// The values of a variadic positional argument.
  package func arguments(_ argument: Argument) -> [String] {
    check(argument, arities: [.zeroOrMore, .oneOrMore])
    return positionals[argument.name] ?? []
  }

  /// The values of a variadic positional argument as the process got them: bytes, which may not be
  /// UTF-8 (file names), where `arguments(_:)` has them decoded (a byte that is not UTF-8 becomes
  /// U+FFFD there).
  package func argumentBytes(_ argument: Argument) -> [[UInt8]] {
    check(argument, arities: [.zeroOrMore, .oneOrMore])
    return positionalBytes[argument.name] ?? []
  }

  /// The value of an optional (or required) positional argument as the process got it, bytes
  /// that may not be UTF-8; nil when it was not given.
  package func argumentByteValue(_ argument: Argument) -> [UInt8]? {
    check(argument, arities: [.required, .optional])
    return positionalBytes[argument.name]?.first
  }

  /// Traps unless `command` declares `option`, as a flag when `isFlag` and with a value otherwise.
  private func check(_ option: Option, isFlag: Bool) {
    guard command.declares(option) else {
      preconditionFailure("'\(commandPath.joined(separator: " "))' reads --\(option.long), which it does not declare.")
    }
    guard option.isFlag == isFlag else {
      preconditionFailure("--\(option.long) is read as a \(isFlag ? "flag" : "value"), but is declared otherwise.")
    }
  }

  /// Traps unless `command` declares `argument` with one of `arities`.
  private func check(_ argument: Argument, arities: [Argument.Arity]) {
    guard command.declares(argument) else {
      preconditionFailure(
        "'\(commandPath.joined(separator: " "))' reads <\(argument.name)>, which it does not declare.")
    }
    guard arities.contains(argument.arity) else {
      preconditionFailure("<\(argument.name)> is read with the wrong accessor for its arity \(argument.arity).")
    }
  }

  /// The device chosen by `--device`, `PROTFS_DEVICE` or the XDG default.
  package var device: Device { Device.locate(explicit: value(CommonOptions.device), environment: environment) }

  /// How the commands this one suggests are spelled: with `--device` when the user gave one or the
  /// device is not the default, and the app the command is about (its `--bundle` or bundle id).
  package var spelling: CommandSpelling {
    var defaults = environment
    defaults["PROTFS_DEVICE"] = nil
    let root = device.root
    let named =
      !(value(CommonOptions.device) ?? "").isEmpty || root != Device.locate(explicit: nil, environment: defaults).root
    let app = (optionValues["bundle"]?.last ?? positionals["bundle-id"]?.first).flatMap { try? BundleID($0) }
    return CommandSpelling(device: named ? root : nil, bundleID: app?.rawValue)
  }

  /// `error` as the command line prints it: its message, then its remedy spelled for this command.
  package func describe(_ error: ProtFSError) -> String { error.commandLineDescription(spelling) }

  /// A usage error for this command.
  package func usageError(_ message: String) -> UsageError { UsageError(message: message, commandPath: commandPath) }

  /// Parses a class option value, turning a bad name into a usage error with "did you mean".
  package func protectionClass(_ text: String) throws -> ProtectionClass {
    do {
      return try ProtectionClass.parse(text)
    } catch {
      throw usageError(describe(error))
    }
  }

  /// Parses a bundle id argument, turning a bad one into a usage error.
  package func bundleID(_ text: String) throws -> BundleID {
    do {
      return try BundleID(text)
    } catch {
      throw usageError(describe(error))
    }
  }
}

/// Writes to stdout and stderr.
package enum Console {
  /// Writes `text` and a newline to standard output. Every line of text protfs prints comes here
  /// or to `err`, with its control characters but line feeds and tabs escaped
  /// (`TerminalText`): much of it quotes what an app, a backup or a server named.
  package static func out(_ text: String = "", terminator: String = "\n") {
    print(TerminalText.escaped(text, keepingLineBreaks: true), terminator: terminator)
  }

  /// Writes `text` and a newline to standard error, escaped as `out` escapes it.
  package static func err(_ text: String) {
    fflush(nil)
    FileHandle.standardError.write(Data((TerminalText.escaped(text, keepingLineBreaks: true) + "\n").utf8))
  }

  /// Writes `value` on standard output as one pretty, key-sorted JSON document (`JSONOutput`).
  /// JSON escapes control characters itself, and is left as it is.
  package static func json<T: Encodable>(_ value: T) throws {
    print(String(decoding: try JSONOutput.documentEncoder().encode(value), as: UTF8.self))
  }

  /// Writes `value` on standard output as one compact JSON line (`JSONOutput`), flushed at once so
  /// that a reader of the stream sees it as it happens.
  package static func jsonLine<T: Encodable>(_ value: T) throws {
    print(String(decoding: try JSONOutput.lineEncoder().encode(value), as: UTF8.self))
    fflush(nil)
  }

  /// Whether standard output is a terminal.
  package static var stdoutIsTerminal: Bool { Kernel.isatty(STDOUT_FILENO) == 1 }
  /// Whether standard error is a terminal.
  package static var stderrIsTerminal: Bool { Kernel.isatty(STDERR_FILENO) == 1 }
}
