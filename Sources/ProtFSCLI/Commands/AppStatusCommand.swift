import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// `protfs app status [BUNDLE-ID] [--json]`.
package enum AppStatusCommand {
  package static let command = Command(
    name: "status",
    abstract: "Show the apps' states, background tasks, time remaining and last fetch.",
    discussion: """
      With --json: an array of objects with bundleID, state, pid, supervisorPID, tasks,
      timeRemaining (seconds; null in the foreground and when not running), backgroundTime,
      lastFetch, forceQuit, lastExitStatus, lastCrash (when the system killed the last run, or it
      crashed: killed, terminationReason such as 0x8badf00d, reason and crashReport, its path; else
      null), lastLaunchCommand, taskRequests (the pending BGTaskScheduler requests, as `app
      requests --json` lists them) and lastBackgroundTask (the last BGTask's identifier, type,
      result, duration and time, or null).
      """,
    arguments: [bundleArgument],
    options: [CommonOptions.json],
    run: run
  )

  /// `[<bundle-id>]`.
  package static let bundleArgument = Argument(
    name: "bundle-id", help: "Only this app (default: every app launched).", arity: .optional)

  /// One app, as `--json` prints it.
  struct Entry: Encodable {
    var bundleID: String
    var state: AppRecord.State
    var pid: Int32?
    var supervisorPID: Int32?
    var tasks: [AppRecord.Task]
    var timeRemaining: Double?
    var backgroundTime: Double
    var lastFetch: AppRecord.Fetch?
    var forceQuit: Bool
    var lastExitStatus: Int32?
    var lastCrash: AppRecord.Crash?
    var lastLaunchCommand: [String]
    var taskRequests: [AppBackgroundTaskCommands.Entry]
    var lastBackgroundTask: AppRecord.BackgroundTaskResult?

    // Every key is written, absent values as null.
    func encode(to encoder: Encoder) throws {
      var keys = encoder.container(keyedBy: CodingKeys.self)
      try keys.encode(bundleID, forKey: .bundleID)
      try keys.encode(state, forKey: .state)
      try keys.encode(pid, forKey: .pid)
      try keys.encode(supervisorPID, forKey: .supervisorPID)
      try keys.encode(tasks, forKey: .tasks)
      try keys.encode(timeRemaining, forKey: .timeRemaining)
      try keys.encode(backgroundTime, forKey: .backgroundTime)
      try keys.encode(lastFetch, forKey: .lastFetch)
      try keys.encode(forceQuit, forKey: .forceQuit)
      try keys.encode(lastExitStatus, forKey: .lastExitStatus)
      try keys.encode(lastCrash, forKey: .lastCrash)
      try keys.encode(lastLaunchCommand, forKey: .lastLaunchCommand)
      try keys.encode(taskRequests, forKey: .taskRequests)
      try keys.encode(lastBackgroundTask, forKey: .lastBackgroundTask)
    }

    enum CodingKeys: String, CodingKey {
      case bundleID, state, pid, supervisorPID, tasks, timeRemaining, backgroundTime, lastFetch, forceQuit
      case lastExitStatus, lastCrash, lastLaunchCommand, taskRequests, lastBackgroundTask
    }
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let store = AppStore(device: device)
    let records = try Self.records(invocation, store)
    endAbandoned(records, store)
    let now = Date()
    let entries = records.map(\.settled).map { record -> Entry in
      Entry(
        bundleID: record.bundleID, state: record.state, pid: record.pid, supervisorPID: record.supervisorPID,
        tasks: record.tasks, timeRemaining: record.timeRemaining(now: now), backgroundTime: record.backgroundTime,
        lastFetch: record.lastFetch, forceQuit: record.forceQuit, lastExitStatus: record.lastExitStatus,
        lastCrash: record.lastCrash, lastLaunchCommand: record.lastLaunchCommand,
        taskRequests: record.taskRequests.map(AppBackgroundTaskCommands.Entry.init),
        lastBackgroundTask: record.lastBackgroundTask)
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(entries)
      return 0
    }
    if entries.isEmpty { Console.out("No app has been launched on this device.") }
    for entry in entries { Console.out("\(entry.bundleID): " + describe(entry).joined(separator: "; ")) }
    return 0
  }

  /// The record of the app `<bundle-id>` names (a new one when it was never launched), else every
  /// app's record, with a warning for each that cannot be read.
  static func records(_ invocation: Invocation, _ store: AppStore) throws -> [AppRecord] {
    if let text = invocation.argument(bundleArgument) {
      let bundleID = try invocation.bundleID(text)
      try invocation.device.container(bundleID).requireExists()
      return [try store.record(bundleID) ?? AppRecord(bundleID: bundleID.rawValue, backgroundTime: 30)]
    }
    let read = try store.readRecords()
    // Listed, not fatal: the other apps' records are still worth showing.
    for problem in read.unreadable { Console.err("warning: \(invocation.describe(problem))") }
    return read.records
  }

  /// An app whose supervisor was killed with SIGKILL is shown not running: what it left running
  /// (setsid and double-forked children) is ended, so that nothing of it runs unseen.
  static func endAbandoned(_ records: [AppRecord], _ store: AppStore) {
    for record in records where record.cgroup != nil && !record.isSupervised {
      // Best effort: a reader that may not end them (not root) shows the record as it is, and the
      // next `status` tries again.
      guard let bundleID = try? BundleID(record.bundleID),
        let ended = try? store.endAbandoned(bundleID), ended > 0
      else { continue }
      Console.err(
        "note: ended \(ended) process\(ended == 1 ? "" : "es") of \(bundleID) that its killed supervisor left running.")
    }
  }

  /// The parts of `entry`'s line after its bundle id: its state, pid, tasks, time remaining, last
  /// fetch, task requests, last background task and how it last ended.
  static func describe(_ entry: Entry) -> [String] {
    var parts = [entry.state.rawValue]
    if let pid = entry.pid { parts.append("pid \(pid)") }
    if !entry.tasks.isEmpty {
      // The app's own words, each kept to its line (TerminalText).
      let names = entry.tasks.map { $0.name.isEmpty ? "#\($0.id)" : "#\($0.id) \(TerminalText.escaped($0.name))" }
      parts.append("tasks: " + names.joined(separator: ", "))
    }
    if entry.state != .notRunning {
      parts.append(
        "time remaining: " + (entry.timeRemaining.map { String(format: "%.1f s", $0) } ?? "unlimited (foreground)"))
    }
    if let fetch = entry.lastFetch {
      parts.append("last fetch: \(fetch.result) in \(String(format: "%.3f", fetch.duration)) s")
    }
    if !entry.taskRequests.isEmpty {
      parts.append(
        "task requests: "
          + entry.taskRequests.map { TerminalText.escaped($0.request.identifier) }.joined(separator: ", "))
    }
    if let task = entry.lastBackgroundTask {
      parts.append("last task: \(TerminalText.escaped(task.identifier)) \(task.result)")
    }
    if entry.forceQuit { parts.append("force-quit by the user") }
    if entry.state == .notRunning, let status = entry.lastExitStatus { parts.append("last exit status \(status)") }
    // Why, and the report that says more: 137 alone does not tell the watchdog's kill.
    if entry.state == .notRunning, let crash = entry.lastCrash { parts.append(TerminalText.escaped(crash.summary)) }
    return parts
  }
}
