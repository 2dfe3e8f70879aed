import Foundation
import ProtFS
import ProtFSSystem

/// A program that could not be executed, as a shell says it: 127 when it is not found, 126 when
/// it cannot be run, with the lines that say why (and which directories its user could not
/// search). The launch's caller prints `lines` and exits with `status`.
public struct UnrunnableProgram: Error, Sendable, Equatable {
  /// The exit status a shell gives: 127 (not found) or 126 (found, but not executable).
  public var status: Int32
  /// What to tell the user, one line each, `protfs: COMMAND: PROGRAM: …`.
  public var lines: [String]

  /// A program that could not run, with `status` and `lines`.
  public init(status: Int32, lines: [String]) {
    self.status = status
    self.lines = lines
  }
}

extension ConfinedSpawn {
  /// `start` for a command of `commandName` (`exec`, `app launch`): a program that cannot be
  /// executed is an `UnrunnableProgram`, said as a shell says it.
  package static func startCommand(_ command: [String], device: Device, _ options: Options, by commandName: String)
    throws -> pid_t
  {
    do {
      return try start(command, device: device, options)
    } catch let failure as ExecFailure {
      throw unrunnable(failure, by: commandName)
    }
  }

  /// The exit status and lines of a program that could not be executed: `protfs: exec: CMD:
  /// command not found` (127) and which directories were passed over, or why the file found
  /// cannot be run (126).
  package static func unrunnable(_ failure: ExecFailure, by commandName: String) -> UnrunnableProgram {
    let user = "uid \(AppUser.canAssume ? AppUser.standard.uid : Kernel.getuid())"
    let prefix = "protfs: \(commandName): \(failure.program): "
    if failure.errno == EACCES, let file = failure.file {
      return UnrunnableProgram(
        status: 126,
        lines: [
          prefix + "Permission denied: \(user) may not execute '\(file)'; "
            + "make it executable for that user (chmod o+rx) or name another program."
        ])
    }
    if failure.errno == ENOENT, failure.program.contains("/") {
      guard let closed = failure.closedDirectories.first else {
        return UnrunnableProgram(status: 127, lines: [prefix + "No such file or directory"])
      }
      return UnrunnableProgram(
        status: 126,
        lines: [
          prefix + "Permission denied: \(user) cannot search '\(closed)' "
            + "(or a directory above it); let it through (chmod o+x) or put the program elsewhere."
        ])
    }
    guard failure.errno == ENOENT else {
      return UnrunnableProgram(status: 126, lines: [prefix + "\(Errno(failure.errno))"])
    }
    var lines = [prefix + "command not found"]
    if !failure.closedDirectories.isEmpty {
      lines.append(
        "protfs: \(commandName): skipped the PATH directories \(user) cannot search: "
          + failure.closedDirectories.joined(separator: ", ")
          + "; let it through (chmod o+x) or give the program's full path in a directory it can search.")
    }
    return UnrunnableProgram(status: 127, lines: lines)
  }
}
