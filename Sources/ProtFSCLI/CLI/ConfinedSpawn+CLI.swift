import Foundation
import ProtFS
import ProtFSRuntime
import ProtFSSystem

extension ConfinedSpawn {
  /// `start` for a command: a program that cannot be executed ends it as a shell's would, with
  /// 127 when it is not found and 126 when it cannot be run.
  static func startCommand(_ command: [String], device: Device, _ options: Options) throws -> pid_t {
    do {
      return try start(command, device: device, options)
    } catch let failure as ExecFailure {
      throw ExitStatus(
        code: failure.errno == ENOENT ? 127 : 126, message: "Cannot run '\(failure.program)': \(Errno(failure.errno)).")
    }
  }
}
