import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem

/// `protfs status`: the lock state, the passcode, per class what is available, and what is out of line.
package enum StatusCommand {
  package static let command = Command(
    name: "status",
    abstract: "Show the lock state, the passcode and which classes are available.",
    discussion: """
      Walks every container to count items per class and, on a device that is not sealed, to
      find items whose permission bits do not match the state (for example files created by
      other programs since the last transition; running that transition again applies the table
      to them), saved-mode records protfs did not write, and files with more than one link,
      which lock leaves unchanged.
      Lists the device's active mounts (`protfs mount`).
      With --json: an object with state, protectedDataAvailable, since, dataProtection (off after
      passcode remove), passcode (a passcode was set, so unlock asks for it, as the text's
      Passcode line says; passcodeRequired is the same, its older name), classes (each with
      className and classRawValue, the keys ls and get-class use), inconsistencies (each with
      path and problem), hardLinked, mounts, sealed (contents encrypted at rest with keys of their
      own, docs/sealed.md) and beingSealed (a seal began and did not finish). A new device has data protection on and no
      passcode set: dataProtection true, passcode false.
      """,
    options: [CommonOptions.json],
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let status = try controller.status()
    if invocation.flag(CommonOptions.json) {
      try Console.json(status)
      return 0
    }
    printState(status, device: controller.device, invocation.spelling)
    printClasses(status)
    printFindings(status)
    return 0
  }

  /// The lines about the lock state: the device, its state, passcode, grace, wrong passcodes,
  /// mounts and an interrupted transition.
  static func printState(_ status: LockStatus, device: Device, _ spelling: CommandSpelling) {
    Console.out("Device:                    \(device.root)")
    Console.out("State:                     \(status.state) since \(format(status.since))")
    Console.out("Passcode:                  \(passcodeLine(status, spelling))")
    Console.out("Sealed:                    \(sealedLine(status, spelling))")
    Console.out("Protected data available:  \(yesNo(status.protectedDataAvailable))")
    if status.userInactive {
      Console.out("User inactive:             yes (complete-when-user-inactive behaves like complete)")
    }
    if let until = status.classKeysUntil {
      Console.out("Class A keys held until:   \(format(until)) (the lock's grace)")
    }
    if status.failedAttempts > 0 {
      let until = status.retryAfter.map { "; unlock refused until \(format($0))" } ?? ""
      Console.out("Wrong passcodes:           \(status.failedAttempts)\(until)")
    }
    for mount in status.mounts {
      Console.out(
        mount.forApp.map {
          "Mounted at:                \(mount.mountpoint) (for app \($0), by its supervisor, pid \(mount.pid))"
        } ?? "Mounted at:                \(mount.mountpoint) (daemon pid \(mount.pid), since \(format(mount.since)))")
    }
    if let interrupted = status.interruptedTransition {
      Console.out("Interrupted transition:    \(interrupted) (the next protfs command finishes it)")
    }
  }

  /// The table of what each class allows, between blank lines.
  static func printClasses(_ status: LockStatus) {
    Console.out("")
    Console.out(pad("CLASS", 42) + pad("FILES", 7) + pad("DIRS", 6) + pad("OPEN", 6) + pad("HANDLES", 9) + "CREATE")
    for row in status.classes {
      Console.out(
        pad(row.name, 42) + pad(String(row.files), 7) + pad(String(row.directories), 6) + pad(yesNo(row.available), 6)
          + pad(yesNo(row.openHandlesWork), 9) + yesNo(row.creatable))
    }
    Console.out("")
  }

  /// What the walk found: items it could not inspect, hard-linked files, inconsistencies.
  static func printFindings(_ status: LockStatus) {
    if status.uninspectable > 0 {
      Console.out(
        "Not inspected:             \(Counted.text(status.uninspectable, "item")) whose mode hides their attributes from uid \(Kernel.geteuid()) (run as root)"
      )
    }
    if status.hardLinkedCount > 0 {
      Console.out(
        "Hard-linked files:         \(status.hardLinkedCount) (more than one link: lock leaves them unchanged, since a link may be outside the device)"
      )
      for path in status.hardLinked { Console.out("  \(path)") }
    }
    if status.inconsistencyCount == 0 {
      Console.out("Inconsistencies:           none")
    } else {
      Console.out("Inconsistencies:           \(status.inconsistencyCount)")
      for item in status.inconsistencies { Console.out("  \(item.path): \(item.problem)") }
    }
  }

  /// "yes" or "no".
  private static func yesNo(_ value: Bool) -> String { value ? "yes" : "no" }

  /// The passcode line: a new device has data protection on and no passcode that unlock asks for
  /// (docs/semantics.md §3); "on" would read as a passcode someone set.
  static func passcodeLine(_ status: LockStatus, _ spelling: CommandSpelling) -> String {
    if !status.dataProtection { return "off (data protection inactive: every class stays available)" }
    if status.passcode { return "set (unlock asks for it)" }
    return "not set (data protection on; unlock asks for none until \(spelling.command("passcode set")) sets one)"
  }

  /// The Sealed line: whether contents are encrypted at rest, and what a lock then does.
  static func sealedLine(_ status: LockStatus, _ spelling: CommandSpelling) -> String {
    if status.beingSealed { return "being sealed (interrupted; \(spelling.command("seal")) finishes it)" }
    if status.sealed { return "yes (contents encrypted at rest; lock evicts class keys)" }
    return "no (lock changes permission modes; \(spelling.command("seal")) encrypts the files)"
  }

  private static func pad(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(1, width - text.count))
  }

  /// `date` in UTC to the second (`2026-12-03T17:25:08Z`), written by hand: the formatters'
  /// first use loads ICU's data, which took about half of a `status`.
  private static func format(_ date: Date) -> String {
    JSONStateFile.timestamp(date, milliseconds: false)
  }
}
