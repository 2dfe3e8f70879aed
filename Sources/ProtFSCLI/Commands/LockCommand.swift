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

      As on a phone, the device locks at once (protected data becomes unavailable, complete-unless-
      open files close) but complete (class A) data, and complete-when-user-inactive data after
      --inactive, stays readable for the grace: 10 s by default, as iOS keeps its class A keys;
      --grace 0 withdraws them at once. A process the lock leaves behind withdraws them when the
      grace ends (or the next protfs command run as root, should it be gone).

      With --json: one object with device, operation, state, protectedDataAvailable, visited,
      restricted, restored, hardLinked, unauthenticated, notUTF8 (always empty: an item whose
      name is not UTF-8 is locked like any other), garbageClass (items whose class attribute
      holds no class, locked as complete), openFiles (each with pid, command and path) and, during
      a grace, classKeysUntil; warnings and notes still go to stderr.
      """,
    options: [grace, inactive, CommonOptions.json],
    run: run
  )

  /// `--grace SECONDS`.
  package static let grace = Option.value(
    "grace", "seconds",
    help: "How long class A (complete) data stays readable after the lock (default 10, as iOS keeps its keys).")
  /// `--inactive`.
  package static let inactive = Option.flag(
    "inactive", help: "Also end the user-inactivity period: complete-when-user-inactive behaves like complete.")

  /// iOS drops the class A keys about 10 s after the lock.
  package static let defaultGrace: TimeInterval = 10

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    var grace = defaultGrace
    if let text = invocation.value(Self.grace) {
      guard let value = TimeInterval(text), value.isFinite else {
        throw invocation.usageError("The grace period '\(text)' is not a number of seconds.")
      }
      guard (0...LockController.maximumGrace).contains(value) else {
        throw invocation.usageError(
          "The grace period '\(text)' is out of range: give 0 to \(Int(LockController.maximumGrace)) seconds (iOS keeps class A keys about 10 s)."
        )
      }
      grace = value
    }
    let report = try controller.lock(grace: grace, inactive: invocation.flag(Self.inactive))
    let json = invocation.flag(CommonOptions.json)
    if !json { Console.out(TransitionText.summary(report, device: controller.device)) }
    TransitionText.warnings(report)
    let openFiles = try controller.openFilesStillReachable()
    for file in openFiles {
      Console.err(
        "warning: '\(file.path)' is still open in process \(file.pid) (\(file.command)); its data stays reachable through that descriptor until it is closed."
      )
    }
    if report.to.classKeysHeld {
      // Someone must withdraw the keys when the grace ends: a process of its own waits for it (and
      // any later protfs command run as root does it, should that process be gone).
      try controller.startGraceEnder()
      let seconds = grace == grace.rounded() ? String(Int(grace)) : String(grace)
      Console.err(
        "note: complete (class A) data stays readable for \(seconds) s, as iOS keeps its keys after a lock; `--grace 0` withdraws them at once."
      )
    }
    if json {
      var result = TransitionJSON(report, device: controller.device, record: try controller.record())
      result.openFiles = openFiles
      try Console.json(result)
    }
    return 0
  }
}
