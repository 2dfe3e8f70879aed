import Foundation
import ProtFS

/// What `<device>/.protfs/transition.json` holds while a transition walks the device.
///
/// It is written atomically before the first item changes and removed after the new state is
/// written, so its presence means "a transition may be half done": the next protfs command runs
/// the walk towards `next` again (every per-item step is idempotent) and then commits `next`.
package struct TransitionJournal: Sendable, Codable {
  /// What was being done, for messages (`lock`, `unlock`, `reboot`, …).
  package var operation: String
  /// The record before the transition, the state to roll back to when going forward fails.
  package var previous: LockRecord
  /// The record the transition commits.
  package var next: LockRecord
  /// The process that started it.
  package var pid: Int32
  /// When it started.
  package var started: Date

  /// Creates a value from its parts.
  package init(operation: String, previous: LockRecord, next: LockRecord, pid: Int32, started: Date) {
    self.operation = operation
    self.previous = previous
    self.next = next
    self.pid = pid
    self.started = started
  }
}
