import Foundation
import ProtFS
import ProtFSLock

/// `protfs lock`: the device locks; classes A and B (and CX after `--inactive`) become unavailable.
package enum LockCommand {
  package static let command = Command(
    name: "lock",
    abstract: "Lock the device: complete and complete-unless-open data becomes unavailable.",
    discussion: """
      Applies the class × state table for the locked state to every item of every container: files of
      unavailable classes lose all permission bits, directories where nothing may be created lose
      their write bits; run as root, protfs also hands items of other owners to root. The
      original mode and owner are kept, authenticated, in user.protfs.saved-mode and come back
      at unlock. Files with more than one link are left unchanged and named in a warning.
      Locking a locked device applies the table again to items created meanwhile.
      Files of unavailable classes that processes still hold open are reported. Without a
      passcode nothing changes (data protection is off).
      """,
    options: [grace, inactive],
    run: run
  )

  /// `--grace SECONDS`.
  package static let grace = Option.value(
    "grace", "seconds", help: "Wait this long before the lock takes effect (iOS keeps class A keys ~10 s).")
  /// `--inactive`.
  package static let inactive = Option.flag(
    "inactive", help: "Also end the user-inactivity period: complete-when-user-inactive behaves like complete.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    let report: TransitionReport?
    if let text = invocation.value(Self.grace) {
      guard let grace = TimeInterval(text), grace.isFinite else {
        throw invocation.usageError("The grace period '\(text)' is not a number of seconds.")
      }
      guard (0...LockController.maximumGrace).contains(grace) else {
        throw invocation.usageError(
          "The grace period '\(text)' is out of range: give 0 to \(Int(LockController.maximumGrace)) seconds (iOS keeps class A keys about 10 s)."
        )
      }
      Console.err("Locking \(controller.device.root) in \(text) seconds…")
      report = try controller.lock(grace: grace, inactive: invocation.flag(Self.inactive)) { deadline in
        let wait = deadline.timeIntervalSinceNow
        if wait > 0 { Thread.sleep(forTimeInterval: wait) }
      }
    } else {
      report = try controller.lock(inactive: invocation.flag(Self.inactive))
    }
    guard let report else {
      Console.err("The lock was cancelled: the device changed state during the grace period.")
      return 1
    }
    Console.out(TransitionText.summary(report, device: controller.device))
    TransitionText.warnings(report)
    for file in try controller.openFilesStillReachable() {
      Console.err(
        "warning: '\(file.path)' is still open in process \(file.pid) (\(file.command)); its data stays reachable through that descriptor until it is closed."
      )
    }
    return 0
  }
}
