import ProtFS
import ProtFSDownloads

/// `protfs unlock`: every class becomes available again and every original mode comes back.
package enum UnlockCommand {
  package static let command = Command(
    name: "unlock",
    abstract: "Unlock the device: every class becomes available and every original mode comes back.",
    discussion: """
      When a passcode was set with `protfs passcode set`, unlock asks for it (--passcode-file,
      --passcode, $PROTFS_PASSCODE, or a prompt on a terminal). After five wrong passcodes in a
      row, attempts are refused for 1, 5, 15 and then 60 minutes, as on iOS.

      With --json: one object with device, operation, state, protectedDataAvailable, visited,
      restricted, restored, hardLinked, unauthenticated, notUTF8, garbageClass and downloads (the finished
      downloads that waited for the unlock, each with id, kind, url, state, destinationPath and,
      when it could not be placed, error); warnings and errors still go to stderr, with the same
      exit status.
      """,
    options: passcode.options + [CommonOptions.json],
    run: run
  )

  /// `--passcode` and `--passcode-file`: the device passcode.
  package static let passcode = PasscodeOption("passcode", "The device passcode", environmentKey: "PROTFS_PASSCODE")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let record = try controller.record()
    var passcode: String?
    if record.state != .unlocked && record.passcodeHash != nil {
      passcode = try invocation.passcode(Self.passcode, prompt: "Passcode: ")
    }
    let report = try controller.unlock(passcode: passcode)
    let json = invocation.flag(CommonOptions.json)
    if !json { Console.out(TransitionText.summary(report, device: controller.device)) }
    TransitionText.warnings(report)
    // Finished background downloads that waited for the data to become available move into place now.
    // One that cannot be placed fails the command (exit 1) although the device is unlocked: its file
    // is not where the download said it would be.
    var placementFailed = false
    let placed = try controller.device.completeWaitingDownloads()
    if json {
      var result = TransitionJSON(report, device: controller.device, record: try controller.record())
      result.downloads = placed.map { TaskOutcome($0, spelling: invocation.spelling) }
      try Console.json(result)
    }
    for task in placed {
      switch task.state {
      case .completed:
        if !json { Console.out("Moved the download of \(task.url) to \(task.destinationPath ?? "its destination").") }
      case .waitingForUnlock:
        Console.err("note: the download of \(task.url) still waits: its destination is not available.")
      default:
        placementFailed = true
        Console.err(
          "Error: the device is unlocked, but the download of \(task.url) could not be moved into place: \(task.commandLineErrorText(invocation.spelling) ?? task.state.rawValue)"
        )
      }
    }
    return placementFailed ? 1 : 0
  }
}
