import Foundation
import ProtFS
import ProtFSRuntime
import ProtFSSystem

extension ConfinedSpawn {
  /// `start` for a command of `commandName` (`exec`, `app launch`): a program that cannot be
  /// executed ends it as a shell's would, with 127 when it is not found and 126 when it cannot be
  /// run, said as a shell says it, with the directories the program's user could not search.
  static func startCommand(_ command: [String], device: Device, _ options: Options, by commandName: String) throws
    -> pid_t
  {
    do {
      return try start(command, device: device, options)
    } catch let failure as ExecFailure {
      throw unrunnable(failure, by: commandName)
    }
  }

  /// The exit status and message of a program that could not be executed, after it is printed:
  /// `protfs: exec: CMD: command not found` (127) and which directories were passed over, or why
  /// the file found cannot be run (126).
  static func unrunnable(_ failure: ExecFailure, by commandName: String) -> ExitStatus {
    let user = "uid \(AppUser.canAssume ? AppUser.standard.uid : getuid())"
    let prefix = "protfs: \(commandName): \(failure.program): "
    let code: Int32
    var lines: [String]
    if failure.errno == EACCES, let file = failure.file {
      code = 126
      lines = [
        prefix + "Permission denied: \(user) may not execute '\(file)'; "
          + "make it executable for that user (chmod o+rx) or name another program."
      ]
    } else if failure.errno == ENOENT, failure.program.contains("/") {
      code = failure.closedDirectories.isEmpty ? 127 : 126
      lines = [
        prefix
          + (failure.closedDirectories.isEmpty
            ? "No such file or directory"
            : "Permission denied: \(user) cannot search '\(failure.closedDirectories[0])' "
              + "(or a directory above it); let it through (chmod o+x) or put the program elsewhere.")
      ]
    } else if failure.errno == ENOENT {
      code = 127
      lines = [prefix + "command not found"]
      if !failure.closedDirectories.isEmpty {
        lines.append(
          "protfs: \(commandName): skipped the PATH directories \(user) cannot search: "
            + failure.closedDirectories.joined(separator: ", ")
            + "; let it through (chmod o+x) or give the program's full path in a directory it can search.")
      }
    } else {
      code = 126
      lines = [prefix + "\(Errno(failure.errno))"]
    }
    for line in lines { Console.err(line) }
    return ExitStatus(code: code)
  }
}
