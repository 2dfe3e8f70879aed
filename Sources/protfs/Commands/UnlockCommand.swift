import ProtFS

/// `protfs unlock`: every class becomes available again and every original mode comes back.
enum UnlockCommand {
  static let command = Command(
    name: "unlock",
    abstract: "Unlock the device: every class becomes available and every original mode comes back.",
    discussion: """
      When a passcode was set with `protfs passcode set`, unlock asks for it (--passcode,
      $PROTFS_PASSCODE, or a prompt on a terminal). After five wrong passcodes in a row, attempts
      are refused for 1, 5, 15 and then 60 minutes, as on iOS.
      """,
    options: [.value("passcode", "code", help: "The device passcode (default: $PROTFS_PASSCODE, else a prompt).")],
    run: run
  )

  static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let record = try controller.record()
    var passcode: String?
    if record.state != .unlocked && record.passcodeHash != nil {
      passcode = invocation.passcode(option: "passcode", environmentKey: "PROTFS_PASSCODE", prompt: "Passcode: ")
    }
    let report = try controller.unlock(passcode: passcode)
    Console.out(TransitionText.summary(report, device: controller.device))
    TransitionText.warnings(report)
    // Finished background downloads that waited for the data to become available move into place now.
    for task in try controller.device.completeWaitingDownloads() {
      switch task.state {
      case .completed: Console.out("Moved the download of \(task.url) to \(task.destinationPath ?? "its destination").")
      case .waitingForUnlock:
        Console.err("note: the download of \(task.url) still waits: its destination is not available.")
      default:
        Console.err(
          "warning: the download of \(task.url) could not be moved: \(task.errorMessage ?? task.state.rawValue).")
      }
    }
    return 0
  }
}
