import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSSessions
import ProtFSSystem

/// `protfs app background|foreground|fetch|terminate BUNDLE-ID`: drive a running app from any shell.
package enum AppControlCommands {
  package static let background = control(
    "background", "Send the app to the background (it is suspended when its time is up).", .background)
  package static let foreground = control(
    "foreground", "Bring the app to the foreground (resuming it when suspended).", .foreground)
  package static let fetch = Command(
    name: "fetch",
    abstract: "Wake the app for a background fetch, or launch it in the background for one.",
    discussion: """
      A running app (suspended or not) is sent performFetch and must call fetch-completed in time.
      An app that is not running is launched in the background with the command it was last
      launched with, detached from this shell (its output goes to /dev/null), and sent
      didEnterBackground, then performFetch; not an app the user force-quit.
      """,
    arguments: [AppCommand.bundleArgument],
    run: runFetch)
  package static let terminate = Command(
    name: "terminate",
    abstract: "Terminate the app: willTerminate, then a kill if it has not exited after a short grace.",
    discussion: """
      A suspended app is killed without notice. Returns once every process of the app (those it
      started in sessions of their own too) and its supervisor are gone, so that the next launch
      finds it free, as simctl's terminate does; --no-wait returns once the app has been asked.
      With --user, the termination is a force-quit from the app switcher, which the app's record
      keeps until its next launch: the session service stops its transfers (resumable) and does
      not launch it for its sessions' events. Of an app whose supervisor was killed with SIGKILL,
      the processes it left running are ended (as `app status` does).
      """,
    arguments: [AppCommand.bundleArgument],
    options: [user, noWait],
    run: runTerminate
  )

  package static let push = Command(
    name: "push",
    abstract: "Send the app a remote notification, as `xcrun simctl push` does (PAYLOAD: a file, or - for stdin).",
    discussion: """
      PAYLOAD is an APNs payload of at most 4096 bytes: a JSON object with an "aps" dictionary.
      A silent push ("content-available": 1) wakes a suspended or backgrounded app with 30 s of
      background time, or launches an app that is not running in the background with the command
      it was last launched with (not one the user force-quit), and delivers
      didReceiveRemoteNotification with the payload as userInfo; the app must call push-completed
      in time. A push without content-available reaches only an active app; otherwise iOS shows
      it and does not wake the app, and so does this, saying so.
      """,
    arguments: [AppCommand.bundleArgument, payload],
    run: runPush)

  /// `<payload>`.
  static let payload = Argument(name: "payload", help: "The payload's JSON file, or - for standard input.")

  /// `--user`.
  package static let user = Option.flag("user", help: "A force-quit by the user (remembered until the next launch).")

  /// `--no-wait`.
  package static let noWait = Option.flag(
    "no-wait", help: "Return once the app has been asked to terminate, without waiting until it is gone.")

  /// How long `terminate` waits for the app and its supervisor to be gone: the grace the app has
  /// after willTerminate, the kill of what it left (at most 5 s), and the supervisor's own end (its
  /// mount's unmount). A supervisor still there is killed, and the app's processes ended.
  static let terminateWait: Double = 20

  /// The payload named by the invocation, checked.
  static func readPayload(_ invocation: Invocation) throws -> RemoteNotification {
    let path = invocation.required(payload)
    let data: Data
    if path == "-" {
      data = FileHandle.standardInput.readData(ofLength: RemoteNotification.sizeLimit + 1)
    } else {
      // At most one byte past the limit, which the payload's check then refuses by its size: a
      // huge file is not read whole.
      switch Kernel.readNamedFile(path, limit: RemoteNotification.sizeLimit + 1) {
      case .success(let bytes): data = Data(bytes)
      case .failure(.tooLarge):
        throw ExitStatus(
          code: 1,
          message:
            "'\(path)' holds more than \(RemoteNotification.sizeLimit) bytes; APNs delivers at most \(RemoteNotification.sizeLimit) bytes a notification."
        )
      case .failure(let failure):
        throw ExitStatus(code: 1, message: "Cannot read the payload '\(path)': \(failure.reason).")
      }
    }
    do {
      return try RemoteNotification(payload: data, source: path == "-" ? "The payload on standard input" : "'\(path)'")
    } catch {
      throw ExitStatus(code: 1, message: invocation.describe(error))
    }
  }

  static func runPush(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let notification = try readPayload(invocation)
    let device = invocation.device
    do {
      let reply = try AppCommand.send(AppRequest(.push, notification.json), to: bundleID, device: device)
      if reply.value == "throttled" {
        Console.out(
          "The app \(bundleID) had its share of background pushes this hour (--push-limit): the notification is held and delivered when the budget allows (a newer one replaces it)."
        )
      }
      if reply.value == "shown" {
        Console.out(
          "The app \(bundleID) is not active: the notification is shown, and without \"content-available\": 1 the app is not woken."
        )
      }
      return 0
    } catch let status as ExitStatus where status.message == AppCommand.notRunning(bundleID) {
      guard notification.isContentAvailable else {
        Console.out(
          "The app \(bundleID) is not running: the notification is shown, and without \"content-available\": 1 the app is not launched."
        )
        return 0
      }
      // The payload is the sender's, and may hold secrets: it goes to the launch in a file only
      // root reads, named on its command line, never on the command line itself (every user
      // reads /proc/PID/cmdline for as long as the launch runs).
      let held = try PushPayloadFile.hold(notification.json, on: device)
      do {
        try launchInBackground(
          bundleID, device: device, options: ["--for-push", held], refusal: "a push does not launch it",
          purpose: "the notification")
      } catch {
        PushPayloadFile.discard(held, on: device)
        throw error
      }
      return 0
    }
  }

  /// Launches `bundleID`, which is not running, in the background as the system does (with the
  /// command and background budget of its last launch, and the launch `options` saying what for),
  /// detached from this shell; refused for an app never launched, or force-quit by the user
  /// (`refusal` says what that prevents). `purpose` ends the line that reports it.
  static func launchInBackground(
    _ bundleID: BundleID, device: Device, options: [String], refusal: String, purpose: String
  ) throws {
    guard let record = try AppStore(device: device).record(bundleID), !record.lastLaunchCommand.isEmpty else {
      throw ExitStatus(code: 1, message: "The app \(bundleID) is not running and was never launched.")
    }
    guard !record.forceQuit else {
      throw ExitStatus(code: 1, message: "The app \(bundleID) is not running: the user force-quit it, so \(refusal).")
    }
    let pid = try DetachedLaunch.start(
      ["--device", device.root, "app", "launch", bundleID.rawValue] + options
        + ["--background-time", "\(Int((record.backgroundTime * 1000).rounded()))ms", "--"]
        + record.lastLaunchCommand)
    Console.out("Launched \(bundleID) in the background for \(purpose) (supervisor pid \(pid)).")
  }

  static func runFetch(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    do {
      _ = try AppCommand.send(AppRequest(.fetch), to: bundleID, device: device)
      return 0
    } catch let status as ExitStatus where status.message == AppCommand.notRunning(bundleID) {
      try launchInBackground(
        bundleID, device: device, options: ["--for-fetch"], refusal: "it is not launched for a fetch",
        purpose: "a fetch")
      return 0
    }
  }

  static func runTerminate(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    let request = AppRequest(.terminate, invocation.flag(user) ? "user" : nil)
    // A supervisor killed with SIGKILL left no one to ask: what it left running is ended here.
    let ended = try AppStore(device: device).endAbandoned(bundleID)
    if ended > 0 {
      Console.out(
        "Ended \(ended) process\(ended == 1 ? "" : "es") of \(bundleID) that its killed supervisor left running.")
      return 0
    }
    // A prewarmed app was never launched: it is discarded, as iOS discards one, without events.
    if let record = try AppStore(device: device).record(bundleID), record.isSupervised, record.state == .prewarmed {
      try PrewarmedLaunch.discard(bundleID, device: device)
      Console.out("Ended the prewarmed app \(bundleID).")
      return 0
    }
    let supervisor = try AppStore(device: device).record(bundleID)?.supervisor
    _ = try AppCommand.send(request, to: bundleID, device: device)
    if invocation.flag(user) {
      // The session service stops the app's transfers (resumable) and relaunches it no more.
      do throws(ProtFSError) {
        try SessionServiceClient.forceQuit(
          bundleID: bundleID.rawValue, socketName: SessionServiceClient.socketName(device: device))
      } catch  where error.code != .notFound {
        Console.err("warning: the session service was not told of the force-quit: \(invocation.describe(error))")
      } catch {}
    }
    guard !invocation.flag(noWait), let supervisor else { return 0 }
    try waitUntilGone(bundleID, supervisor: supervisor, device: device)
    Console.out("Terminated \(bundleID): its processes have ended.")
    return 0
  }

  /// Waits until the app's supervisor is gone: it ends last, once the app's first process has
  /// ended and it has killed the rest of the app (its cgroup). One that outlives `terminateWait`
  /// is killed, and the app's processes with it, as a killed supervisor's are (`endAbandoned`).
  static func waitUntilGone(_ bundleID: BundleID, supervisor: ProcessIdentity, device: Device) throws {
    let killed = try AppCommand.awaitSupervisorEnd(
      supervisor, of: bundleID, device: device, seconds: terminateWait
    ) { waited in
      "The app \(bundleID) was asked to terminate, but its supervisor (process \(supervisor.pid)) did not end within \(waited) s, even killed; end it with kill -9 \(supervisor.pid)."
    }
    guard let ended = killed else { return }
    Console.err(
      "warning: the supervisor of \(bundleID) did not end within \(Int(terminateWait)) s: it was killed, and \(ended) process\(ended == 1 ? "" : "es") of the app it left with it."
    )
  }

  /// Sends the request `kind` (a subcommand's name) to the app named by the invocation.
  static func runControl(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    guard let kind = AppRequest.Kind(rawValue: invocation.commandPath.last ?? "") else { return 70 }
    _ = try AppCommand.send(AppRequest(kind), to: bundleID, device: invocation.device)
    return 0
  }

  private static func control(_ name: String, _ abstract: String, _ kind: AppRequest.Kind) -> Command {
    Command(name: name, abstract: abstract, arguments: [AppCommand.bundleArgument], run: runControl)
  }
}

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

/// A push's payload on its way from `app push` to the background launch it starts: a file in the
/// device's `.protfs/` (root's alone, 0700) made 0600, named `@push-UUID.json` on the launch's
/// command line, and removed by the launch that reads it.
enum PushPayloadFile {
  /// Writes `payload` to a new file of the device's state directory; returns the launch's value.
  static func hold(_ payload: String, on device: Device) throws -> String {
    let name = "push-\(UUID().uuidString).json"
    try AtomicFile.write(
      Array(payload.utf8), named: name, in: try stateDirectory(device), options: AtomicFile.Options())
    return "@" + name
  }

  /// Removes the file `hold` wrote, for a launch that did not start.
  static func discard(_ value: String, on device: Device) {
    guard let name = fileName(value), let state = try? stateDirectory(device) else { return }
    _ = Kernel.unlinkat(state.fd, name, 0)
  }

  /// The payload `value` gives: a file `hold` wrote (read once, at most 64 KiB, then removed), or
  /// the payload itself.
  static func take(_ value: String, on device: Device) throws -> String {
    guard value.hasPrefix("@push-"), value.hasSuffix(".json") else { return value }
    guard let name = fileName(value) else {
      throw ProtFSError(.invalidArgument, "'\(value)' names no push payload protfs held.")
    }
    let state = try stateDirectory(device)
    let bytes = try AtomicFile.read(named: name, in: state, limit: 64 * 1024, stateFile: true)
    _ = Kernel.unlinkat(state.fd, name, 0)
    return String(decoding: bytes, as: UTF8.self)
  }

  /// The file `value` names (`@push-UUID.json`, with a UUID as `hold` writes it), nil for another.
  private static func fileName(_ value: String) -> String? {
    guard value.hasPrefix("@push-"), value.hasSuffix(".json"),
      UUID(uuidString: String(value.dropFirst("@push-".count).dropLast(".json".count))) != nil
    else { return nil }
    return String(value.dropFirst())
  }

  private static func stateDirectory(_ device: Device) throws(ProtFSError) -> DirectoryHandle {
    try device.openRoot().openDirectory(Device.stateDirectoryName)
  }
}
