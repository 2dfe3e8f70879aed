import ProtFS

/// A command described as data: help, usage and parsing are generated from it
/// (swift-argument-parser's contract, written once by hand).
struct Command: Sendable {
  /// The word that selects the command.
  var name: String
  /// One line for OVERVIEW and for the parent's SUBCOMMANDS list.
  var abstract: String
  /// Paragraphs after the overview.
  var discussion: String? = nil
  /// Positional arguments, in order.
  var arguments: [Argument] = []
  /// Options and flags.
  var options: [Option] = []
  /// Nested commands.
  var subcommands: [Command] = []
  /// Whether everything after `--` is passed through untouched (for `exec`).
  var takesTrailingCommand: Bool = false
  /// Whether to hide the command from its parent's help.
  var isHidden: Bool = false
  /// The action; nil for a command that only groups subcommands.
  var run: (@Sendable (Invocation) throws -> Int32)? = nil

  func subcommand(named name: String) -> Command? { subcommands.first { $0.name == name } }
}

/// A positional argument.
struct Argument: Sendable {
  /// How many values it takes.
  enum Arity: Sendable { case required, optional, zeroOrMore, oneOrMore }
  /// The name shown as `<name>` and used to look the value up.
  var name: String
  /// One line of help.
  var help: String
  /// How many values it takes.
  var arity: Arity = .required
}

/// An option with a value, or a flag.
struct Option: Sendable {
  /// The long name without dashes.
  var long: String
  /// The short name, if any.
  var short: Character? = nil
  /// The value's placeholder; nil for a flag.
  var valueName: String? = nil
  /// One line of help.
  var help: String
  /// Whether the option may be given more than once.
  var repeatable: Bool = false

  /// A flag (no value).
  static func flag(_ long: String, short: Character? = nil, help: String) -> Option {
    Option(long: long, short: short, valueName: nil, help: help)
  }

  /// An option taking a value.
  static func value(
    _ long: String, short: Character? = nil, _ valueName: String, help: String,
    repeatable: Bool = false
  ) -> Option {
    Option(long: long, short: short, valueName: valueName, help: help, repeatable: repeatable)
  }

  var isFlag: Bool { valueName == nil }
}

/// Options every command accepts.
enum CommonOptions {
  static let device = Option.value(
    "device", "dir",
    help: "The device directory (default: $PROTFS_DEVICE, else $XDG_DATA_HOME/protfs/device).")
  static let help = Option.flag("help", short: "h", help: "Show help information.")
  static let version = Option.flag("version", help: "Show the version.")
}

/// A usage error: printed with the command's usage line, exit status 64.
struct UsageError: Error {
  var message: String
  var commandPath: [String]
}

/// A runtime failure with a specific exit status (the message is already printed, or is printed as `Error: …`).
struct ExitStatus: Error {
  var code: Int32
  var message: String? = nil
}
