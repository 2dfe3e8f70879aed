import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSSessions
import ProtFSSystem

/// `protfs seal`: seals a device that holds files.
package enum SealCommand {
  package static let command = Command(
    name: "seal",
    abstract: "Seal the device: encrypt every file at rest with a key of its own, wrapped by its class key.",
    discussion: """
      Makes the device's keys, as `protfs init --sealed` does (docs/sealed.md), then encrypts
      every regular file in its containers with a fresh key wrapped by the key of the file's
      effective class. Each file is replaced by an encrypted copy with the same attributes,
      owner, mode and times, made beside it and renamed over it: a kill leaves the old file or
      the new one, never neither, and the next protfs command (or seal again, when the keys need
      the passcode) finishes the sealing. Once sealed, lock evicts class keys instead of changing
      permission modes; a sealed device stays sealed.

      Needs the device unlocked, and asks for its passcode when one is set (--passcode-file,
      --passcode, $PROTFS_PASSCODE, or a prompt on a terminal). Refused while an app runs, the
      device is mounted or its session service runs, and, before anything changes, while a file
      has more than one link (its other names would keep the plaintext) or a process holds it
      open. Sealing a sealed device changes nothing.

      With --json: one object with device, sealed (true), sealedAlready, resumed (it finished
      an interrupted sealing), encrypted (files encrypted now) and skipped (files an interrupted
      sealing had encrypted).
      """,
    options: UnlockCommand.passcode.options + [CommonOptions.json],
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    try controller.device.requireInitialized()
    try DeviceInUse.refuse(invocation, consequence: "the device cannot be sealed")
    let record = try controller.record()
    let passcode =
      record.passcodeHash == nil ? nil : try invocation.passcode(UnlockCommand.passcode, prompt: "Passcode: ")
    let report = try controller.sealDevice(passcode: passcode)
    if invocation.flag(CommonOptions.json) {
      try Console.json(Outcome(device: controller.device.root, report))
    } else if report.sealedAlready {
      Console.out("The device '\(controller.device.root)' is sealed already; nothing changed.")
    } else {
      Console.out(summary(report, device: controller.device))
    }
    return 0
  }

  /// One line: what the sealing encrypted.
  static func summary(_ report: SealReport, device: Device) -> String {
    let files = Counted.text(report.encrypted, "file")
    let earlier = report.skipped > 0 ? " (\(report.skipped) sealed by the interrupted run)" : ""
    return "\(device.root): sealed (\(files) encrypted\(earlier)); lock now evicts class keys."
  }

  /// Before any command: finishes a sealing a kill interrupted, or says why it cannot yet.
  static func finishInterrupted(_ invocation: Invocation) {
    let controller = invocation.lockController
    guard controller.isBeingSealed else { return }
    let later = "the next \(invocation.spelling.command("seal")) finishes it"
    do {
      try DeviceInUse.refuse(invocation, consequence: "the device cannot be sealed")
    } catch {
      let why = (error as? ExitStatus)?.message ?? "\(error)"
      return Console.err("note: the sealing of \(controller.device.root) was interrupted; \(later). \(why)")
    }
    do {
      if let report = try controller.finishInterruptedSealing() {
        Console.err(
          "note: finished an interrupted sealing of \(controller.device.root) (\(report.encrypted) more files)."
        )
      }
    } catch {
      Console.err(
        "warning: the sealing of \(controller.device.root) was interrupted; \(later): \(invocation.describe(error))")
    }
  }

  /// What `seal --json` prints.
  struct Outcome: Encodable {
    /// The device root.
    var device: String
    /// Always true: the device is sealed (or the command failed).
    var sealed = true
    /// It was sealed before this command.
    var sealedAlready: Bool
    /// This finished a sealing a kill had interrupted.
    var resumed: Bool
    /// Files encrypted now.
    var encrypted: Int
    /// Files the interrupted sealing had encrypted.
    var skipped: Int

    init(device: String, _ report: SealReport) {
      self.device = device
      sealedAlready = report.sealedAlready
      resumed = report.resumed
      encrypted = report.encrypted
      skipped = report.skipped
    }
  }
}
