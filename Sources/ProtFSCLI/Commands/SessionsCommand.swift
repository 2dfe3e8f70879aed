import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSLaunch
import ProtFSLock
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// `protfs sessions`: the background sessions of the device and its session service.
package enum SessionsCommand {
  package static let command = Command(
    name: "sessions",
    abstract: "List background sessions and the session service, or start or stop the service.",
    discussion: """
      The session service is one protfs process per device that runs the transfers of background
      sessions (docs/semantics.md §9): `download --detach` and apps' background URLSessions hand
      it their tasks, which go on while the app is suspended or gone. It starts on demand, resumes
      its tasks from the task store after a crash, and exits after a quiet period. The list shows
      each session's app, its tasks by state, completions waiting for the app, and the last failure
      to relaunch the app; a session whose stored configuration is damaged is listed as
      "unreadable", with the reason, and the service skips it until its app opens it again.
      """,
    options: [CommonOptions.json],
    subcommands: [start, stop],
    run: list
  )

  package static let start = Command(
    name: "start",
    abstract: "Start the device's session service (detached, unless --foreground).",
    options: [foreground, idleExit],
    run: runStart
  )

  package static let stop = Command(
    name: "stop",
    abstract: "Stop the device's session service; its unfinished tasks resume at its next start.",
    run: runStop
  )

  /// `--foreground`.
  package static let foreground = Option.flag("foreground", help: "Run the service in this process until it stops.")
  /// `--idle-exit DURATION`.
  package static let idleExit = Option.value(
    "idle-exit", "duration", help: "Exit after this long with no unfinished task and no client (default: 30s).")

  /// How the service reaches apps: `AppSessionLauncher` (the seam tests and other hosts replace).
  package static let launcherFactory = Mutex<@Sendable (Device) -> (any SessionAppLauncher)?>({
    AppSessionLauncher(device: $0)
  })

  static func runStart(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    var idle = 30.0
    if let text = invocation.value(idleExit) {
      do {
        idle = try HumanDuration.parse(text, in: 0.01...86400)
      } catch {
        throw invocation.usageError("--idle-exit: \(invocation.describe(error))")
      }
    }
    guard invocation.flag(foreground) else {
      let pid = try SessionServiceStarter.ensureRunning(device, idleExit: invocation.value(idleExit))
      Console.out("The session service runs (pid \(pid)).")
      return 0
    }
    let launcher = launcherFactory.withLock { $0 }(device)
    let service = try SessionService(device: device, launcher: launcher, idleExit: idle)
    // An unlock moves the finished downloads that waited for it into place.
    let events = try? device.protectedDataEvents()
    let watcher = Task.detached {
      guard let events else { return }
      for await event in events where event.event == .protectedDataDidBecomeAvailable {
        service.completeWaitingTasks()
      }
    }
    defer { watcher.cancel() }
    try service.run()
    return 0
  }

  static func runStop(_ invocation: Invocation) throws -> Int32 {
    let name = SessionServiceClient.socketName(device: invocation.device)
    guard let pid = SessionServiceClient.ping(socketName: name) else {
      Console.err("The session service does not run.")
      return 0
    }
    try SessionServiceClient.stop(socketName: name)
    // The reply comes before the process ends: wait for it to go (the socket closes with it).
    let deadline = Date().addingTimeInterval(10)
    while ProcessIdentity.isRunning(pid), Date() < deadline { Kernel.usleep(10_000) }
    Console.out("Stopped the session service (pid \(pid)).")
    return 0
  }

  /// One session as `sessions --json` shows it.
  struct SessionReport: Encodable {
    var identifier: String
    var bundleID: String
    var service: Bool
    var tasks: [String: Int]
    var pendingDeliveries: [Int64]
    var lastRelaunchError: String?
    /// Why the service cannot reopen the session (its stored configuration is damaged), if so.
    var configurationError: String?
  }

  /// The whole listing.
  struct Report: Encodable {
    var serviceRunning: Bool
    var servicePID: Int32?
    var sessions: [SessionReport]
  }

  static func list(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    let pid = SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: device))
    let reports = try TasksCommand.store(device).map(sessionReports) ?? []
    if invocation.flag(CommonOptions.json) {
      try Console.json(Report(serviceRunning: pid != nil, servicePID: pid, sessions: reports))
      return 0
    }
    Console.out(pid.map { "Session service: running (pid \($0))" } ?? "Session service: not running")
    if reports.isEmpty {
      Console.err("No background sessions.")
      return 0
    }
    printTable(reports)
    return 0
  }

  /// Every session of `store`: whose app it is, whether the service runs it, its tasks by state,
  /// its deliveries waiting, and what went wrong when it was last relaunched or reopened.
  static func sessionReports(_ store: DownloadStore) throws -> [SessionReport] {
    var reports: [SessionReport] = []
    let stored = try store.serviceSessions()
    let service = Set(stored.map(\.identifier))
    let all = try store.listedTasks()
    for (identifier, bundle) in try store.sessions() {
      let mine = all.filter { $0.sessionIdentifier == identifier }
      var counts: [String: Int] = [:]
      for task in mine { counts[task.state.rawValue, default: 0] += 1 }
      reports.append(
        SessionReport(
          identifier: identifier, bundleID: bundle, service: service.contains(identifier), tasks: counts,
          pendingDeliveries: mine.filter(\.awaitsDelivery).map(\.id),
          lastRelaunchError: try store.relaunchError(session: identifier),
          configurationError: stored.first { $0.identifier == identifier }.flatMap {
            SessionService.storedConfigurationProblem($0.configuration, session: identifier)
          }))
    }
    return reports
  }

  /// The table of `reports`, then a warning for each session whose configuration cannot be read.
  static func printTable(_ reports: [SessionReport]) {
    var rows = [["SESSION", "APP", "SERVICE", "TASKS", "PENDING", "LAST RELAUNCH ERROR"]]
    for r in reports {
      let tasks = r.tasks.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
      rows.append([
        r.identifier, r.bundleID, r.configurationError != nil ? "unreadable" : r.service ? "yes" : "no",
        tasks.isEmpty ? "-" : tasks,
        String(r.pendingDeliveries.count), r.lastRelaunchError ?? "-",
      ])
    }
    Console.table(rows)
    for r in reports {
      if let problem = r.configurationError {
        Console.err("warning: \(problem)")
      }
    }
  }
}
