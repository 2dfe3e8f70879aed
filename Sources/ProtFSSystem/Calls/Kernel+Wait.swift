import Foundation

/// Waiting for a child: the one `waitpid(2)` of protfs, which reaps the child and words how it
/// ended as a shell does.
extension Kernel {
  /// Waits until the child `pid` ends and reaps it; returns its exit status (`exitStatus(_:)`).
  /// The corresponding C function is `waitpid(2)`; `EINTR` is retried.
  package static func waitForChild(_ pid: pid_t) -> Result<Int32, Errno> {
    waitForChildEnd(pid).map(\.status)
  }

  /// How a child ended: its exit code, or the signal that killed it.
  package enum ChildEnd: Equatable, Sendable {
    /// It exited with this code.
    case exited(Int32)
    /// A signal killed it.
    case killed(signal: Int32)

    /// Its end in the wait status `raw`.
    package init(raw: Int32) {
      let signal = raw & 0x7f
      self = signal == 0 ? .exited((raw >> 8) & 0xff) : .killed(signal: signal)
    }

    /// The status a shell gives it: the exit code, or 128 + the signal.
    package var status: Int32 {
      switch self {
      case .exited(let code): code
      case .killed(let signal): 128 + signal
      }
    }

    /// The signal that killed it, nil when it exited.
    package var signal: Int32? {
      if case .killed(let signal) = self { signal } else { nil }
    }
  }

  /// Waits until the child `pid` ends and reaps it; returns how it ended. The corresponding C
  /// function is `waitpid(2)`; `EINTR` is retried.
  package static func waitForChildEnd(_ pid: pid_t) -> Result<ChildEnd, Errno> {
    var raw: Int32 = 0
    return valueOrErrno(.wait) { waitpid(pid, &raw, 0) }.map { _ in ChildEnd(raw: raw) }
  }

  /// Reaps the child `pid` if it has ended, without waiting: its exit status (`exitStatus(_:)`),
  /// or nil while it runs. `waitpid(2)` with `WNOHANG`.
  package static func reapChildIfEnded(_ pid: pid_t) -> Result<Int32?, Errno> {
    var raw: Int32 = 0
    return valueOrErrno(.wait) { waitpid(pid, &raw, WNOHANG) }.map { $0 == 0 ? nil : exitStatus(raw) }
  }

  /// The status a shell gives a child that ended with the wait status `raw`: its exit code, or
  /// 128 + the signal that killed it.
  package static func exitStatus(_ raw: Int32) -> Int32 { ChildEnd(raw: raw).status }
}
