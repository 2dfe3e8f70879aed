import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// `protfs tasks`: the background download tasks kept on the device.
package enum TasksCommand {
  package static let command = Command(
    name: "tasks",
    abstract: "List background download and upload tasks, or suspend, resume or cancel one.",
    discussion: """
      Tasks live in <device>/.protfs/downloads.sqlite and outlive the process that started them.
      States: running, suspended, canceling, completed, failed, waitingForUnlock, and interrupted:
      its process was stopped (Ctrl-C, a kill) before it settled and none transfers it now; `tasks
      resume ID` or the same download again goes on from its temp file. KIND is download
      or upload (for an upload RECEIVED and EXPECTED count bytes sent). The table shows the
      unfinished tasks and those that finished in the last day, with the errors of those that
      failed and when those held back by --earliest-begin begin; one line on stderr counts the
      older finished ones, which --all lists too and `protfs tasks prune` removes. With --json: an
      array of every task, --all or not (each with its "kind"; createdAt, updatedAt and, for a task
      held back, earliestBeginDate are ISO 8601 dates; an interrupted task's resumeCommand is the
      command that goes on with it). Inside an app (below `protfs app launch`,
      as the app user) the session service answers, with the app's own tasks only.
      """,
    options: [session, all, CommonOptions.json],
    subcommands: [
      resume, suspend, cancel, TasksWaitCommand.command, TasksEventsCommand.command, TasksPruneCommand.command,
    ],
    run: list
  )

  package static let resume = Command(
    name: "resume",
    abstract: "Resume a suspended, failed or interrupted task in the foreground until it settles.",
    arguments: [taskID],
    options: [DownloadCommand.progress],
    run: { invocation in try act(invocation, cancel: false) }
  )

  package static let suspend = Command(
    name: "suspend",
    abstract: "Suspend a running task, keeping its temp file; `tasks resume` goes on from there.",
    arguments: [taskID],
    run: suspendTask
  )

  package static let cancel = Command(
    name: "cancel",
    abstract: "Cancel a task; its temp file is removed.",
    arguments: [taskID],
    run: { invocation in try act(invocation, cancel: true) }
  )

  /// `--session IDENTIFIER` of the list.
  package static let session = Option.value("session", "identifier", help: "Only this session's tasks.")
  /// `--all` of the list.
  package static let all = Option.flag(
    "all", help: "Also list the tasks that finished more than a day ago (--json always lists them).")
  /// How long a finished task stays in the table without --all: a day.
  package static let recentlyFinished: TimeInterval = 86_400
  /// `<task-id>` of resume and cancel.
  package static let taskID = Argument(name: "task-id", help: "The task's number, as `protfs tasks` shows it.")

  package static func store(_ device: Device) throws -> DownloadStore? {
    try device.requireInitialized()
    guard FileManager.default.fileExists(atPath: device.downloadStorePath) else { return nil }
    return try DownloadStore(path: device.downloadStorePath)
  }

  package static func list(_ invocation: Invocation) throws -> Int32 {
    var records: [DownloadTaskRecord]
    if AppTransfers.app(invocation) != nil {
      // An app sees its own sessions' tasks, from the service.
      records = try AppTransfers.records(invocation, session: invocation.value(Self.session))
    } else {
      records = try store(invocation.device)?.listedTasks(session: invocation.value(Self.session)) ?? []
    }
    records.sort { $0.id < $1.id }
    if invocation.flag(CommonOptions.json) {
      try Console.json(records.map { ListedTask($0, spelling: invocation.spelling) })
      return 0
    }
    if records.isEmpty {
      Console.err("No download tasks.")
      return 0
    }
    // The old finished tasks are counted, not listed: their errors were read the day they failed.
    let since = Date().timeIntervalSince1970 - recentlyFinished
    let shown =
      invocation.flag(Self.all)
      ? records : records.filter { $0.state.isUnfinished || $0.awaitsDelivery || $0.updatedAt >= since }
    printTable(shown)
    printNotes(shown, spelling: invocation.spelling)
    printHidden(records, shown: shown, spelling: invocation.spelling)
    return 0
  }

  /// The table of the tasks `shown`. For an upload, RECEIVED and EXPECTED are the bytes sent and to send.
  static func printTable(_ shown: [DownloadTaskRecord]) {
    guard !shown.isEmpty else { return }
    var rows = [["ID", "KIND", "SESSION", "STATE", "RECEIVED", "EXPECTED", "URL"]]
    for r in shown {
      rows.append([
        String(r.id), r.kind.rawValue, r.sessionIdentifier, r.state.rawValue, ByteSize.format(r.bytesReceived),
        r.bytesExpected < 0 ? "-" : ByteSize.format(r.bytesExpected), r.url,
      ])
    }
    Console.table(rows, right: [0, 4, 5])
  }

  /// A line on stderr for each of the tasks `shown` that failed, was interrupted or waits for its
  /// earliest begin date.
  static func printNotes(_ shown: [DownloadTaskRecord], spelling: CommandSpelling) {
    for r in shown where r.state == .failed {
      if let message = r.commandLineErrorText(spelling) { Console.err("task \(r.id): \(message)") }
    }
    for r in shown where r.state == .interrupted {
      Console.err("task \(r.id): \(interruptedText(r, spelling: spelling))")
    }
    // A task with nothing received yet (running, or still to be resumed by the service) may be
    // waiting for its earliest begin date.
    let now = Date().timeIntervalSince1970
    let waiting = shown.filter {
      [.running, .suspended].contains($0.state) && $0.bytesReceived == 0 && ($0.earliestBegin ?? 0) > now
    }
    for r in waiting {
      let date = JSONOutput.string(Date(timeIntervalSince1970: r.earliestBegin ?? now))
      Console.err("task \(r.id): begins no sooner than \(date) (its earliestBeginDate).")
    }
  }

  /// How many of `records` finished long ago and are not `shown`, and the commands about them.
  static func printHidden(_ records: [DownloadTaskRecord], shown: [DownloadTaskRecord], spelling: CommandSpelling) {
    let hidden = records.count - shown.count
    guard hidden > 0 else { return }
    let failed = records.filter { $0.state == .failed }.count - shown.filter { $0.state == .failed }.count
    Console.err(
      "\(hidden) task\(hidden == 1 ? "" : "s") finished more than a day ago\(failed > 0 ? " (\(failed) failed)" : "")"
        + " \(hidden == 1 ? "is" : "are") not listed: \(spelling.command("tasks --all")) lists"
        + " \(hidden == 1 ? "it" : "them"), \(spelling.command("tasks prune")) removes those older than"
        + " \(HumanDuration.format(TasksPruneCommand.defaultAge)).")
  }

  /// What `tasks` says of the interrupted task `record`: that no process transfers it, and the
  /// command that goes on with it.
  static func interruptedText(_ record: DownloadTaskRecord, spelling: CommandSpelling) -> String {
    let expected = record.bytesExpected < 0 ? "" : " of \(ByteSize.format(record.bytesExpected))"
    return
      "interrupted at \(ByteSize.format(record.bytesReceived))\(expected): no process transfers it; \(spelling.command(resumeWords(record))) goes on from there."
  }

  /// The words after `protfs` of the command that resumes task `record`.
  static func resumeWords(_ record: DownloadTaskRecord) -> String { "tasks resume \(record.id)" }

  /// The task `<task-id>` names, from the device's store; a usage error or "no such task" otherwise.
  package static func namedTask(_ invocation: Invocation) throws -> (
    id: Int64, store: DownloadStore, record: DownloadTaskRecord
  ) {
    let id = try taskNumber(invocation)
    let device = invocation.device
    guard let store = try store(device), let record = try store.task(id: id) else {
      throw noSuchTask(id, on: device)
    }
    return (id, store, record)
  }

  /// The number `<task-id>` gives, or a usage error.
  static func taskNumber(_ invocation: Invocation) throws -> Int64 {
    let text = invocation.required(Self.taskID)
    guard let id = Int64(text) else {
      throw invocation.usageError(
        "'\(text)' is not a task number; \(invocation.spelling.command("tasks")) lists them.")
    }
    return id
  }

  /// The error for task `id`, which `device`'s task store does not have.
  package static func noSuchTask(_ id: Int64, on device: Device) -> ProtFSError {
    ProtFSError(
      .notFound, "There is no download task \(id) on the device '\(device.root)'.", remedy: .listTasks)
  }

  /// `tasks suspend ID`: the process that runs the task suspends it (asked through the store); a
  /// task whose process is gone is recorded as suspended.
  package static func suspendTask(_ invocation: Invocation) throws -> Int32 {
    if AppTransfers.app(invocation) != nil {
      return try AppTransfers.act(invocation, id: try taskNumber(invocation), .suspend)
    }
    let (id, store, record) = try namedTask(invocation)
    switch record.state {
    case .suspended:
      Console.err("Download task \(id) is already suspended.")
      return 0
    case .running, .interrupted:
      break
    default:
      throw ProtFSError(
        .invalidArgument, "Download task \(id) is \(record.state.rawValue); only a running task can be suspended.")
    }
    if try store.isOwnedByLiveSession(task: id) {
      try store.request(.suspend, task: id)
      // The owner applies requests within its access-check interval; its record is the answer.
      let deadline = Date().addingTimeInterval(10)
      while try store.task(id: id)?.state == .running {
        guard Date() < deadline else {
          throw ProtFSError(
            .io, "The process running download task \(id) did not suspend it within 10 s.",
            remedy: .advice("check that the process still runs, then ask again"))
        }
        Kernel.usleep(20_000)
      }
    } else {
      // No process transfers it any more (the one that did ended): its record says so.
      var suspended = record
      suspended.state = .suspended
      suspended.updatedAt = Date().timeIntervalSince1970
      try store.update([suspended])
    }
    Console.err(
      "Suspended download task \(id) (\(record.url)); \(invocation.spelling.command("tasks resume \(id)")) goes on from there."
    )
    return 0
  }

  package static func act(_ invocation: Invocation, cancel: Bool) throws -> Int32 {
    if AppTransfers.app(invocation) != nil {
      return try AppTransfers.act(invocation, id: try taskNumber(invocation), cancel ? .cancel : .resume)
    }
    let (id, store, record) = try namedTask(invocation)
    let device = invocation.device
    guard let bundle = try store.sessions().first(where: { $0.identifier == record.sessionIdentifier })?.bundleID else {
      throw ProtFSError(.malformed, "The session of download task \(id) is missing from the task store.")
    }
    if cancel && !record.state.isUnfinished {
      throw ProtFSError(
        .invalidArgument, "Download task \(id) is \(record.state.rawValue); only unfinished tasks can be cancelled.")
    }
    if record.state == .completed {
      Console.err("Download task \(id) has already completed.")
      Console.out(record.destinationPath ?? "")
      return 0
    }
    let session = try DownloadSession(configuration: device.reattachConfiguration(for: record, bundleID: bundle))
    defer { session.invalidate() }
    let (task, retried) = try session.continuation(of: record)
    if retried {
      Console.err("Download task \(id) had \(record.state.rawValue); retrying it as task \(task.id).")
    }
    if cancel {
      task.cancel()
      _ = DownloadTask.waitUntilAllSettled([task])
      Console.err("Cancelled download task \(id) (\(record.url)).")
      return 0
    }
    return try resume(task, of: session, id: id, invocation)
  }

  /// Runs `task` (task `id` as the user named it) here until it settles, or moves it into place
  /// when it waits for unlock; prints where it went. Returns the exit status.
  static func resume(_ task: DownloadTask, of session: DownloadSession, id: Int64, _ invocation: Invocation) throws
    -> Int32
  {
    if task.state == .waitingForUnlock {
      _ = session.completeWaitingTasks()
    } else {
      let interruption = try TransferInterruption.catching(session)
      _ = DownloadCommand.runInForeground(
        [task], of: session, progress: invocation.value(DownloadCommand.progress) ?? "auto",
        spelling: invocation.spelling)
      if let signal = interruption.signal { return interruption.report(signal, spelling: invocation.spelling) }
    }
    switch task.state {
    case .completed:
      Console.out(task.location?.path ?? task.record.destinationPath ?? "")
      return DownloadCommand.exitCompleted
    case .waitingForUnlock:
      Console.err(
        "note: the download finished; it waits for \(invocation.spelling.command("unlock")) to move it into place.")
      return DownloadCommand.exitWaitingForUnlock
    default:
      Console.err("Error: \(task.error.map(invocation.describe) ?? "download task \(id) is \(task.state.rawValue).")")
      return DownloadCommand.exitFailed
    }
  }
}

/// A task as `tasks --json` shows it: the record's fields (`DownloadTaskRecord`'s JSON form, whose
/// keys it keeps), `kind` (download or upload), the timestamps as dates, and for an interrupted
/// task `resumeCommand`, the command that goes on with it.
///
/// The task store keeps `createdAt` and `updatedAt` as seconds since 1970, and so does the record
/// the session service sends; only the printed form turns them into dates, as every JSON output of
/// the command line writes them (`JSONOutput`).
package struct ListedTask: Encodable {
  /// The task.
  package let record: DownloadTaskRecord
  /// How commands are spelled for it (its resume command).
  package let spelling: CommandSpelling

  /// A listed `record`, its commands spelled by `spelling`.
  package init(_ record: DownloadTaskRecord, spelling: CommandSpelling = CommandSpelling()) {
    self.record = record
    self.spelling = spelling
  }

  private enum Key: String, CodingKey {
    case id, kind, sessionIdentifier, url, destinationDirectory, fileName, temporaryDirectory, temporaryFileName, state
    case bytesReceived, bytesExpected, entityTag, lastModified, expectedSHA256, errorMessage, errorNumber
    case taskDescription, createdAt, updatedAt, requestTimeout, resourceTimeout, upload, delivery, requestMethod
    case earliestBeginDate, resumeCommand
  }

  /// The record's fields (those without a value left out, as the record's own form leaves them).
  package func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: Key.self)
    let r = record
    try c.encode(r.id, forKey: .id)
    try c.encode(r.kind, forKey: .kind)
    try c.encode(r.sessionIdentifier, forKey: .sessionIdentifier)
    try c.encode(r.url, forKey: .url)
    try c.encode(r.destinationDirectory, forKey: .destinationDirectory)
    try c.encodeIfPresent(r.fileName, forKey: .fileName)
    try c.encode(r.temporaryDirectory, forKey: .temporaryDirectory)
    try c.encodeIfPresent(r.temporaryFileName, forKey: .temporaryFileName)
    try c.encode(r.state, forKey: .state)
    try c.encode(r.bytesReceived, forKey: .bytesReceived)
    try c.encode(r.bytesExpected, forKey: .bytesExpected)
    try c.encodeIfPresent(r.entityTag, forKey: .entityTag)
    try c.encodeIfPresent(r.lastModified, forKey: .lastModified)
    try c.encodeIfPresent(r.expectedSHA256, forKey: .expectedSHA256)
    try c.encodeIfPresent(r.errorMessage, forKey: .errorMessage)
    try c.encodeIfPresent(r.errorNumber, forKey: .errorNumber)
    try c.encodeIfPresent(r.taskDescription, forKey: .taskDescription)
    try c.encode(JSONOutput.date(secondsSince1970: r.createdAt), forKey: .createdAt)
    try c.encode(JSONOutput.date(secondsSince1970: r.updatedAt), forKey: .updatedAt)
    try c.encodeIfPresent(r.requestTimeout, forKey: .requestTimeout)
    try c.encodeIfPresent(r.resourceTimeout, forKey: .resourceTimeout)
    try c.encodeIfPresent(r.upload, forKey: .upload)
    try c.encodeIfPresent(r.delivery, forKey: .delivery)
    try c.encodeIfPresent(r.requestMethod, forKey: .requestMethod)
    try c.encodeIfPresent(r.earliestBegin.map { JSONOutput.date(secondsSince1970: $0) }, forKey: .earliestBeginDate)
    if r.state == .interrupted {
      // The shell command itself, without the backquotes a message puts around it.
      let command = spelling.command(TasksCommand.resumeWords(r))
      try c.encode(String(command.dropFirst().dropLast()), forKey: .resumeCommand)
    }
  }
}
