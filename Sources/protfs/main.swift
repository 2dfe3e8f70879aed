import Foundation
import ProtFS
import ProtFSSystem

// First copy the arguments and the environment, then hide the passcodes in them from other
// processes (the process list, /proc/PID/environ, the program `exec` runs).
let words = Array(CommandLine.arguments.dropFirst())
let environment = ProcessInfo.processInfo.environment
Secrets.hideArguments()
Secrets.hideEnvironment()
ProcessTuning.keepFreedMemory()
// Exit statuses (the README's CLI contract): 0 success, 1 runtime error, 64 usage error (EX_USAGE).
let parser = Parser(root: Commands.root, environment: environment)
let status: Int32
do {
  switch try parser.parse(words) {
  case .help(let chain):
    Console.out(Help.text(chain), terminator: "")
    status = 0
  case .version:
    Console.out("protfs \(ProtFSVersion.current)")
    status = 0
  case .run(let command, let invocation):
    // Whatever the command, first finish a lock transition a crash interrupted (one stat when none
    // was). Should that fail, the command still runs: transitions retry it, status shows it.
    if command.name != ExecConfinedCommand.command.name {
      do {
        if let report = try invocation.lockController.recoverInterruptedTransition() {
          Console.err(
            "note: finished an interrupted \(report.operation) of \(invocation.device.root) (\(report.to.lockState)).")
          TransitionText.warnings(report)
        }
      } catch {
        Console.err("warning: \(error.commandLineDescription)")
      }
    }
    status = try command.run!(invocation)
  }
} catch let error as UsageError {
  var chain = [Commands.root]
  for name in error.commandPath.dropFirst() {
    if let next = chain.last!.subcommand(named: name) { chain.append(next) }
  }
  Console.err("Error: \(error.message)")
  Console.err("Usage: \(Help.usage(chain))")
  Console.err("  See '\(chain.map(\.name).joined(separator: " ")) --help' for more information.")
  status = 64
} catch let error as ProtFSError {
  Console.err("Error: \(error.commandLineDescription)")
  status = 1
} catch let error as ExitStatus {
  if let message = error.message { Console.err("Error: \(message)") }
  status = error.code
} catch {
  Console.err("Error: \(error.localizedDescription)")
  status = 1
}
fflush(nil)
exit(status)
