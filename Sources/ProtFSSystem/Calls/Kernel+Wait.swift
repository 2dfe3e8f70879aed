import Foundation

/// Waiting for a child: the one `waitpid(2)` of protfs, which reaps the child and words how it
/// ended as a shell does.
extension Kernel {
  /// Waits until the child `pid` ends and reaps it; returns its exit status (`exitStatus(_:)`).
  /// The corresponding C function is `waitpid(2)`; `EINTR` is retried.
  package static func waitForChild(_ pid: pid_t) -> Result<Int32, Errno> {
    var raw: Int32 = 0
    return valueOrErrno(.wait) { waitpid(pid, &raw, 0) }.map { _ in exitStatus(raw) }
  }

  /// Reaps the child `pid` if it has ended, without waiting: its exit status (`exitStatus(_:)`),
  /// or nil while it runs. `waitpid(2)` with `WNOHANG`.
  package static func reapChildIfEnded(_ pid: pid_t) -> Result<Int32?, Errno> {
    var raw: Int32 = 0
    return valueOrErrno(.wait) { waitpid(pid, &raw, WNOHANG) }.map { $0 == 0 ? nil : exitStatus(raw) }
  }

  /// The status a shell gives a child that ended with the wait status `raw`: its exit code, or
  /// 128 + the signal that killed it.
  package static func exitStatus(_ raw: Int32) -> Int32 {
    let signal = raw & 0x7f
    return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
  }
}
