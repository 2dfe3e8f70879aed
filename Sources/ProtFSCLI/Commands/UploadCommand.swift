import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// `protfs upload`: a background upload task from a container's file, as nsurlsessiond sends it.
package enum UploadCommand {
  package static let command = Command(
    name: "upload",
    abstract: "Upload a container's file the way an iOS background URLSession upload task does.",
    discussion: """
      The file (PATH relative to the container, or absolute inside it) is read under the lock
      rules when the task is made: a file of class complete fails with "Operation not permitted"
      while the device is locked, as on iOS. It is copied to the container's
      Library/Caches/com.apple.nsurlsessiond/Uploads/<bundle-id>, so the app may delete it; the
      copy is sent (PUT by default, or POST), retried from its first byte after a dropped
      connection or a 5xx answer, and removed when the task ends. The server's answer is kept with
      the task (up to 16 MiB of its body): --response FILE writes it, '-' to stdout; the status is
      printed. `protfs tasks` lists uploads with kind "upload". With --detach the task is handed to
      the device's session service (started if needed), its id printed, and the command returns at
      once; the service sends it even after the app or this shell is gone.

      With --json: once the task settled, one object with id, kind, url, state, responseStatus
      and, when it failed, error (keyed as `tasks --json` keys them); with --detach, one JSON line
      {"id", "kind", "sessionIdentifier"} once the service took the task. Errors still go to
      stderr too. --json does not go with --progress json or --response -.

      Exit status: 0 the server answered 2xx; 1 the task failed (or a 4xx answer); 64 a usage error.
      """,
    arguments: [url],
    options: [
      bundle, from, method, header, response, DownloadCommand.session, DownloadCommand.description,
      DownloadCommand.progress, DownloadCommand.requestTimeout, DownloadCommand.resourceTimeout,
      DownloadCommand.earliestBegin, DownloadCommand.detach, CommonOptions.json,
    ],
    // `upload Documents/r.txt URL`: the file was meant for --from.
    extraArgumentHint: { words in
      guard words.count == 2, !words[0].contains("://") else { return nil }
      return "The file to upload is given with --from: did you mean '--from \(words[0]) \(words[1])'?"
    },
    run: run
  )

  /// `--bundle BUNDLE-ID`.
  package static let bundle = Option.value(
    "bundle", "bundle-id", help: "The app whose container holds the file (required).\(CommonOptions.leadingBundle)")
  /// `<url>`.
  package static let url = Argument(name: "url", help: "The http or https URL to send the file to.")
  /// `--from PATH`.
  package static let from = Option.value(
    "from", "path", help: "The file to upload: relative to the container, or absolute inside it (required).",
    isRequired: true)
  /// `-X METHOD`.
  package static let method = Option.value(
    "method", short: "X", "method", help: "PUT (default) or POST.", choices: UploadMethod.allCases.map(\.rawValue))
  /// `-H 'Name: value'`, repeatable.
  package static let header = Option.value(
    "header", short: "H", "header", help: "A request header, 'Name: value' (repeatable).", repeatable: true)
  /// `--response FILE`.
  package static let response = Option.value(
    "response", "file", help: "Write the server's response body to FILE ('-' for stdout).")

  /// The `-H` headers of `invocation`, in order, or a usage error naming the bad one (upload and
  /// download parse them alike).
  package static func headers(_ invocation: Invocation) throws -> [UploadHeader] {
    var headers: [UploadHeader] = []
    for text in invocation.values(Self.header) {
      do {
        headers.append(try UploadHeader.parse(text))
      } catch {
        throw invocation.usageError("-H '\(text)': \(error.message)")
      }
    }
    return headers
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let app = AppTransfers.app(invocation)
    guard let bundleText = invocation.value(Self.bundle) ?? app else {
      throw invocation.usageError("Missing '--bundle <bundle-id>': uploads belong to an app's container.")
    }
    let bundleID = try invocation.bundleID(bundleText)
    guard let source = invocation.value(Self.from) else {
      throw invocation.usageError("Missing '--from <path>': the container's file to upload.")
    }
    let methodText = invocation.value(Self.method) ?? "PUT"
    guard let method = UploadMethod(rawValue: methodText.uppercased()) else {
      throw invocation.usageError("'\(methodText)' is not an upload method; use -X PUT or -X POST.")
    }
    let headers = try Self.headers(invocation)
    let mode = try DownloadCommand.progressMode(invocation)
    if invocation.flag(CommonOptions.json) && invocation.value(Self.response) == "-" {
      throw invocation.usageError(
        "--response - writes the server's answer on standard output, where --json writes the result; give --response FILE."
      )
    }
    let timeouts = try Timeouts(invocation)
    let target = try DownloadSession.uploadURL(invocation.required(Self.url))
    if let app {
      if invocation.value(Self.response) != nil {
        throw invocation.usageError(
          "--response cannot be used inside an app: the answer arrives after this command returns.")
      }
      return try AppTransfers.upload(
        invocation, app: app, source: source, target: target, method: method, headers: headers)
    }
    let upload = UploadRequest(
      url: target, method: method, headers: headers, taskDescription: invocation.value(DownloadCommand.description))
    return try runHere(invocation, upload, from: source, bundleID: bundleID, timeouts: timeouts, progress: mode)
  }

  /// `--timeout-request` and `--timeout-resource`, as `download` reads them.
  struct Timeouts {
    /// `--timeout-request`, if given.
    var request: Duration?
    /// `--timeout-resource`, if given.
    var resource: Duration?

    /// The timeouts `invocation` gives, or a usage error.
    init(_ invocation: Invocation) throws {
      request = try DownloadCommand.timeout(invocation, DownloadCommand.requestTimeout, within: 1...86400)
      resource = try DownloadCommand.timeout(invocation, DownloadCommand.resourceTimeout, within: 1...(365 * 86400))
    }
  }

  /// Makes the task of `upload` from the container's file `source` in this process, then either
  /// hands it to the session service (`--detach`) or sends it here. Returns the exit status.
  static func runHere(
    _ invocation: Invocation, _ upload: UploadRequest, from source: String, bundleID: BundleID, timeouts: Timeouts,
    progress mode: String
  ) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let container = device.container(bundleID)
    try container.requireExists()
    let path = source.hasPrefix("/") ? source : container.absolutePath + "/" + source
    var configuration = try device.downloadConfiguration(
      bundleID: bundleID, identifier: try DownloadCommand.sessionIdentifier(invocation, bundleID: bundleID.rawValue),
      destination: try container.path("Documents"))
    if let request = timeouts.request { configuration.requestTimeout = request }
    if let resource = timeouts.resource { configuration.resourceTimeout = resource }
    configuration.resumesReattachedTasks = false
    let detached = invocation.flag(DownloadCommand.detach)
    if detached, invocation.value(Self.response) != nil {
      throw invocation.usageError(
        "--response cannot go with --detach: the answer arrives after this command returns; drop one of them.")
    }
    // A detached upload is recorded with a resume request for the service, so that it runs even
    // if this command dies before handing it over (the next handover of the session takes it).
    var opening = configuration
    opening.recordsForService = detached
    let session = try DownloadSession(configuration: opening)
    defer { session.invalidate() }
    if detached { try ServiceHandover(invocation, configuration: configuration).register(in: session.store) }
    var upload = upload
    upload.earliestBegin = try DownloadCommand.earliestBegin(invocation)
    let task = try session.uploadTask(with: upload, fromFile: path)
    if detached {
      session.invalidate()
      try DownloadCommand.handToService(invocation, configuration: configuration, tasks: [task])
      return DownloadCommand.exitCompleted
    }
    return try send(task, of: session, progress: mode, invocation)
  }

  /// Sends `task` here until it settles, then prints the server's status (and its answer with
  /// `--response`). Returns the exit status.
  static func send(_ task: DownloadTask, of session: DownloadSession, progress mode: String, _ invocation: Invocation)
    throws -> Int32
  {
    let outcome = DownloadCommand.runInForeground(
      [task], of: session, progress: mode, spelling: invocation.spelling)
    let state = outcome[task.id] ?? task.state
    let json = invocation.flag(CommonOptions.json)
    let responseToStdout = invocation.value(Self.response) == "-"
    if let status = task.responseStatus {
      let line = "\(status) \(task.url.absoluteString)"
      if responseToStdout || mode == "json" || json { Console.err(line) } else { Console.out(line) }
    }
    if let file = invocation.value(Self.response), let body = task.responseBody {
      try write(body, to: file)
    }
    if json { try Console.json(TaskOutcome(task, state: state, spelling: invocation.spelling)) }
    guard state == .completed else {
      Console.err(
        "Error: \(task.error.map(invocation.describe) ?? "the upload to \(task.url.absoluteString) did not finish.")")
      return DownloadCommand.exitFailed
    }
    return DownloadCommand.exitCompleted
  }

  /// Writes the response body to `file` (the user's file, anywhere), or to stdout for '-'.
  private static func write(_ body: Data, to file: String) throws {
    if file == "-" {
      FileHandle.standardOutput.write(body)
      return
    }
    do {
      try body.write(to: URL(fileURLWithPath: file))
    } catch {
      throw ProtFSError(.io, "Cannot write the response to '\(file)': \(FailureReason.of(error)).", path: file)
    }
  }
}
