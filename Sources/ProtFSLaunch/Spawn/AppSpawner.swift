import Foundation
import ProtFS
import ProtFSSystem

/// How a launcher starts an app's program once everything around it is ready: `ConfinedSpawner`
/// in use; a fake in the launcher's unit tests, which see what the app would be given.
package protocol AppSpawner: Sendable {
  /// Starts `command` on `device` with `options`; returns its pid once it runs. Throws
  /// `UnrunnableProgram` when the program cannot be executed, or the failed step's error.
  func spawn(_ command: [String], device: Device, options: ConfinedSpawn.Options) throws -> pid_t
}

/// The spawner in use: `ConfinedSpawn`, the one way protfs starts untrusted code.
package struct ConfinedSpawner: AppSpawner {
  /// The command a failure names (`app launch`, `exec`).
  package var commandName: String

  /// A spawner whose failures name `commandName`.
  package init(commandName: String = "app launch") { self.commandName = commandName }

  package func spawn(_ command: [String], device: Device, options: ConfinedSpawn.Options) throws -> pid_t {
    try ConfinedSpawn.startCommand(command, device: device, options, by: commandName)
  }
}
