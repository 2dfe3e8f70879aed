import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// `protfs erase`: erases the device's contents and settings, as `simctl erase` does.
package enum EraseCommand {
  package static let command = Command(
    name: "erase",
    abstract: "Erase the device's contents and settings: every app, its data and tasks, the passcode.",
    discussion: """
      Removes every container and bundle, the app records, the background tasks, the logs, the
      passcode and the lock state: the device is then as `protfs init` made it (unlocked, no
      passcode, no container), at the same path. Refused while an app runs, the device is
      mounted or its session service runs. Asks for confirmation when standard input is a
      terminal; --force (-f) does not ask, and is needed when standard input is not a terminal.
      What is erased is renamed into .protfs/trash first and removed there: a kill leaves
      nothing half erased, and the next protfs command finishes the erase. Symlinks are removed,
      never followed.
      """,
    options: [force],
    run: run
  )

  /// `--force`, `-f`.
  package static let force = Option.flag("force", short: "f", help: "Erase without asking.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    try DeviceInUse.refuse(invocation)
    if !invocation.flag(force) {
      guard Kernel.isatty(STDIN_FILENO) == 1 else {
        throw invocation.usageError("erase asks for confirmation on a terminal; give --force to erase without asking.")
      }
      FileHandle.standardError.write(
        Data("Erase every app, its data and the passcode of the device '\(device.root)'? [y/N] ".utf8))
      let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased()
      guard answer == "y" || answer == "yes" else {
        Console.err("Not erased.")
        return 1
      }
    }
    try device.erase(others: [AppBundle.directoryName])
    Console.out("Erased the device '\(device.root)'.")
    return 0
  }
}
