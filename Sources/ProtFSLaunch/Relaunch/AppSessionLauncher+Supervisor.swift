import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// Supervisors started detached (`protfs --device D app launch …`, a session of its own), and the
/// wait until the app's record names one: the session service's launches, and `app launch` or
/// `app prewarm` returning once the app runs or is held, its output in the app's log.
extension AppSessionLauncher {
  /// What a supervisor is started for, with its output in the app's log.
  package enum SupervisorStart: Sendable {
    /// A launch that returns once the app runs (`app launch` without `--wait`).
    case launch
    /// A prewarm that returns once the app is held.
    case prewarm

    /// What the error of a launch that cannot start says it could not do.
    var purpose: String {
      switch self {
      case .launch: "launch the app with"
      case .prewarm: "prewarm the app with"
      }
    }

    /// What a launch that ended first did not get to, up to its exit status.
    var endedBefore: String {
      switch self {
      case .launch: "it ran (its launch"
      case .prewarm: "it was held (its prewarm"
      }
    }
  }

  /// How the wait for a supervisor ended.
  enum SupervisorWait: Equatable {
    /// The app's record names the supervisor and was accepted.
    case ready(AppRecord)
    /// The launch ended first, with this status.
    case ended(status: Int32)
    /// Neither, in the time given.
    case timedOut
  }

  /// The log of app `app` launched detached: `.protfs/logs/BUNDLE-ID.log` in the device, made anew
  /// at every such launch.
  package func logPath(_ app: BundleID) -> String {
    device.stateDirectory + "/logs/\(app).log"
  }

  /// Starts `protfs --device DEVICE ARGUMENTS` (an `app launch` of `app`, for `start`) detached,
  /// its output in the app's log, and waits until the app's record names it (by its start time
  /// too: a record left by an earlier one whose pid was reused is not taken for it), names the
  /// app's process, and `ready` accepts it: returns that process's pid. Nil when `timeout` seconds
  /// passed first; throws when the launch ended first, with its own error (the log's last line).
  package func startSupervisor(
    _ app: BundleID, _ arguments: [String], for start: SupervisorStart, within timeout: Double,
    ready: (AppRecord) -> Bool
  ) throws(ProtFSError) -> pid_t? {
    let state = try DirectoryHandle(path: device.stateDirectory)
    try state.makeDirectory("logs", permissions: FilePermissions(rawValue: 0o700))
    let logs = try state.openDirectory("logs")
    let log = try logs.openFile(
      "\(app).log", flags: O_RDWR | O_CREAT | O_TRUNC, permissions: FilePermissions(rawValue: 0o600))
    defer { closeDescriptor(log) }
    let supervisor = try DetachedLaunch.start(
      program: program, ["--device", device.root] + arguments, purpose: start.purpose, output: log)
    switch waitForSupervisor(supervisor, app: app, within: timeout, ready: { $0.pid != nil && ready($0) }) {
    case .ready(let record): return record.pid
    case .timedOut: return nil
    case .ended(let code):
      // The launch's own error, when it wrote one, says best what went wrong.
      let said =
        Self.lastLine(of: log).map { line in
          ": " + (line.hasPrefix("Error: ") ? String(line.dropFirst(7)) : line)
        } ?? "."
      throw ProtFSError(
        .io,
        "The app \(app) ended before \(start.endedBefore) exited with status \(code))\(said) Its output is in \(logPath(app))."
      )
    }
  }

  /// Waits until the launched supervisor `pid` is the one app `app`'s record names (by its start
  /// time) and `ready` accepts the record, or until it ends, at most `timeout` seconds. The launch
  /// is this process's child: it is reaped whatever happens.
  func waitForSupervisor(_ pid: pid_t, app: BundleID, within timeout: Double, ready: (AppRecord) -> Bool)
    -> SupervisorWait
  {
    let deadline = DispatchTime.now() + timeout
    let store = AppStore(device: device)
    let identity = ProcessIdentity(pid: pid)
    var delay: useconds_t = 1_000
    while true {
      if case .success(let code?) = Kernel.reapChildIfEnded(pid) { return .ended(status: code) }
      if let record = try? store.record(app), let identity, record.supervisor == identity, ready(record) {
        Self.reap(pid)
        return .ready(record)
      }
      guard DispatchTime.now() < deadline else {
        Self.reap(pid)
        return .timedOut
      }
      Kernel.usleep(delay)
      delay = min(delay * 2, 20_000)
    }
  }

  /// Reaps the launch `pid` whenever it ends, on a thread of its own.
  private static func reap(_ pid: pid_t) {
    Thread { _ = Kernel.waitForChild(pid) }.start()
  }

  /// The last line written to `log` (read from its last 4 KiB), if any.
  private static func lastLine(of log: Int32) -> String? {
    guard let size = try? Kernel.lseek(log, 0, SEEK_END).get(), size > 0 else { return nil }
    var bytes = [UInt8](repeating: 0, count: Int(min(size, 4096)))
    let count = bytes.withUnsafeMutableBytes { raw in
      (try? Kernel.pread(log, raw.baseAddress, raw.count, off_t(size) - off_t(raw.count)).get()) ?? 0
    }
    return String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").last.map(String.init)
  }
}
