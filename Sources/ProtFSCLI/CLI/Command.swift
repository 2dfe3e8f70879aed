import ProtFS

/// A command described as data: help, usage and parsing are generated from it
/// (swift-argument-parser's contract, written once by hand).
package struct Command: Sendable {
  /// The word that selects the command.
  package var name: String
  /// One line for OVERVIEW and for the parent's SUBCOMMANDS list.
  package var abstract: String
  /// Paragraphs after the overview.
  package var discussion: String? = nil
  /// Positional arguments, in order.
  package var arguments: [Argument] = []
  /// Options and flags.
  package var options: [Option] = []
  /// Nested commands.
  package var subcommands: [Command] = []
  /// Whether everything after `--` is passed through untouched (for `exec`).
  package var takesTrailingCommand: Bool = false
  /// Whether the trailing command may be left out (`app launch` of an installed app).
  package var trailingCommandIsOptional: Bool = false
  /// Whether to hide the command from its parent's help.
  package var isHidden: Bool = false
  /// What was probably meant when more positional words were given than the command takes (for
  /// `upload PATH URL`, `--from PATH`), from those words; nil when there is no better guess.
  package var extraArgumentHint: (@Sendable ([String]) -> String?)? = nil
  /// The action; nil for a command that only groups subcommands.
  package var run: (@Sendable (Invocation) throws -> Int32)? = nil

  /// The subcommand called `name`, if there is one.
  package func subcommand(named name: String) -> Command? { subcommands.first { $0.name == name } }

  /// Whether an invocation of this command may read `option`: one of its own options, or
  /// `--device`, which every command accepts (`--help` and `--version` never reach a command).
  package func declares(_ option: Option) -> Bool {
    option == CommonOptions.device || options.contains(option) || (option == CommonOptions.bundleID && takesBundleID)
  }

  /// Every option an invocation of this command accepts, in the order help lists them: its own,
  /// `--bundle` for a command whose `<bundle-id>` it spells, then `--device`, `--version` for
  /// the top command (`isTop`), and `--help`.
  package func acceptedOptions(isTop: Bool) -> [Option] {
    options + (takesBundleID ? [CommonOptions.bundleID] : []) + [CommonOptions.device]
      + (isTop ? [CommonOptions.version] : []) + [CommonOptions.help]
  }

  /// The positional `<bundle-id>`, for the commands about one app (`init`, `app launch`), which
  /// also take it as `--bundle`; nil for the others.
  package var bundleArgument: Argument? { arguments.first { $0.name == CommonOptions.bundleID.valueName } }

  /// Whether the command takes `--bundle` as another spelling of its `<bundle-id>` argument.
  var takesBundleID: Bool { bundleArgument != nil && !options.contains { $0.long == CommonOptions.bundleID.long } }

  /// The `--bundle` option of the commands that read PATHs or URLs for an app (`ls`, `download`),
  /// for which the bundle id may also come first among the positional words; nil for the others.
  package var bundleOption: Option? {
    guard bundleArgument == nil else { return nil }
    return options.first { $0.long == CommonOptions.bundleID.long && $0.valueName == CommonOptions.bundleID.valueName }
  }

  /// Whether `argument` is one of this command's positional arguments.
  package func declares(_ argument: Argument) -> Bool { arguments.contains(argument) }
}

/// A positional argument.
///
/// Declare it once as a static value and read it through that value
/// (`invocation.required(InitCommand.bundleID)`), so that what a command reads is what it declares.
package struct Argument: Sendable, Equatable {
  /// How many values it takes.
  package enum Arity: Sendable { case required, optional, zeroOrMore, oneOrMore }
  /// The name shown as `<name>` and used to look the value up.
  package var name: String
  /// One line of help.
  package var help: String
  /// How many values it takes.
  package var arity: Arity = .required

  /// Whether it takes any number of values (shown as `<name> ...`).
  package var isVariadic: Bool { arity == .zeroOrMore || arity == .oneOrMore }
}

/// An option with a value, or a flag.
///
/// Declare it once as a static value (`static let json = Option.flag(...)`) and read it through
/// that value (`invocation.flag(CommonOptions.json)`): reading an option the command does not
/// declare is a programmer error that traps.
package struct Option: Sendable, Equatable {
  /// The long name without dashes.
  package var long: String
  /// The short name, if any.
  package var short: Character? = nil
  /// The value's placeholder; nil for a flag.
  package var valueName: String? = nil
  /// One line of help.
  package var help: String
  /// Whether the option may be given more than once.
  package var repeatable: Bool = false
  /// Whether the command needs it (shown without brackets in its usage; the command checks).
  package var isRequired: Bool = false
  /// The values it takes when they are a fixed set (`--format`), which shell completion offers
  /// (a `file` option with choices offers file names too); empty for any value.
  package var choices: [String] = []

  /// A flag (no value).
  package static func flag(_ long: String, short: Character? = nil, help: String) -> Option {
    Option(long: long, short: short, valueName: nil, help: help)
  }

  /// An option taking a value.
  package static func value(
    _ long: String, short: Character? = nil, _ valueName: String, help: String,
    repeatable: Bool = false, choices: [String] = [], isRequired: Bool = false
  ) -> Option {
    Option(
      long: long, short: short, valueName: valueName, help: help, repeatable: repeatable, isRequired: isRequired,
      choices: choices)
  }

  /// Whether it is a flag (takes no value).
  package var isFlag: Bool { valueName == nil }
}

/// Options every command accepts (`device`, `help`; `version` at the top), and options that
/// several commands declare with one meaning, declared here once.
package enum CommonOptions {
  /// `--json`: what the JSON holds is the command's output as data; a command whose shape needs
  /// words says so in its discussion.
  package static let json = Option.flag("json", help: "Print JSON instead of text, for scripts.")
  /// `--dry-run`, `-n`, for the commands that remove files.
  package static let dryRun = Option.flag("dry-run", short: "n", help: "Print what would be removed; change nothing.")
  /// `--follow`, `-L`, for the commands that take item paths.
  package static let follow = Option.flag(
    "follow", short: "L", help: "Follow symbolic links given as PATH (never out of the device).")
  /// `--bundle BUNDLE-ID`, for the commands that take item paths: relative PATHs are read in the
  /// app's container instead of the current directory.
  package static let bundle = Option.value(
    "bundle", "bundle-id",
    help: "Read PATHs in this app's container (default: from the current directory).\(leadingBundle)")
  /// What the `--bundle` of the commands that read PATHs or URLs adds to its help: which spelling is
  /// canonical, and the other one the parser takes (`Parser.takeLeadingBundle`).
  package static let leadingBundle = " The canonical spelling; the bundle id may also come first among the arguments."
  /// `--bundle BUNDLE-ID`, another spelling of the `<bundle-id>` argument of the commands about
  /// one app (`init`, `app launch`): the parser gives its value to the argument.
  package static let bundleID = Option.value(
    "bundle", "bundle-id", help: "The same as <bundle-id>, which is the canonical spelling; give one.")
  /// The device directory, for every command.
  package static let device = Option.value(
    "device", "dir",
    help: "The device directory (default: $PROTFS_DEVICE, else $XDG_DATA_HOME/protfs/device).")
  /// Help, for every command.
  package static let help = Option.flag("help", short: "h", help: "Show help information.")
  /// The version, for the top command only.
  package static let version = Option.flag("version", help: "Show the version.")
}

/// A usage error: printed with the command's usage line, exit status 64.
package struct UsageError: Error {
  /// What is wrong, as one sentence.
  package var message: String
  /// The words of the command whose usage line is printed, for example `["protfs", "init"]`.
  package var commandPath: [String]
}

/// A runtime failure with a specific exit status (the message is already printed, or is printed as `Error: …`).
package struct ExitStatus: Error {
  /// The exit status.
  package var code: Int32
  /// Printed as `Error: …` when not nil.
  package var message: String? = nil
}
