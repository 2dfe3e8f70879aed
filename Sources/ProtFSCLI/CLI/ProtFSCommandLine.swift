import Foundation
import ProtFS
import ProtFSSystem

/// The `protfs` program: what its `main.swift` starts.
package enum ProtFSCommandLine {
  /// Runs `protfs` as a process: copies the arguments and the environment, hides the passcodes in
  /// them from other processes (the process list, /proc/PID/environ, the program `exec` runs),
  /// runs the command and flushes the output. Returns the exit status.
  package static func main() -> Int32 {
    let words = Array(CommandLine.arguments.dropFirst())
    // The words as bytes too, before the passcodes are hidden in them: a file name need not be
    // UTF-8, and `CommandLine.arguments` has replaced what is not.
    let bytes = (1..<Int(CommandLine.argc)).map { index in
      CommandLine.unsafeArgv[index].map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))) }?.map {
        UInt8(bitPattern: $0)
      } ?? []
    }
    let environment = ProcessEnvironment.all()
    Secrets.hideArguments()
    Secrets.hideEnvironment()
    ProcessTuning.keepFreedMemory()
    let status = run(words, environment: environment, bytes: bytes)
    fflush(nil)
    return status
  }

  /// Parses `words` (the command line without the program name) and runs the command in
  /// `environment`. Returns the exit status (the README's CLI contract): 0 success, 1 runtime
  /// error, 64 usage error (EX_USAGE), or the status a command chose. `bytes` are the words as the
  /// process got them, when one may not be UTF-8.
  package static func run(_ words: [String], environment: [String: String], bytes: [[UInt8]]? = nil) -> Int32 {
    let parser = Parser(root: Commands.root, environment: environment)
    // The spelling of the commands an error suggests: the device and app of the command that failed.
    var spelling = CommandSpelling()
    do {
      switch try parser.parse(words, bytes: bytes) {
      case .run(let command, let invocation):
        spelling = invocation.spelling
        finishInterruptedWork(before: command, invocation)
        return try command.run!(invocation)
      case let outcome:
        printDocumentation(outcome)
        return 0
      }
    } catch {
      return report(error, spelling: spelling)
    }
  }

  /// Prints the help, version, manual page, command list or reference `outcome` asks for.
  static func printDocumentation(_ outcome: Parser.Outcome) {
    switch outcome {
    case .help(let chain): Console.out(Help.text(chain), terminator: "")
    case .version: Console.out("protfs \(ProtFSVersion.current)")
    case .manual(let chain): Console.out(ManualPage.roff(chain), terminator: "")
    case .commandList:
      for chain in ManualPage.chains() { Console.out(chain.map(\.name).joined(separator: " ")) }
    case .markdownReference: Console.out(CommandReference.markdown(), terminator: "")
    case .markdownSection(let chain): Console.out(CommandReference.section(chain), terminator: "")
    case .run: break
    }
  }

  /// Whatever the command, first finishes what a crash or a kill interrupted on the device: a
  /// lock transition, a sealing, an erase or an uninstall (one stat each when none was), and a lock's grace
  /// that ended while nobody was there to end it. Should that fail, the command still runs:
  /// transitions retry it, status shows it.
  static func finishInterruptedWork(before command: Command, _ invocation: Invocation) {
    do {
      if let report = try invocation.lockController.recoverInterruptedTransition() {
        Console.err(
          "note: finished an interrupted \(report.operation) of \(invocation.device.root) (\(report.to.lockState))."
        )
        TransitionText.warnings(report)
      }
    } catch {
      Console.err("warning: \(invocation.describe(error))")
    }
    // A sealing a kill interrupted; `seal` itself finishes it, with the passcode when it needs it.
    if command.name != SealCommand.command.name { SealCommand.finishInterrupted(invocation) }
    do {
      if Kernel.geteuid() == 0, let path = try invocation.lockController.finishInterruptedClassChange() {
        Console.err("note: finished an interrupted class change of '\(path)' in \(invocation.device.root).")
      }
    } catch {
      Console.err("warning: \(invocation.describe(error))")
    }
    do {
      if try invocation.device.finishInterruptedRemoval() {
        Console.err("note: finished an interrupted removal in \(invocation.device.root) (an erase or uninstall).")
      }
    } catch {
      Console.err("warning: \(invocation.describe(error))")
    }
    // The grace's process was killed.
    if Kernel.geteuid() == 0, command.name != EndGraceCommand.command.name {
      // Best effort, beside the command: every command run as root tries it again.
      _ = try? invocation.lockController.endGraceIfDue()
    }
  }

  /// Prints `error` as the CLI contract says and returns its exit status: a usage error with its
  /// command's usage (64), a runtime error as `Error: …` (1), or the status an `ExitStatus` carries.
  static func report(_ error: any Error, spelling: CommandSpelling) -> Int32 {
    switch error {
    case let error as UsageError:
      var chain = [Commands.root]
      for name in error.commandPath.dropFirst() {
        if let next = chain.last!.subcommand(named: name) { chain.append(next) }
      }
      Console.err("Error: \(error.message)")
      Console.err("Usage: \(Help.usage(chain))")
      Console.err("  See '\(chain.map(\.name).joined(separator: " ")) --help' for more information.")
      return 64
    case let error as ProtFSError:
      Console.err("Error: \(error.commandLineDescription(spelling))")
      return 1
    case let error as ExitStatus:
      if let message = error.message { Console.err("Error: \(message)") }
      return error.code
    default:
      Console.err("Error: \(FailureReason.of(error)).")
      return 1
    }
  }
}
