import CProtFSSys
import Foundation

/// A process as the kernel knows it at one moment: its pid and the time it started (field 22 of
/// `/proc/PID/stat`, clock ticks since boot). Pids are reused (they wrap at 32,768 on many
/// machines); a pid and its start time together never are, so an identity kept in a record names
/// that process and no later one.
public struct ProcessIdentity: Codable, Sendable, Hashable, CustomStringConvertible {
  /// The process id.
  public var pid: pid_t
  /// When it started, in clock ticks since boot.
  public var startTime: UInt64

  /// An identity as recorded.
  public init(pid: pid_t, startTime: UInt64) {
    self.pid = pid
    self.startTime = startTime
  }

  /// The identity of the process that has `pid` now; nil when there is none or it is a zombie (not
  /// alive, as `isRunning(_:)` has it).
  public init?(pid: pid_t) {
    guard pid > 0, let fields = Self.statFields(pid), fields.count > 19, fields[0] != "Z", fields[0] != "X",
      let start = UInt64(fields[19])
    else { return nil }
    self.init(pid: pid, startTime: start)
  }

  /// This process.
  public static var current: ProcessIdentity {
    // Our own /proc entry is always there.
    ProcessIdentity(pid: getpid()) ?? ProcessIdentity(pid: getpid(), startTime: 0)
  }

  /// Whether this process still runs: its pid is taken by a live process (not a zombie) that
  /// started when it did.
  public var isAlive: Bool { ProcessIdentity(pid: pid) == self }

  /// Sends `signal` to this process, and to no later one given its pid: the process is pinned by a
  /// descriptor (`pidfd_open(2)`) and checked to be this one before the signal is sent through it.
  /// False when it is gone (or the signal could not be sent).
  @discardableResult
  public func send(_ signal: Int32) -> Bool {
    let fd = protfs_pidfd_open(pid)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    guard isAlive else { return false }
    return protfs_pidfd_signal(fd, signal) == 0
  }

  /// Waits until this process is gone, at most `seconds`; true when it is (a zombie counts as gone).
  /// The wait is on a descriptor of the process (`Kernel.waitForExit`), which becomes readable
  /// when it exits.
  public func waitUntilGone(seconds: Double) -> Bool {
    Kernel.waitForExit(of: pid, milliseconds: Int32(min(max(seconds, 0) * 1000, Double(Int32.max)))) { isAlive }
  }

  /// The parent of the process that has `pid` now (field 4 of `/proc/PID/stat`).
  public static func parent(of pid: pid_t) -> pid_t? {
    guard let fields = statFields(pid), fields.count > 1 else { return nil }
    return pid_t(fields[1])
  }

  /// When the process that has `pid` now started; nil when it cannot be read.
  public static func startTime(of pid: pid_t) -> UInt64? {
    guard let fields = statFields(pid), fields.count > 19 else { return nil }
    return UInt64(fields[19])
  }

  /// Whether a process has `pid` and is alive: the one alive check of protfs. A zombie (a process
  /// that ended but was not yet reaped by its parent) is not alive: it still answers
  /// `kill(pid, 0)`, yet will never act again. A process of another user whose `/proc` entry is
  /// hidden counts as alive (`kill` answers `EPERM`: it exists). A pid of 0 or less names no
  /// process (`kill` would take it for a process group).
  public static func isRunning(_ pid: pid_t) -> Bool {
    guard pid > 0 else { return false }
    switch valueOrErrno(.kill, { kill(pid, 0) }) {
    case .success, .failure(.notPermitted): break
    case .failure: return false
    }
    guard let state = statFields(pid)?.first else { return true }
    return state != "Z" && state != "X"
  }

  /// Whether the process that has `pid` now is stopped (state `T` of `/proc/PID/stat`: `SIGSTOP`
  /// and the like); false when there is none.
  public static func isStopped(_ pid: pid_t) -> Bool {
    pid > 0 && statFields(pid)?.first == "T"
  }

  /// "PID (started at TICKS)".
  public var description: String { "\(pid) (started at \(startTime))" }

  /// The fields of /proc/PID/stat after "pid (comm)", from the state on (comm may hold spaces and
  /// parentheses, so they follow its last ')').
  private static func statFields(_ pid: pid_t) -> [Substring]? {
    guard let bytes = Kernel.readKernelFile("/proc/\(pid)/stat", limit: 1 << 16) else { return nil }
    let stat = String(decoding: bytes, as: UTF8.self)
    guard let close = stat.lastIndex(of: ")") else { return nil }
    return stat[stat.index(after: close)...].split(separator: " ")
  }
}
