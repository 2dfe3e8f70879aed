import Foundation
import ProtFS
import Testing

@testable import ProtFSCLI

/// Every command of the tree with the words that select it, depth first.
func allCommands(_ command: Command = Commands.root, path: [String] = []) -> [([String], Command)] {
  let here = path + [command.name]
  return [(here, command)] + command.subcommands.flatMap { allCommands($0, path: here) }
}

/// The declarations themselves: each option declared once, read only where declared.
@Suite struct DeclarationTests {
  @Test func noCommandAcceptsTwoOptionsOfOneNameOrLetter() {
    for (path, command) in allCommands() {
      var accepted = command.options + [CommonOptions.device, CommonOptions.help]
      if path.count == 1 { accepted.append(CommonOptions.version) }
      let longs = accepted.map(\.long)
      #expect(Set(longs).count == longs.count, "\(path): \(longs)")
      let shorts = accepted.compactMap(\.short)
      #expect(Set(shorts).count == shorts.count, "\(path): \(shorts)")
      let arguments = command.arguments.map(\.name)
      #expect(Set(arguments).count == arguments.count, "\(path): \(arguments)")
      for option in accepted { #expect(!option.help.isEmpty, "\(path) --\(option.long)") }
      for argument in command.arguments { #expect(!argument.help.isEmpty, "\(path) <\(argument.name)>") }
    }
  }

  /// `--json`, `--dry-run`, `--follow`, `--include-resumable` and `--progress` mean one thing
  /// everywhere, so every command declares the same value (one help text).
  @Test func sharedOptionsAreOneDeclaration() {
    let shared = [
      CommonOptions.json, CommonOptions.dryRun, CommonOptions.follow, CacheCommand.includeResumable,
      DownloadCommand.progress,
    ]
    var users: [String: Int] = [:]
    for (path, command) in allCommands() {
      for option in command.options {
        guard let declaration = shared.first(where: { $0.long == option.long }) else { continue }
        #expect(option == declaration, "\(path) declares its own --\(option.long)")
        users[option.long, default: 0] += 1
      }
    }
    // app status is the ninth, sessions and tasks events the next two, then lock, unlock, init,
    // download, upload, tasks prune, set-class, app list, inspect, doctor and seal
    #expect(users["json"] == 24)
    #expect(users["dry-run"] == 2 && users["follow"] == 2 && users["include-resumable"] == 2)
    #expect(users["progress"] == 3)  // download, tasks resume and upload
  }

  @Test func everyJSONCommandShowsTheOneHelpText() {
    for (path, command) in allCommands() where command.options.contains(CommonOptions.json) {
      let chain = path.indices.map { index in
        allCommands().first { $0.0 == Array(path[...index]) }!.1
      }
      let text = Help.text(chain)
      #expect(text.contains("  --json                  \(CommonOptions.json.help)\n"), "\(path)")
      #expect(Help.usage(chain).contains("[--json]"), "\(path)")
    }
  }

  @Test func commandsDeclareTheirOwnOptionsAndDeviceOnly() {
    #expect(ListCommand.command.declares(CommonOptions.json))
    #expect(ListCommand.command.declares(CommonOptions.device))
    #expect(!ListCommand.command.declares(CommonOptions.dryRun))
    #expect(!ListCommand.command.declares(CommonOptions.help))
    // Same name, other declaration: `protfs exec`'s --passcode is not unlock's.
    #expect(ExecCommand.command.declares(ExecCommand.passcode.code))
    #expect(!ExecCommand.command.declares(UnlockCommand.passcode.code))
    #expect(SetClassCommand.command.declares(GetClassCommand.path))
    #expect(!ListCommand.command.declares(GetClassCommand.path))
  }

  @Test func invocationRemembersTheCommandItWasParsedFor() throws {
    let (command, invocation) = try ProtFSCLITests.invocation(["tasks", "resume", "7", "--progress", "none"])
    #expect(command.name == "resume" && invocation.command.name == "resume")
    #expect(invocation.required(TasksCommand.taskID) == "7")
    #expect(invocation.value(DownloadCommand.progress) == "none")
  }
}

/// Reading what a command does not declare traps (a programmer error, found by the first test
/// that runs the command). Each exit test runs in a child process.
@Suite struct UndeclaredAccessorTests {
  @Test func readingAnUndeclaredFlagTraps() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["ls"]).invocationForTest
      _ = invocation.flag(CommonOptions.dryRun)
    }
    #expect(
      result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains(
        "'protfs ls' reads --dry-run, which it does not declare.") == true)
  }

  @Test func readingAnotherCommandsOptionOfTheSameNameTraps() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["exec", "--", "true"])
        .invocationForTest
      _ = invocation.value(UnlockCommand.passcode.code)
    }
    #expect(
      result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains(
        "'protfs exec' reads --passcode, which it does not declare.") == true)
  }

  @Test func readingAnUndeclaredArgumentTraps() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["ls"]).invocationForTest
      _ = invocation.required(InitCommand.bundleID)
    }
    #expect(
      result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains(
        "'protfs ls' reads <bundle-id>, which it does not declare.") == true)
  }

  @Test func readingAFlagAsAValueTraps() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["ls"]).invocationForTest
      _ = invocation.value(CommonOptions.json)
    }
    #expect(
      result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains(
        "--json is read as a value, but is declared otherwise.") == true)
  }

  @Test func readingAVariadicArgumentAsOneValueTraps() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["get-class", "a"])
        .invocationForTest
      _ = invocation.argument(GetClassCommand.path)
    }
    #expect(
      result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) }?.contains(
        "<path> is read with the wrong accessor for its arity oneOrMore.") == true)
  }

  @Test func readingWhatIsDeclaredDoesNotTrap() async {
    await #expect(processExitsWith: .success) {
      let invocation = try Parser(root: Commands.root, environment: [:]).parse(["ls", "-R"]).invocationForTest
      guard invocation.flag(ListCommand.recursive), !invocation.flag(CommonOptions.json),
        invocation.argument(ListCommand.path) == nil
      else { exit(3) }
    }
  }
}

extension Parser.Outcome {
  /// The invocation of a `.run` outcome; traps for help and version (for exit tests).
  var invocationForTest: Invocation {
    guard case .run(_, let invocation) = self else { preconditionFailure("not a run") }
    return invocation
  }
}

/// `ProtFSCommandLine.run`: the exit statuses of the README's contract, in-process.
@Suite struct ExitStatusTests {
  /// A fresh empty directory, removed by `body`'s caller.
  private func withTemporaryDirectory(_ body: (String) throws -> Void) throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-cli-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    try body(path)
  }

  @Test func versionIsZeroAndUsageErrorsAre64() {
    #expect(ProtFSCommandLine.run(["--version"], environment: [:]) == 0)
    #expect(ProtFSCommandLine.run(["lokc"], environment: [:]) == 64)
    #expect(ProtFSCommandLine.run(["init"], environment: [:]) == 64)
    #expect(ProtFSCommandLine.run(["ls", "--json=yes"], environment: [:]) == 64)
  }

  @Test func aRuntimeErrorIsOne() throws {
    try withTemporaryDirectory { directory in
      let device = directory + "/device"
      #expect(ProtFSCommandLine.run(["--device", device, "ls"], environment: [:]) == 1)
      #expect(ProtFSCommandLine.run(["ls"], environment: ["PROTFS_DEVICE": device]) == 1)
      #expect(!FileManager.default.fileExists(atPath: device), "a failed ls created the device")
    }
  }

  @Test func aCommandsOwnStatusComesThrough() throws {
    try withTemporaryDirectory { directory in
      // An audit that cannot run exits 2, which CI tells apart from findings (1).
      let status = ProtFSCommandLine.run(
        ["--device", directory + "/device", "audit", directory + "/missing"], environment: [:])
      #expect(status == 2)
    }
  }
}
