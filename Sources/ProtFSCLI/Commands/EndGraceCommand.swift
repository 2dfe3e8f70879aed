import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem

/// `protfs __end-grace`: the hidden process a graceful `lock` leaves behind, which withdraws the
/// class A keys when the lock's grace ends (docs/semantics.md §3). Should it be killed, the next
/// protfs command run as root does it.
package enum EndGraceCommand {
  package static let command = Command(
    name: "__end-grace",
    abstract: "Wait for the lock's grace to end, then withdraw the class A keys (used by lock).",
    isHidden: true,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let controller = invocation.lockController
    // Read again after each wait: an unlock may have ended the grace, or a new lock begun another.
    while true {
      let record = try controller.record()
      guard record.state == .locked, let until = record.classKeysUntil else { return 0 }
      let wait = until.timeIntervalSinceNow
      if wait > 0 {
        Thread.sleep(forTimeInterval: wait)
        continue
      }
      _ = try controller.endGraceIfDue()
    }
  }

  /// Starts the process for `device`, detached, and returns at once.
  static func start(device: Device) throws {
    _ = try DetachedLaunch.start(
      ["--device", device.root, command.name], purpose: "start the process that ends the lock's grace with")
  }
}
