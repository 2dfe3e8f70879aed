import ProtFS
import ProtFSLock

/// `protfs passcode set|remove`.
package enum PasscodeCommand {
  package static let command = Command(
    name: "passcode",
    abstract: "Set or remove the device passcode.",
    discussion: """
      A new device has data protection on and no passcode set: unlock asks for none. `passcode
      set` makes unlock ask for one (stored only as a salted PBKDF2-HMAC-SHA256 hash); `passcode remove` turns data
      protection off, so every class stays available in every state. Both need the device
      unlocked, and the current passcode when one was set. Typed at the prompt, the new passcode
      is asked for twice, as passwd(1) does.
      """,
    subcommands: [
      Command(
        name: "set", abstract: "Set the passcode unlock asks for.",
        options: newPasscode.options + current.options,
        run: set),
      Command(
        name: "remove", abstract: "Remove the passcode: data protection goes off.",
        options: current.options,
        run: remove),
    ]
  )

  /// `--passcode` and `--passcode-file` of `passcode set`: the passcode to set.
  package static let newPasscode = PasscodeOption("passcode", "The new passcode", environmentKey: "PROTFS_PASSCODE")
  /// `--current` and `--current-file`: the passcode in force, for set and remove.
  package static let current = PasscodeOption(
    "current", "The current passcode, when one is set", environmentKey: "PROTFS_CURRENT_PASSCODE")

  /// The passcode in force, asked for only when one is set.
  package static func currentPasscode(_ invocation: Invocation, _ controller: LockController) throws -> String? {
    guard try controller.record().passcodeHash != nil else { return nil }
    return try invocation.passcode(current, prompt: "Current passcode: ")
  }

  package static func set(_ invocation: Invocation) throws -> Int32 {
    try invocation.requireOneStandardInput([newPasscode, current])
    let controller = invocation.lockController
    let current = try currentPasscode(invocation, controller)
    let prompts = invocation.promptsFor(newPasscode)
    guard
      let passcode = try invocation.passcode(newPasscode, prompt: "New passcode: ")
    else {
      throw invocation.usageError(
        "Give the new passcode with --passcode-file FILE, --passcode CODE or PROTFS_PASSCODE.")
    }
    // Typed unseen, it is typed twice, as passwd(1) asks.
    if prompts, Terminal.readSecret("Retype new passcode: ") != passcode {
      throw ExitStatus(
        code: 1, message: "The passcodes typed do not match; the passcode is unchanged. Run passcode set again.")
    }
    try controller.setPasscode(passcode, current: current)
    Console.out("\(controller.device.root): passcode set; unlock now asks for it.")
    return 0
  }

  package static func remove(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let current = try currentPasscode(invocation, controller)
    try controller.removePasscode(current: current)
    Console.out("\(controller.device.root): passcode removed; data protection is off and every class stays available.")
    return 0
  }
}
