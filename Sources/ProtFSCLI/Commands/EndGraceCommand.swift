import ProtFSLock

/// `protfs __end-grace`: the hidden process a graceful `lock` leaves behind (the lock library's
/// `startGraceEnder()`), which withdraws the class A keys when the lock's grace ends
/// (docs/semantics.md §3). Should it be killed, the next protfs command run as root does it.
package enum EndGraceCommand {
  package static let command = Command(
    name: LockController.graceEnderCommand,
    abstract: "Wait for the lock's grace to end, then withdraw the class A keys (used by lock).",
    isHidden: true,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    try invocation.lockController.waitForGraceEnd()
    return 0
  }
}
