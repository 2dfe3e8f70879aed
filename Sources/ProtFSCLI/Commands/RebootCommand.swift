import ProtFS

/// `protfs reboot`: the device restarts, before first unlock.
package enum RebootCommand {
  package static let command = Command(
    name: "reboot",
    abstract: "Reboot the device: only class none stays available until the first unlock.",
    discussion: """
      Whatever the state, the device goes to before-first-unlock: complete, complete-unless-open,
      complete-until-first-user-authentication and complete-when-user-inactive files lose their
      permission bits until `protfs unlock`.
      """,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let report = try controller.reboot()
    Console.out(TransitionText.summary(report, device: controller.device))
    TransitionText.warnings(report)
    return 0
  }
}
