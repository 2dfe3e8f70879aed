import Foundation
import Testing

@testable import ProtFSCLI

/// Parses `words` against the real command tree, in an empty environment.
func parse(_ words: [String]) throws -> Parser.Outcome {
  try Parser(root: Commands.root, environment: [:]).parse(words)
}

/// The command and invocation `words` run; records an issue when they ask for help or the version.
func invocation(_ words: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> (Command, Invocation) {
  guard case .run(let command, let invocation) = try parse(words) else {
    Issue.record("\(words) does not run a command", sourceLocation: sourceLocation)
    throw UsageError(message: "not a run", commandPath: [])
  }
  return (command, invocation)
}

/// The command names of the help that `words` ask for, or nil when they ask for something else.
func helpChain(_ words: [String]) throws -> [String]? {
  guard case .help(let chain) = try parse(words) else { return nil }
  return chain.map(\.name)
}

/// The usage error `words` raise, or nil (and an issue) when they parse.
func usageError(_ words: [String], sourceLocation: SourceLocation = #_sourceLocation) -> UsageError? {
  #expect(throws: UsageError.self, "\(words)", sourceLocation: sourceLocation) { try parse(words) }
}

/// Words in, `Outcome` out: the parser runs in-process, without a device or root.
@Suite struct ParserOutcomeTests {
  @Test func initReadsItsArgumentAndOptionThroughTheDeclarations() throws {
    let (command, invocation) = try ProtFSCLITests.invocation(["init", "com.a.b", "--default-class", "complete"])
    #expect(command.name == "init")
    #expect(invocation.commandPath == ["protfs", "init"])
    #expect(invocation.argument(InitCommand.optionalBundleID) == "com.a.b")
    #expect(invocation.value(InitCommand.defaultClass) == "complete")
    #expect(invocation.value(InitCommand.entitlements) == nil)
  }

  @Test func subcommandWithEqualsFormDeviceBeforeItAndCommonJSON() throws {
    let (command, invocation) = try ProtFSCLITests.invocation([
      "--device=/tmp/dev", "cache", "ls", "com.x.y", "--json",
    ])
    #expect(command.name == "ls" && invocation.commandPath == ["protfs", "cache", "ls"])
    #expect(invocation.value(CommonOptions.device) == "/tmp/dev")
    #expect(invocation.device.root == "/tmp/dev")
    #expect(invocation.flag(CommonOptions.json))
    #expect(invocation.argument(CacheCommand.bundleArgument) == "com.x.y")
  }

  @Test func optionalArgumentAndFlagsLeftOutReadAsAbsent() throws {
    let (_, invocation) = try ProtFSCLITests.invocation(["cache", "du"])
    #expect(invocation.argument(CacheCommand.bundleArgument) == nil)
    #expect(!invocation.flag(CommonOptions.json) && !invocation.flag(CacheUsageCommand.bytes))
  }

  @Test func shortOptionClustersSetEveryFlag() throws {
    let (_, invocation) = try ProtFSCLITests.invocation(["set-class", "-rL", "complete", "a", "b"])
    #expect(invocation.flag(SetClassCommand.recursive) && invocation.flag(CommonOptions.follow))
    #expect(invocation.required(SetClassCommand.protectionClass) == "complete")
    #expect(invocation.arguments(GetClassCommand.path) == ["a", "b"])
    // In a cluster, a letter that takes a value takes the rest of the word.
    let (_, audit) = try ProtFSCLITests.invocation(["audit", "-oreport.txt", "dir"])
    #expect(audit.value(AuditCommand.output) == "report.txt")
    #expect(audit.arguments(AuditCommand.paths) == ["dir"])
  }

  @Test func repeatableOptionKeepsEveryValueInOrderAndDeviceMayRepeat() throws {
    let (_, invocation) = try ProtFSCLITests.invocation([
      "--device", "/a", "audit", "--policy", "one", "--policy=two", "--device", "/b",
    ])
    #expect(invocation.values(AuditCommand.policy) == ["one", "two"])
    #expect(invocation.value(CommonOptions.device) == "/b")
    #expect(invocation.arguments(AuditCommand.paths).isEmpty)
    let twice = usageError(["lock", "--grace", "1", "--grace", "2"])
    #expect(twice?.message == "The option '--grace' was given more than once.")
  }

  @Test func negativeNumbersAreValuesNotOptions() throws {
    let (_, invocation) = try ProtFSCLITests.invocation(["lock", "--grace", "-1"])
    #expect(invocation.value(LockCommand.grace) == "-1")
  }

  @Test func execPassesEverythingAfterDoubleDashThrough() throws {
    let (command, invocation) = try ProtFSCLITests.invocation([
      "exec", "--schedule", "lock@1s", "--", "sh", "-c", "ls --json", "--",
    ])
    #expect(command.name == "exec")
    #expect(invocation.value(ExecCommand.schedule) == "lock@1s")
    #expect(invocation.trailing == ["sh", "-c", "ls --json", "--"])
    #expect(invocation.value(ExecCommand.passcode.code) == nil)
    #expect(usageError(["exec", "--schedule", "lock@1s", "--"])?.message == "Missing the command to run after '--'.")
  }

  @Test func doubleDashMakesOptionLikeWordsPositional() throws {
    let (_, invocation) = try ProtFSCLITests.invocation(["get-class", "--", "--json", "-L"])
    #expect(invocation.arguments(GetClassCommand.path) == ["--json", "-L"])
    #expect(!invocation.flag(CommonOptions.json))
  }

  @Test func helpAndVersionOutcomes() throws {
    #expect(try helpChain([]) == ["protfs"])
    #expect(try helpChain(["help"]) == ["protfs"])
    #expect(try helpChain(["cache"]) == ["protfs", "cache"])
    #expect(try helpChain(["ls", "-Rh"]) == ["protfs", "ls"])
    #expect(try helpChain(["init", "--help", "--bogus"]) == ["protfs", "init"])
    #expect(try helpChain(["help", "passcode", "set"]) == ["protfs", "passcode", "set"])
    #expect(try helpChain(["passcode", "help", "set"]) == ["protfs", "passcode", "set"])
    guard case .version = try parse(["--version"]) else {
      Issue.record("--version does not print the version")
      return
    }
  }
}

/// Usage errors: the message, and the command whose usage line goes with it.
@Suite struct ParserUsageErrorTests {
  @Test func unknownOptionSuggestsTheNearestDeclaredOne() {
    let error = usageError(["ls", "--jsn"])
    #expect(error?.message == "Unknown option '--jsn'. Did you mean '--json'?")
    #expect(error?.commandPath == ["protfs", "ls"])
    #expect(usageError(["cache", "purge", "--dryrun"])?.message.contains("Did you mean '--dry-run'?") == true)
    #expect(usageError(["ls", "-x"])?.message == "Unknown option '-x'.")
    // --version belongs to the top command only.
    #expect(usageError(["ls", "--version"])?.message.hasPrefix("Unknown option '--version'.") == true)
  }

  @Test func missingValueNamesTheOptionAndItsPlaceholder() {
    #expect(
      usageError(["init", "com.a.b", "--default-class"])?.message
        == "Missing value for '--default-class <class>'.")
    #expect(usageError(["audit", "-o"])?.message == "Missing value for '-o <file>'.")
  }

  @Test func flagGivenAValueIsRefused() {
    #expect(usageError(["ls", "--json=yes"])?.message == "The flag '--json' does not take a value.")
  }

  @Test func missingAndUnexpectedArguments() {
    let missing = usageError(["init-cache"])
    #expect(missing?.message == "Missing expected argument '<bundle-id>'.")
    #expect(missing?.commandPath == ["protfs", "init-cache"])
    #expect(usageError(["set-class", "none"])?.message == "Missing expected argument '<path> ...'.")
    #expect(usageError(["init", "com.a.b", "extra"])?.message == "Unexpected argument 'extra'.")
    #expect(usageError(["tasks", "resume"])?.message == "Missing expected argument '<task-id>'.")
  }

  @Test func unknownCommandsSuggestTheNearestOne() {
    #expect(usageError(["lokc"])?.message == "Unknown command 'lokc'. Did you mean 'lock'?")
    let nested = usageError(["help", "passcode", "sett"])
    #expect(nested?.message == "Unknown command 'sett'. Did you mean 'set'?")
    #expect(nested?.commandPath == ["protfs", "passcode"])
    #expect(usageError(["passcode", "help", "sett"])?.message.contains("Did you mean 'set'?") == true)
    #expect(usageError(["cache", "lss"])?.message == "Unknown command 'lss'. Did you mean 'ls'?")
  }

  @Test func hiddenCommandsAreNeverSuggested() {
    #expect(usageError(["__exec-confine"])?.message == "Unknown command '__exec-confine'.")
  }
}

/// Every command's help shows examples, and every example that is one plain command parses.
@Suite struct CommandExampleTests {
  /// Every visible command's words, depth first.
  static func paths(_ command: Command = Commands.root, _ path: [String] = ["protfs"]) -> [[String]] {
    [path] + command.subcommands.filter { !$0.isHidden }.flatMap { paths($0, path + [$0.name]) }
  }

  @Test func everyVisibleCommandHasExamplesThatNameItAndParse() throws {
    for path in Self.paths() {
      let name = path.joined(separator: " ")
      let examples = CommandExamples.of(name)
      #expect(!examples.isEmpty, "\(name) has no EXAMPLES")
      #expect(examples.allSatisfy { $0.contains(name) }, "\(name): \(examples)")
      for example in examples {
        let command = example.split(separator: "#", maxSplits: 1)[0].trimmingCharacters(in: .whitespaces)
        // Only one plain command is parsed here; pipes, lists and substitutions are shell's.
        guard command.rangeOfCharacter(from: CharacterSet(charactersIn: "|;&$'\"<>*()")) == nil else { continue }
        let words = command.split(separator: " ").map(String.init).dropFirst()
        #expect(throws: Never.self, "\(example)") { _ = try parse(Array(words)) }
      }
    }
    #expect(Set(CommandExamples.all.keys).isSubset(of: Set(Self.paths().map { $0.joined(separator: " ") })))
  }
}
