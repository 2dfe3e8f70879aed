import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// `protfs download`: background downloads into a container, as nsurlsessiond makes them.
package enum DownloadCommand {
  /// Every task completed.
  package static let exitCompleted: Int32 = 0
  /// One or more tasks failed (their errors are on stderr).
  package static let exitFailed: Int32 = 1
  /// No task failed, but one or more finished downloads wait for `protfs unlock` to be moved into place.
  package static let exitWaitingForUnlock: Int32 = 75

  package static let command = Command(
    name: "download",
    abstract: "Download files into a container the way an iOS background URLSession does.",
    discussion: """
      Bytes go to CFNetworkDownload_XXXXXX.tmp in the container's
      Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id>; when a transfer ends the file
      moves to --to (default Documents), where that directory's class applies. While the device
      is locked, a temp directory whose class is not available fails the task with "Operation not
      permitted" (the fix: `protfs init-cache`); a finished download whose destination is not
      available waits, and the next `protfs unlock` moves it into place. Tasks are kept in
      <device>/.protfs/downloads.sqlite: running the same download again resumes it. Two URLs of
      one name in one run make two files: the second is saved as 'name (1).ext', with a note.
      Ctrl-C (SIGINT) or SIGTERM stops the transfers and records their tasks as interrupted (so
      `protfs tasks` shows them), then one line on stderr names the command that goes on with them.

      With --detach the tasks go to the device's session service (started if needed) and the
      command prints one task id per line and returns at once; `protfs tasks` follows them.
      Inside an app (below `protfs app launch`, as the app user), --bundle may be left out and
      --detach is required: the tasks join the app's background session in the service, and each
      finished file is handed over in its Downloads directory (`protfs tasks events` names it).
      -H 'Name: value' (repeatable) adds a request header to every request of every task, a
      resumed one included; the task store keeps it with the task.

      With --json: once every task settled, one object with tasks (each with id, kind, url,
      state, destinationPath and, as needed, renamedFrom and error, keyed as `tasks --json`
      keys them) and rejected (each URL refused before it became a task, with its error); with
      --detach, JSON lines instead, one {"id", "kind", "sessionIdentifier"} per task as the
      service takes it. Errors still go to stderr too. --json does not go with --progress json.

      Exit status: 0 every task completed (with --detach: handed over); 1 a task failed; 75 a task waits for unlock;
      64 a usage error; 130 (SIGINT) or 143 (SIGTERM) interrupted.
      """,
    arguments: [urls],
    options: [
      inputFile, bundle, session, destination, sha256, description, UploadCommand.header, connections, progress,
      requestTimeout, resourceTimeout, earliestBegin, sync, detach, CommonOptions.json,
    ],
    run: run
  )

  /// `[<url> ...]`.
  package static let urls = Argument(name: "url", help: "http, https or file URLs.", arity: .zeroOrMore)
  /// `--input-file FILE`, `-i`.
  package static let inputFile = Option.value(
    "input-file", short: "i", "file", help: "Read URLs from FILE, one per line ('-' for stdin).")
  /// `--bundle BUNDLE-ID`.
  package static let bundle = Option.value(
    "bundle", "bundle-id",
    help: "The app whose container receives the files (required).\(CommonOptions.leadingBundle)")
  /// `--session IDENTIFIER`.
  package static let session = Option.value(
    "session", "identifier", help: "The background session's identifier (default: <bundle-id>.background).")
  /// `--to DIR`.
  package static let destination = Option.value(
    "to", "dir", help: "Destination directory inside the container (default: Documents).")
  /// `--sha256 HEX`.
  package static let sha256 = Option.value("sha256", "hex", help: "The SHA-256 every downloaded file must have.")
  /// `--description TEXT`: each task's `taskDescription`, kept with it and shown by `tasks`.
  package static let description = Option.value(
    "description", "text", help: "A description kept with each task (URLSessionTask's taskDescription).")
  /// `--connections N`.
  package static let connections = Option.value("connections", "n", help: "Connections per host (default: 6, as iOS).")
  /// `--progress MODE`, also for `tasks resume`.
  package static let progress = Option.value(
    "progress", "mode", help: "auto, bar, json or none (default: auto: a bar on a terminal).",
    choices: ["auto", "bar", "json", "none"])
  /// `--timeout-request DURATION`.
  package static let requestTimeout = Option.value(
    "timeout-request", "duration",
    help: "Retry a transfer that receives nothing, or under 100 bytes/s, for this long (default: 60s; 1s to 1d).")
  /// `--timeout-resource DURATION`.
  package static let resourceTimeout = Option.value(
    "timeout-resource", "duration",
    help: "Fail a task not finished this long after it was created, resumes included (default: 7d; 1s to 365d).")
  /// `--earliest-begin WHEN`: each task's `earliestBeginDate`.
  package static let earliestBegin = Option.value(
    "earliest-begin", "when",
    help: "Begin no sooner than WHEN: a duration from now (90s, 2h) or an ISO 8601 date (earliestBeginDate).")
  /// `--sync`.
  package static let sync = Option.flag(
    "sync",
    help:
      "Flush each file to disk before moving it into place, so that a power cut cannot leave a partial file (slower).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    var texts = invocation.arguments(Self.urls)
    if let list = invocation.value(Self.inputFile) { texts += try readList(list) }
    if let app = AppTransfers.app(invocation) {
      if texts.isEmpty { throw invocation.usageError("Give at least one URL, or -i FILE.") }
      return try AppTransfers.download(invocation, app: app, urls: texts)
    }
    guard let bundleText = invocation.value(Self.bundle) else {
      throw invocation.usageError("Missing '--bundle <bundle-id>': downloads belong to an app's container.")
    }
    let bundleID = try invocation.bundleID(bundleText)
    if texts.isEmpty { throw invocation.usageError("Give at least one URL, or -i FILE.") }
    let mode = try progressMode(invocation)
    let (configuration, headers) = try sessionConfiguration(invocation, bundleID: bundleID)
    var requests = try RequestList(invocation, texts: texts, configuration: configuration, headers: headers)
    // Nothing is recorded when no URL is good.
    let first = requests.next(firstChunk)
    guard !first.isEmpty else {
      if invocation.flag(CommonOptions.json) && !invocation.flag(Self.detach) {
        try Console.json(Outcome(tasks: [], rejected: requests.rejected))
      }
      return exitFailed
    }
    if invocation.flag(Self.detach) {
      let status = try detach(invocation, configuration: configuration, first: first) { requests.next($0) }
      return requests.rejected.isEmpty ? status : exitFailed
    }
    return try runAttached(invocation, configuration: configuration, progress: mode, first: first, &requests)
  }

  /// The session's configuration from the options (the container's session, its destination,
  /// connections and timeouts) and the `-H` headers of every request; a usage error for a value
  /// out of range.
  static func sessionConfiguration(_ invocation: Invocation, bundleID: BundleID) throws -> (
    DownloadSessionConfiguration, [UploadHeader]
  ) {
    let connections = try connectionCount(invocation)
    let requestTimeout = try timeout(invocation, Self.requestTimeout, within: 1...86400)
    let resourceTimeout = try timeout(invocation, Self.resourceTimeout, within: 1...(365 * 86400))
    if let digest = invocation.value(Self.sha256), DownloadRequest.normalizedSHA256(digest) == nil {
      throw invocation.usageError("'\(digest)' is not a SHA-256 digest; give 64 hexadecimal digits.")
    }
    let headers = try UploadCommand.headers(invocation)
    let device = invocation.device
    let container = device.container(bundleID)
    let destinationText = invocation.value(Self.destination) ?? "Documents"
    let destination = try resolveDestination(destinationText, in: container, device: device)
    var configuration = try device.downloadConfiguration(
      bundleID: bundleID, identifier: try sessionIdentifier(invocation, bundleID: bundleID.rawValue),
      destination: destination)
    configuration.maximumConnectionsPerHost = connections
    configuration.synchronizesFiles = invocation.flag(Self.sync)
    if let requestTimeout { configuration.requestTimeout = requestTimeout }
    if let resourceTimeout { configuration.resourceTimeout = resourceTimeout }
    // The CLI resumes only what it is asked for; `protfs tasks resume` takes the rest.
    configuration.resumesReattachedTasks = false
    return (configuration, headers)
  }

  /// `--connections`: per host, 6 unless given; a usage error outside 1...64.
  static func connectionCount(_ invocation: Invocation) throws -> Int {
    guard let text = invocation.value(Self.connections) else { return 6 }
    guard let n = Int(text), (1...64).contains(n) else {
      throw invocation.usageError("'\(text)' is not a connection count; use a whole number from 1 to 64.")
    }
    return n
  }

  /// Runs the tasks here, `first` then the rest of `requests` a chunk at a time, until every one
  /// settles or a signal stops them; prints what became of each. Returns the exit status.
  static func runAttached(
    _ invocation: Invocation, configuration: DownloadSessionConfiguration, progress mode: String,
    first: [DownloadRequest], _ requests: inout RequestList
  ) throws -> Int32 {
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let interruption = try TransferInterruption.catching(session)
    // Running the same download again picks up its unfinished task instead of starting over. Tasks
    // are recorded and started a chunk at a time, so the first transfers run while the rest of a
    // long list is still being recorded.
    var given: [DownloadRequest]? = first
    let run = Result { () throws(ProtFSError) in
      try runInForeground(of: session, progress: mode, spelling: invocation.spelling) { () throws(ProtFSError) in
        let batch = given ?? requests.next(Self.chunk)
        given = nil
        return batch.isEmpty ? nil : try session.downloadTasks(with: batch)
      }
    }
    // Stopped while a chunk was being recorded, the session refused the rest: the interruption is
    // the news, not that.
    if let signal = interruption.signal { return interruption.report(signal, spelling: invocation.spelling) }
    let (tasks, outcome) = try run.get()
    return try report(tasks, outcome: outcome, rejected: requests.rejected, progress: mode, invocation)
  }

  /// The `--progress` mode (auto, bar, json or none), refusing `--progress json` with `--json`:
  /// both would write JSON on standard output (download and upload).
  package static func progressMode(_ invocation: Invocation) throws -> String {
    let mode = invocation.value(Self.progress) ?? "auto"
    guard Self.progress.choices.contains(mode) else {
      throw invocation.usageError("'\(mode)' is not a progress mode; use auto, bar, json or none.")
    }
    if mode == "json" && invocation.flag(CommonOptions.json) {
      throw invocation.usageError(
        "Give --json (one result when the transfers end) or --progress json (a line per event), not both.")
    }
    return mode
  }

  /// The session `--session` names, else the bundle's background session; a usage error for an
  /// identifier the session service would refuse.
  package static func sessionIdentifier(_ invocation: Invocation, bundleID: String) throws -> String {
    guard let text = invocation.value(session) else { return "\(bundleID).background" }
    if let problem = SessionConfiguration.identifierProblem(text) { throw invocation.usageError(problem) }
    return text
  }

  /// `--earliest-begin`'s time, in seconds since 1970: now plus a duration, or an ISO 8601 date.
  package static func earliestBegin(_ invocation: Invocation) throws -> Double? {
    guard let text = invocation.value(Self.earliestBegin) else { return nil }
    if let seconds = try? HumanDuration.parse(text, in: 0...(100 * 365 * 86_400)) {
      return Date().timeIntervalSince1970 + seconds
    }
    let formatter = ISO8601DateFormatter()
    let forms: [ISO8601DateFormatter.Options] = [
      .withInternetDateTime, [.withInternetDateTime, .withFractionalSeconds],
    ]
    for options in forms {
      formatter.formatOptions = options
      if let date = formatter.date(from: text), date.timeIntervalSince1970.magnitude < JSONStateFile.timestampLimit {
        return date.timeIntervalSince1970
      }
    }
    throw invocation.usageError(
      "--earliest-begin: '\(text)' is neither a duration (90s, 2h, 1d) nor an ISO 8601 date with its zone "
        + "(2026-12-24T03:00:00Z).")
  }

  /// The duration given to `option`, if any, checked against `range` (in seconds) before it
  /// becomes a `Duration`.
  package static func timeout(_ invocation: Invocation, _ option: Option, within range: ClosedRange<Double>) throws
    -> Duration?
  {
    guard let text = invocation.value(option) else { return nil }
    do {
      let seconds = try HumanDuration.parse(text, in: range)
      return .milliseconds(Int64((seconds * 1000).rounded()))
    } catch {
      throw invocation.usageError("--\(option.long): \(invocation.describe(error))")
    }
  }

  /// The largest URL list read: far more than the most URLs a download takes.
  static let urlListBytes = 256 << 20

  /// The URLs of the list at `path` ('-' for stdin): one a line, blank lines and comments left out.
  package static func readList(_ path: String) throws -> [String] {
    let text: String
    if path == "-" {
      text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
    } else {
      switch Kernel.readNamedFile(path, limit: urlListBytes) {
      case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
      case .failure(let failure):
        throw ProtFSError(.notFound, "Cannot read the URL list '\(path)': \(failure.reason).", path: path)
      }
    }
    // aria2 and wget skip blank lines and lines starting with '#'.
    // Lines split and trimmed as bytes (ASCII space, tab, CR, LF, FF, VT): lists run to thousands
    // of lines, and Character-by-Character splitting costs milliseconds.
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
    return text.utf8.split(whereSeparator: { $0 == 0x0A || $0 == 0x0D }).compactMap { line in
      var trimmed = line.drop(while: isSpace)
      while let last = trimmed.last, isSpace(last) { trimmed = trimmed.dropLast() }
      return trimmed.isEmpty || trimmed.first == UInt8(ascii: "#") ? nil : String(Substring(trimmed))
    }
  }

  /// `--to` is a directory inside the container: relative to its root, or an absolute path inside it.
  package static func resolveDestination(_ text: String, in container: Container, device: Device) throws -> DevicePath {
    try device.requireInitialized()
    try container.requireExists()
    do {
      return try container.resolve(text)
    } catch {
      guard error.code == .outsideDevice else { throw error }
      throw ProtFSError(
        .outsideDevice, "The destination '\(text)' is outside the container of \(container.bundleID).", path: text,
        remedy: .advice("give --to a directory inside the container, such as Documents"))
    }
  }
}
