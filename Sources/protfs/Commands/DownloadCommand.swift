import Foundation
import ProtFS

/// `protfs download`: background downloads into a container, as nsurlsessiond makes them.
enum DownloadCommand {
  /// Every task completed.
  static let exitCompleted: Int32 = 0
  /// One or more tasks failed (their errors are on stderr).
  static let exitFailed: Int32 = 1
  /// No task failed, but one or more finished downloads wait for `protfs unlock` to be moved into place.
  static let exitWaitingForUnlock: Int32 = 75

  static let command = Command(
    name: "download",
    abstract: "Download files into a container the way an iOS background URLSession does.",
    discussion: """
      Bytes go to CFNetworkDownload_XXXXXX.tmp in the container's
      Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id>; when a transfer ends the file
      moves to --to (default Documents), where that directory's class applies. While the device
      is locked, a temp directory whose class is not available fails the task with "Operation not
      permitted" (the fix: `protfs init-cache`); a finished download whose destination is not
      available waits, and the next `protfs unlock` moves it into place. Tasks are kept in
      <device>/.protfs/downloads.sqlite: running the same download again resumes it.

      Exit status: 0 every task completed; 1 a task failed; 75 a task waits for unlock;
      64 a usage error.
      """,
    arguments: [Argument(name: "url", help: "http, https or file URLs.", arity: .zeroOrMore)],
    options: [
      .value("input-file", short: "i", "file", help: "Read URLs from FILE, one per line ('-' for stdin)."),
      .value("bundle", "bundle-id", help: "The app whose container receives the files (required)."),
      .value("session", "identifier", help: "The background session's identifier (default: <bundle-id>.background)."),
      .value("to", "dir", help: "Destination directory inside the container (default: Documents)."),
      .value("sha256", "hex", help: "The SHA-256 every downloaded file must have."),
      .value("connections", "n", help: "Connections per host (default: 6, as iOS)."),
      .value("progress", "mode", help: "auto, bar, json or none (default: auto: a bar on a terminal)."),
    ],
    run: run
  )

  static func run(_ invocation: Invocation) throws -> Int32 {
    guard let bundleText = invocation.value("bundle") else {
      throw invocation.usageError("Missing '--bundle <bundle-id>': downloads belong to an app's container.")
    }
    let bundleID = try invocation.bundleID(bundleText)
    var texts = invocation.arguments("url")
    if let list = invocation.value("input-file") { texts += try readList(list) }
    if texts.isEmpty { throw invocation.usageError("Give at least one URL, or -i FILE.") }
    let mode = invocation.value("progress") ?? "auto"
    guard ["auto", "bar", "json", "none"].contains(mode) else {
      throw invocation.usageError("'\(mode)' is not a progress mode; use auto, bar, json or none.")
    }
    var connections = 6
    if let text = invocation.value("connections") {
      guard let n = Int(text), (1...64).contains(n) else {
        throw invocation.usageError("'\(text)' is not a connection count; use a whole number from 1 to 64.")
      }
      connections = n
    }
    if let digest = invocation.value("sha256"), digest.count != 64 || !digest.allSatisfy(\.isHexDigit) {
      throw invocation.usageError("'\(digest)' is not a SHA-256 digest; give 64 hexadecimal digits.")
    }

    let device = invocation.device
    let container = device.container(bundleID)
    let destinationText = invocation.value("to") ?? "Documents"
    let destination = try resolveDestination(destinationText, in: container, device: device)
    var configuration = try device.downloadConfiguration(
      bundleID: bundleID, identifier: invocation.value("session") ?? "\(bundleID).background",
      destination: destination)
    configuration.maximumConnectionsPerHost = connections
    // The CLI resumes only what it is asked for; `protfs tasks resume` takes the rest.
    configuration.resumesReattachedTasks = false

    // Each bad URL is one task's error; the others go ahead.
    var failed = false
    var requests: [DownloadRequest] = []
    for text in texts {
      switch validate(text) {
      case .success(let url):
        requests.append(
          DownloadRequest(
            url: url, destinationDirectory: configuration.destinationDirectory,
            expectedSHA256: invocation.value("sha256")?.lowercased()))
      case .failure(let error):
        Console.err("Error: \(error.description)")
        failed = true
      }
    }
    guard !requests.isEmpty else { return exitFailed }

    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    // Running the same download again picks up its unfinished task instead of starting over.
    let existing = session.allTasks.filter { $0.state.isUnfinished && $0.state != .waitingForUnlock }
    var tasks: [DownloadTask] = []
    var fresh: [DownloadRequest] = []
    for request in requests {
      if let task = existing.first(where: {
        $0.url == request.url && $0.record.destinationDirectory == request.destinationDirectory
      }) {
        tasks.append(task)
      } else {
        fresh.append(request)
      }
    }
    tasks += try session.downloadTasks(with: fresh)
    var waiting = false
    let outcome = runInForeground(tasks, of: session, progress: mode)
    for task in tasks {
      switch outcome[task.id] ?? task.state {
      case .completed:
        if mode != "json" { Console.out(task.location?.path ?? task.record.destinationPath ?? "") }
      case .waitingForUnlock:
        waiting = true
        Console.err(
          "note: \(task.url.absoluteString) finished; it waits for `protfs unlock` to move it to \(task.record.destinationPath ?? "its destination")."
        )
      default:
        failed = true
        Console.err("Error: \(task.error?.description ?? "the download of \(task.url.absoluteString) did not finish.")")
      }
    }
    return failed ? exitFailed : waiting ? exitWaitingForUnlock : exitCompleted
  }

  /// Resumes `tasks`, shows their progress in `mode` until every one settles, then ends the session's
  /// event stream once everything it held is printed. Returns the state each task settled in.
  static func runInForeground(_ tasks: [DownloadTask], of session: DownloadSession, progress mode: String)
    -> [Int64: DownloadState]
  {
    let progress = ProgressPrinter(mode: mode)
    let events = session.events
    let printer = Task.detached { for await event in events { progress.handle(event) } }
    progress.begin(tasks)
    for task in tasks { task.resume() }
    let outcome = waitForAll(tasks)
    drain(session, printer)
    progress.finish()
    return outcome
  }

  /// Waits on a plain thread, so that `Console` output stays in order and no executor is blocked.
  static func waitForAll(_ tasks: [DownloadTask]) -> [Int64: DownloadState] {
    let done = DispatchSemaphore(value: 0)
    let results = ResultBox()
    Task.detached {
      for task in tasks { results.set(task.id, await task.waitUntilSettled()) }
      done.signal()
    }
    done.wait()
    return results.value
  }

  /// Ends the session's event stream and waits until every event it held has been printed.
  static func drain(_ session: DownloadSession, _ printer: Task<Void, Never>) {
    session.invalidate()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
      await printer.value
      done.signal()
    }
    done.wait()
  }

  final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var states: [Int64: DownloadState] = [:]
    func set(_ id: Int64, _ state: DownloadState) { lock.withLock { states[id] = state } }
    var value: [Int64: DownloadState] { lock.withLock { states } }
  }

  static func readList(_ path: String) throws -> [String] {
    let text: String
    if path == "-" {
      text = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
    } else {
      guard let data = FileManager.default.contents(atPath: path) else {
        throw ProtFSError(.notFound, "Cannot read the URL list '\(path)'.", path: path)
      }
      text = String(decoding: data, as: UTF8.self)
    }
    // aria2 and wget skip blank lines and lines starting with '#'.
    return text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
      .filter { !$0.isEmpty && !$0.hasPrefix("#") }
  }

  static func validate(_ text: String) -> Result<URL, ProtFSError> {
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
      return .failure(
        ProtFSError(
          .invalidArgument, "'\(text)' is not a URL.", hint: "give an absolute URL such as https://example.com/file.zip"
        ))
    }
    guard ["http", "https", "file"].contains(scheme) else {
      return .failure(
        ProtFSError(
          .invalidArgument, "The URL '\(text)' has the unsupported scheme '\(scheme)'.", hint: "use http, https or file"
        ))
    }
    if scheme != "file" && (url.host ?? "").isEmpty {
      return .failure(ProtFSError(.invalidArgument, "The URL '\(text)' has no host."))
    }
    return .success(url)
  }

  /// `--to` is a directory inside the container: relative to its root, or an absolute path inside it.
  static func resolveDestination(_ text: String, in container: Container, device: Device) throws -> DevicePath {
    try device.requireInitialized()
    try container.requireExists()
    let path: DevicePath
    if text.hasPrefix("/") {
      path = try device.resolve(text)
    } else {
      path = try container.path.appending(path: text)
    }
    guard path.hasPrefix(container.path) else {
      throw ProtFSError(
        .outsideDevice, "The destination '\(text)' is outside the container of \(container.bundleID).", path: text,
        hint: "give --to a directory inside the container, such as Documents")
    }
    return path
  }
}
