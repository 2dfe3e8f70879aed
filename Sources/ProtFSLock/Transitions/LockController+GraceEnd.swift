import Foundation
import ProtFS
import ProtFSSystem

/// The process a graceful lock leaves behind: `protfs --device D __end-grace`, detached, which
/// withdraws the class A keys when the lock's grace ends (docs/semantics.md §3). Should it be
/// killed, `endGraceIfDue()` run by any later caller does it.
extension LockController {
  /// The hidden command that runs `waitForGraceEnd()`, which `startGraceEnder()` starts.
  package static let graceEnderCommand = "__end-grace"

  /// Starts this program as the process that ends the grace of the device's lock (the hidden
  /// `graceEnderCommand`), detached, and returns at once.
  package func startGraceEnder() throws(ProtFSError) {
    _ = try DetachedLaunch.start(
      ["--device", device.root, Self.graceEnderCommand],
      purpose: "start the process that ends the lock's grace with")
  }

  /// Waits until the lock's grace ends and withdraws the class A keys then; returns at once when
  /// there is no grace. The record is read again after each wait: an unlock may have ended the
  /// grace, or a new lock begun another.
  package func waitForGraceEnd() throws(ProtFSError) {
    while true {
      let record = try record()
      guard record.state == .locked, let until = record.classKeysUntil else { return }
      let wait = until.timeIntervalSinceNow
      if wait > 0 {
        Thread.sleep(forTimeInterval: wait)
        continue
      }
      _ = try endGraceIfDue()
    }
  }
}
