import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem

/// `download`, `upload` and `tasks` run by a shell app: a program below `protfs app launch`,
/// running as the app user, which may not read the device's task store. Everything goes through
/// the session service, which believes nothing the app says: it finds the app from the caller's
/// process, and serves only the app's own sessions (docs/semantics.md §9, §10).
enum AppTransfers {
  /// The bundle id of the app this process runs as, when it is not root and runs below
  /// `protfs app launch` (which names the app and the session service in its environment).
  static func app(_ invocation: Invocation) -> String? {
    guard Kernel.geteuid() != 0, let bundle = invocation.environment[AppEnvironment.bundle],
      invocation.environment[AppEnvironment.sessionsSocket] != nil
    else { return nil }
    return bundle
  }

  /// The session service's socket inside the app.
  private static func socketName(_ invocation: Invocation) -> String {
    invocation.environment[AppEnvironment.sessionsSocket] ?? SessionServiceClient.socketName(device: invocation.device)
  }

  /// The error for an option an app's transfer cannot take, saying why.
  private static func refuse(_ invocation: Invocation, _ option: Option, _ why: String) -> UsageError {
    invocation.usageError("--\(option.long) cannot be used inside an app: \(why).")
  }

  /// Checks `--bundle`, which an app may give only as its own bundle id.
  private static func checkBundle(_ invocation: Invocation, _ option: Option, app: String) throws {
    if let text = invocation.value(option), text != app {
      throw ProtFSError(
        .permissionDenied, "This process runs as the app \(app); it cannot start transfers for '\(text)'.",
        errno: EPERM, remedy: .advice("drop --bundle, or give --bundle \(app)"))
    }
  }

  /// The session `configuration` opened in the service, with the command's timeouts.
  private static func openSession(_ invocation: Invocation, app: String) throws -> SessionServiceClient {
    var configuration = SessionConfiguration(
      identifier: try DownloadCommand.sessionIdentifier(invocation, bundleID: app), bundleID: app)
    configuration.socketName = socketName(invocation)
    if let timeout = try DownloadCommand.timeout(invocation, DownloadCommand.requestTimeout, within: 1...86400) {
      configuration.requestTimeout = Monotonic.seconds(timeout)
    }
    if let timeout = try DownloadCommand.timeout(
      invocation, DownloadCommand.resourceTimeout, within: 1...(365 * 86400))
    {
      configuration.resourceTimeout = Monotonic.seconds(timeout)
    }
    return try SessionServiceClient.open(configuration)
  }

  // MARK: download and upload

  /// `download --detach URL…` inside an app: each URL becomes a task of the app's background
  /// session in the service, handed over in the app's Downloads directory when it finishes (the
  /// app gets `handleEventsForBackgroundURLSession`, and `protfs tasks events` gives the files);
  /// prints each task's id. A bad URL is its own error; the others go ahead.
  static func download(_ invocation: Invocation, app: String, urls texts: [String]) throws -> Int32 {
    try checkBundle(invocation, DownloadCommand.bundle, app: app)
    try checkDownloadOptions(invocation)
    let headers = try UploadCommand.headers(invocation)
    let client = try openSession(invocation, app: app)
    defer { client.detach() }
    var failed = false
    var seen = Set<String>()
    let notBefore = try DownloadCommand.earliestBegin(invocation).map { Date(timeIntervalSince1970: $0) }
    for text in texts {
      switch DownloadRequest.url(from: text) {
      case .success(let url):
        guard seen.insert(url.absoluteString).inserted else { continue }
        do throws(ProtFSError) {
          let task = try client.createDownloadTask(
            SessionRequest(
              url: url, headers: headers, taskDescription: invocation.value(DownloadCommand.description)),
            resumeData: nil)
          try client.resume(task.id, notBefore: notBefore)
          printHandedOver(invocation, id: task.id, kind: .download, session: client.identifier)
        } catch {
          Console.err("Error: \(invocation.describe(error))")
          failed = true
        }
      case .failure(let error):
        Console.err("Error: \(invocation.describe(error))")
        failed = true
      }
    }
    return failed ? DownloadCommand.exitFailed : DownloadCommand.exitCompleted
  }

  /// Refuses the `download` options an app's downloads cannot have: they run in the service
  /// (`--detach` is required) and are handed over, not placed.
  static func checkDownloadOptions(_ invocation: Invocation) throws {
    guard invocation.flag(DownloadCommand.detach) else {
      throw invocation.usageError(
        "Inside an app, downloads run in the session service: add --detach, then follow them with "
          + "\(invocation.spelling.command("tasks wait")).")
    }
    let why = "an app's downloads are handed over in its Downloads directory, and it moves them itself"
    if invocation.value(DownloadCommand.destination) != nil {
      throw refuse(invocation, DownloadCommand.destination, why)
    }
    if invocation.flag(DownloadCommand.sync) { throw refuse(invocation, DownloadCommand.sync, why) }
    if invocation.value(DownloadCommand.sha256) != nil {
      throw refuse(
        invocation, DownloadCommand.sha256, "URLSession has no such check; check the file once it is handed over")
    }
  }

  /// `upload --detach` inside an app: the service reads the file as the app may (relative paths
  /// are the app's, from its current directory), snapshots it and sends it; prints the task's id.
  static func upload(
    _ invocation: Invocation, app: String, source: String, target: URL, method: UploadMethod,
    headers: [UploadHeader]
  ) throws -> Int32 {
    try checkBundle(invocation, UploadCommand.bundle, app: app)
    guard invocation.flag(DownloadCommand.detach) else {
      throw invocation.usageError(
        "Inside an app, uploads run in the session service: add --detach, then follow them with "
          + "\(invocation.spelling.command("tasks wait")).")
    }
    let path = source.hasPrefix("/") ? source : FileManager.default.currentDirectoryPath + "/" + source
    let client = try openSession(invocation, app: app)
    defer { client.detach() }
    let task = try client.createUploadTask(
      SessionRequest(
        url: target, method: method.rawValue, headers: headers,
        taskDescription: invocation.value(DownloadCommand.description)),
      fromFile: path)
    let notBefore = try DownloadCommand.earliestBegin(invocation).map { Date(timeIntervalSince1970: $0) }
    try client.resume(task.id, notBefore: notBefore)
    printHandedOver(invocation, id: task.id, kind: .upload, session: client.identifier)
    return DownloadCommand.exitCompleted
  }

  /// Prints a task the service took: its id, or with --json its JSON line, as `--detach` outside
  /// an app prints it.
  private static func printHandedOver(_ invocation: Invocation, id: Int64, kind: TaskKind, session: String) {
    if invocation.flag(CommonOptions.json) {
      // Encoding a few numbers and words cannot fail.
      try? Console.jsonLine(HandedOverTask(id: id, kind: kind, sessionIdentifier: session))
    } else {
      Console.out(String(id))
    }
  }

  // MARK: tasks

  /// The app's tasks (of `session` only, when given), oldest first.
  static func records(_ invocation: Invocation, session: String?) throws -> [DownloadTaskRecord] {
    try SessionServiceClient.appTasks(session: session, socketName: socketName(invocation)).sorted { $0.id < $1.id }
  }

  /// `tasks prune` inside an app: the service removes the app's own finished tasks (of `session`
  /// only, when given) unchanged for `age` seconds, every finished one when nil.
  static func prune(_ invocation: Invocation, olderThan age: Double?, session: String?) throws -> [Int64] {
    try SessionServiceClient.prune(olderThan: age, session: session, socketName: socketName(invocation))
  }

  /// The app's task `id`, or "no such task" (another app's is as unknown).
  static func record(_ invocation: Invocation, id: Int64) throws -> DownloadTaskRecord {
    guard let record = try records(invocation, session: nil).first(where: { $0.id == id }) else {
      throw TasksCommand.noSuchTask(id, on: invocation.device)
    }
    return record
  }

  /// `tasks suspend|cancel|resume ID` inside an app: asked of the service, which runs the task; a
  /// resumed task is waited for until it settles, as `tasks resume` does in the foreground.
  static func act(_ invocation: Invocation, id: Int64, _ kind: SessionServiceRequest.Kind) throws -> Int32 {
    let record = try record(invocation, id: id)
    let client = SessionServiceClient.attach(identifier: record.sessionIdentifier, socketName: socketName(invocation))
    switch kind {
    case .suspend:
      try client.suspend(id)
      return 0
    case .cancel:
      _ = try client.cancel(id, producingResumeData: false)
      Console.err("Cancelled \(record.kind.rawValue) task \(id) (\(record.url)).")
      return 0
    default:
      if record.state == .completed {
        Console.err("Task \(id) has already completed.")
        return 0
      }
      try client.resume(id)
      return try wait(invocation, ids: [id], session: nil)
    }
  }

  /// `tasks wait` inside an app: the service answers once every task settled; the outcome as
  /// `tasks wait` gives it.
  static func wait(_ invocation: Invocation, ids given: [Int64], session: String?) throws -> Int32 {
    let known = Dictionary(uniqueKeysWithValues: try records(invocation, session: session).map { ($0.id, $0) })
    var ids = given
    if ids.isEmpty { ids = known.values.filter { !$0.state.isSettled }.map(\.id).sorted() }
    for id in ids where known[id] == nil {
      if let session { throw invocation.usageError("Task \(id) is not of the session '\(session)'.") }
      throw TasksCommand.noSuchTask(id, on: invocation.device)
    }
    var toRead = ids
    if ids.contains(where: { known[$0]?.state.isSettled == false }) {
      toRead = try SessionServiceClient.waitUntilSettled(ids, socketName: socketName(invocation))
    }
    guard !toRead.isEmpty else { return 0 }
    let settled = Dictionary(uniqueKeysWithValues: try records(invocation, session: session).map { ($0.id, $0) })
    return TasksWaitCommand.outcome(of: toRead, records: settled, spelling: invocation.spelling)
  }
}
