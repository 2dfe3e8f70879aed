import Foundation
import ProtFS
import ProtFSSystem

/// Turns the words of a command line into the command to run and its `Invocation`.
package struct Parser {
  /// The top command (`protfs`), whose tree the words are read against.
  package let root: Command
  /// The environment the command will run in, handed to its `Invocation`.
  package let environment: [String: String]

  /// What the words ask for.
  package enum Outcome {
    /// Run the command with what was given.
    case run(Command, Invocation)
    /// Print the help of the last command of the chain (from the top command down).
    case help([Command])
    /// Print the version.
    case version
    /// Print the manual page (roff) of the last command of the chain (`protfs help --man CMD…`).
    case manual([Command])
    /// Print every visible command's words, one command a line (`protfs help --commands`).
    case commandList
    /// Print the command reference in Markdown, every visible command (`protfs help --markdown`).
    case markdownReference
    /// Print the Markdown section of the last command of the chain (`protfs help --markdown CMD…`).
    case markdownSection([Command])
  }

  /// Reads `words` (the command line without the program name); throws a `UsageError` for words
  /// that do not fit the commands' declarations. `bytes` are the words as the process got them,
  /// when one may not be UTF-8 (a file name): positional arguments keep them (`argumentBytes`).
  package func parse(_ words: [String], bytes: [[UInt8]]? = nil) throws -> Outcome {
    // `protfs help CMD…` is `protfs CMD… --help`.
    if words.first == "help" && root.subcommand(named: "help") == nil { return try parseHelp(words.dropFirst()) }
    var reading = Reading(words: words, chain: [root], invocation: Invocation(command: root, environment: environment))
    reading: while reading.index < words.count {
      let word = words[reading.index]
      reading.index += 1
      let step: Step
      if word == "--" {
        step = takeAfterDashes(&reading)
      } else if word.hasPrefix("--") {
        step = try readLong(word, &reading)
      } else if word.hasPrefix("-") && word.count > 1 && !isNumber(word) {
        step = try readShort(word, &reading)
      } else {
        step = try readWord(word, &reading)
      }
      switch step {
      case .proceed: continue
      case .stop: break reading
      case .finish(let outcome): return outcome
      }
    }
    return try finish(reading, bytes: bytes)
  }

  /// The words read so far: the chain of commands they name, what they give it, and where the
  /// positional words are.
  private struct Reading {
    /// The command line without the program name.
    let words: [String]
    /// The commands named so far, from the top command down.
    var chain: [Command]
    /// What the words give the last command of the chain.
    var invocation: Invocation
    /// The positions of the positional words in `words`, so that each keeps its bytes.
    var positionals: [Int] = []
    /// The position of the next word to read.
    var index = 0
    /// The command the words name so far.
    var command: Command { chain.last! }
  }

  /// What comes after one word has been read.
  private enum Step {
    /// Read the next word.
    case proceed
    /// Read no more words: the rest was taken.
    case stop
    /// Stop here with this outcome (`--help`, `--version`, `help`).
    case finish(Outcome)
  }

  /// `protfs help CMD…` (the words after `help`); its format flags may come before or after CMD…
  /// (`help --man lock`, `help lock --man`).
  private func parseHelp(_ words: ArraySlice<String>) throws -> Outcome {
    let formats = ["--man", "--markdown", "--commands"]
    let given = words.filter(formats.contains)
    let rest = words.filter { !formats.contains($0) }[...]
    guard given.count <= 1 else {
      throw UsageError(message: "Give one of --man, --markdown and --commands.", commandPath: [root.name])
    }
    switch given.first {
    case "--man": return .manual(try helpTarget(rest, from: [root]))
    case "--markdown":
      return rest.isEmpty ? .markdownReference : .markdownSection(try helpTarget(rest, from: [root]))
    case "--commands":
      guard rest.isEmpty else {
        throw UsageError(message: "'help --commands' lists every command; give no command.", commandPath: [root.name])
      }
      return .commandList
    default: return .help(try helpTarget(rest, from: [root]))
    }
  }

  /// The words after `--`: the command to run of a command that takes one, else positional words.
  private func takeAfterDashes(_ reading: inout Reading) -> Step {
    if reading.command.takesTrailingCommand {
      reading.invocation.trailing = Array(reading.words[reading.index...])
    } else {
      reading.positionals += reading.words.indices[reading.index...]
    }
    return .stop
  }

  /// `--name`, `--name=value` or `--name value`.
  private func readLong(_ word: String, _ reading: inout Reading) throws -> Step {
    let (name, inlineValue) = split(word.dropFirst(2))
    guard let option = options(of: reading.chain).first(where: { $0.long == name }) else {
      throw unknownOption("--" + name, chain: reading.chain, invocation: reading.invocation)
    }
    if option == CommonOptions.help { return .finish(.help(reading.chain)) }
    if option == CommonOptions.version && reading.chain.count == 1 { return .finish(.version) }
    if option.isFlag {
      if inlineValue != nil {
        throw reading.invocation.usageError("The flag '--\(name)' does not take a value.")
      }
      reading.invocation.record(flag: option)
    } else {
      let value = try value(
        of: option, spelled: "--\(name)", inline: inlineValue, words: reading.words, index: &reading.index,
        reading.invocation)
      try record(option, value, &reading.invocation)
    }
    return .proceed
  }

  /// `-abc`: flags, the last of which may take a value, in the rest of the word (`-dDIR`) or the next.
  private func readShort(_ word: String, _ reading: inout Reading) throws -> Step {
    var letters = Array(word.dropFirst())
    while !letters.isEmpty {
      let letter = letters.removeFirst()
      guard let option = options(of: reading.chain).first(where: { $0.short == letter }) else {
        throw unknownOption("-\(letter)", chain: reading.chain, invocation: reading.invocation)
      }
      if option == CommonOptions.help { return .finish(.help(reading.chain)) }
      if option.isFlag {
        reading.invocation.record(flag: option)
      } else {
        // `-dDIR` carries the value in the rest of the word.
        let inline = letters.isEmpty ? nil : String(letters)
        letters = []
        let value = try value(
          of: option, spelled: "-\(letter)", inline: inline, words: reading.words, index: &reading.index,
          reading.invocation)
        try record(option, value, &reading.invocation)
      }
    }
    return .proceed
  }

  /// A word that is no option: a subcommand, `help`, the start of the command to run, or a
  /// positional word.
  private func readWord(_ word: String, _ reading: inout Reading) throws -> Step {
    let command = reading.command
    if reading.positionals.isEmpty, !command.subcommands.isEmpty {
      // `protfs passcode help set` is `protfs passcode set --help`, as git and swift's tools do.
      if word == "help" && command.subcommand(named: "help") == nil {
        return .finish(.help(try helpTarget(reading.words[reading.index...], from: reading.chain)))
      }
      if let next = command.subcommand(named: word) {
        reading.chain.append(next)
        reading.invocation.descend(into: next)
        return .proceed
      }
      if command.run == nil || command.arguments.isEmpty {
        throw unknownCommand(word, in: reading.chain)
      }
    }
    if command.takesTrailingCommand && command.arguments.isEmpty {
      reading.invocation.trailing = Array(reading.words[(reading.index - 1)...])
      return .stop
    }
    reading.positionals.append(reading.index - 1)
    return .proceed
  }

  /// The command the words named, given its positional words (with their `bytes`); its help when
  /// it only groups subcommands.
  private func finish(_ reading: Reading, bytes: [[UInt8]]?) throws -> Outcome {
    let command = reading.command
    var invocation = reading.invocation
    guard command.run != nil else { return .help(reading.chain) }
    let words = reading.words
    let given = bytes?.count == words.count ? bytes! : words.map { Array($0.utf8) }
    var values = reading.positionals.map { (words[$0], given[$0]) }
    if let option = command.bundleOption { try takeLeadingBundle(&values, as: option, &invocation) }
    if command.takesBundleID, let bundle = invocation.value(CommonOptions.bundleID) {
      try assign(values, bundle: bundle, to: command, &invocation)
    } else {
      try assign(values, to: command.arguments, command: command, &invocation)
    }
    if command.takesTrailingCommand && invocation.trailing.isEmpty && !command.trailingCommandIsOptional {
      throw invocation.usageError("Missing the command to run after '--'.")
    }
    return .run(command, invocation)
  }

  /// The value of `option` (spelled `--name` or `-n` in the error): the one given in the same word,
  /// else the next word, which it consumes.
  private func value(
    of option: Option, spelled: String, inline: String?, words: [String], index: inout Int,
    _ invocation: Invocation
  ) throws -> String {
    if let inline { return inline }
    guard index < words.count else {
      throw invocation.usageError("Missing value for '\(spelled) <\(option.valueName!)>'.")
    }
    index += 1
    return words[index - 1]
  }

  /// The commands named by the words after a `help`, starting below `chain`.
  private func helpTarget(_ words: ArraySlice<String>, from chain: [Command]) throws -> [Command] {
    var target = chain
    for word in words {
      guard let next = target.last!.subcommand(named: word) else {
        throw unknownCommand(word, in: target)
      }
      target.append(next)
    }
    return target
  }

  /// The options the last command of `chain` accepts: its own, then the common ones.
  private func options(of chain: [Command]) -> [Option] { chain.last!.acceptedOptions(isTop: chain.count == 1) }

  /// `name=value` split at the first `=`; the value is nil without one.
  private func split(_ body: Substring) -> (String, String?) {
    guard let equals = body.firstIndex(of: "=") else { return (String(body), nil) }
    return (String(body[..<equals]), String(body[body.index(after: equals)...]))
  }

  /// Whether `word` is a number (`-1` is a value, not an option).
  private func isNumber(_ word: String) -> Bool { Double(word) != nil }

  /// Records a value of `option`, refusing a second one unless the option repeats.
  private func record(_ option: Option, _ value: String, _ invocation: inout Invocation) throws {
    if !option.repeatable, invocation.isGiven(option), option != CommonOptions.device {
      throw invocation.usageError("The option '--\(option.long)' was given more than once.")
    }
    invocation.record(option, value: value)
  }

  /// Hands the positional words to the arguments of a command whose `<bundle-id>` was given as
  /// `--bundle bundle`: to the others, or, when the words hold the bundle id too, to all of them,
  /// refusing a second bundle id that differs.
  private func assign(
    _ values: [(String, [UInt8])], bundle: String, to command: Command, _ invocation: inout Invocation
  ) throws {
    let argument = command.bundleArgument!
    let others = command.arguments.filter { $0 != argument }
    var reduced = invocation
    var full = invocation
    let reducedError: (any Error)?
    do {
      try assign(values, to: others, command: command, &reduced)
      reduced.assign([(bundle, Array(bundle.utf8))], to: argument)
      // `app bgtask launch X --bundle X` repeats the id rather than naming a task X.
      guard values.first?.0 == bundle, (try? assign(values, to: command.arguments, command: command, &full)) != nil
      else {
        invocation = reduced
        return
      }
      invocation = full
      return
    } catch {
      reducedError = error
    }
    guard (try? assign(values, to: command.arguments, command: command, &full)) != nil else { throw reducedError! }
    if let positional = full.argument(argument), positional != bundle {
      throw invocation.usageError(
        "The bundle id is given twice, as '\(positional)' and as '--bundle \(bundle)': give it once (<bundle-id> is the canonical spelling)."
      )
    }
    invocation = full
  }

  /// For a command that reads PATHs or URLs for the app `option` (`--bundle`) names: takes a
  /// first positional word that is the bundle id of one of the device's containers, and no item
  /// where a relative PATH is read from, as `--bundle` (`protfs ls com.example.app Documents`).
  /// With `--bundle` given too, the same id is taken once and another one is refused.
  private func takeLeadingBundle(
    _ values: inout [(String, [UInt8])], as option: Option, _ invocation: inout Invocation
  ) throws {
    guard let word = values.first?.0, !word.contains("/"), !word.contains(":"), (try? BundleID(word)) != nil
    else { return }
    let device = invocation.device
    let container = device.root + "/" + Device.containersDirectoryName + "/" + word
    var status = stat()
    guard case .success = Kernel.stat(container, &status), status.st_mode & S_IFMT == S_IFDIR
    else { return }
    let given = invocation.value(option)
    let base =
      given.map { device.root + "/" + Device.containersDirectoryName + "/" + $0 }
      ?? FileManager.default.currentDirectoryPath
    guard case .failure = Kernel.lstat(base + "/" + word, &status) else { return }
    if let given, given != word {
      throw invocation.usageError(
        "'\(word)' is the bundle id of another app than '--bundle \(given)' names: give one bundle id (--bundle is the canonical spelling)."
      )
    }
    values.removeFirst()
    if given == nil { invocation.record(option, value: word) }
  }

  /// Hands the positional words to `arguments` (`command`'s, or all but its bundle id), in order,
  /// leaving later required arguments their share.
  private func assign(
    _ values: [(String, [UInt8])], to arguments: [Argument], command: Command, _ invocation: inout Invocation
  ) throws {
    var remaining = values[...]
    for (position, argument) in arguments.enumerated() {
      let laterRequired = arguments[(position + 1)...].filter {
        $0.arity == .required || $0.arity == .oneOrMore
      }.count
      switch argument.arity {
      case .required:
        guard let value = remaining.popFirst() else {
          throw invocation.usageError("Missing expected argument '<\(argument.name)>'.")
        }
        invocation.assign([value], to: argument)
      case .optional:
        if remaining.count > laterRequired, let value = remaining.popFirst() {
          invocation.assign([value], to: argument)
        }
      case .zeroOrMore, .oneOrMore:
        let take = max(0, remaining.count - laterRequired)
        let taken = Array(remaining.prefix(take))
        remaining = remaining.dropFirst(take)
        if argument.arity == .oneOrMore && taken.isEmpty {
          throw invocation.usageError("Missing expected argument '<\(argument.name)> ...'.")
        }
        invocation.assign(taken, to: argument)
      }
    }
    if let extra = remaining.first {
      let hint = command.extraArgumentHint?(values.map(\.0)).map { " " + $0 } ?? ""
      throw invocation.usageError("Unexpected argument '\(extra.0)'.\(hint)")
    }
  }

  /// The usage error for an option the command does not accept, with the nearest one it does.
  private func unknownOption(_ word: String, chain: [Command], invocation: Invocation) -> UsageError {
    var message = "Unknown option '\(word)'."
    let names = options(of: chain).map { "--" + $0.long }
    if word.hasPrefix("--"), let near = Suggestion.nearest(to: word, in: names) {
      message += " Did you mean '\(near)'?"
    }
    return UsageError(message: message, commandPath: chain.map(\.name))
  }

  /// The usage error for a word that is no subcommand, with the nearest visible one.
  private func unknownCommand(_ word: String, in chain: [Command]) -> UsageError {
    var message = "Unknown command '\(word)'."
    let names = chain.last!.subcommands.filter { !$0.isHidden }.map(\.name)
    if let near = Suggestion.nearest(to: word, in: names) { message += " Did you mean '\(near)'?" }
    return UsageError(message: message, commandPath: chain.map(\.name))
  }
}
