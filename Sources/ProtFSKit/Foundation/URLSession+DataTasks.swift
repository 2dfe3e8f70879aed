import Foundation
import ProtFSDownloads
import ProtFSSessions
import Synchronization

/// Data tasks, the shared session, and the tasks made with a completion handler or awaited
/// (Foundation's "convenience" tasks).
extension URLSession {
  /// What the delegate answers to a data task's response (`dataTask(_:didReceive:completionHandler:)`).
  public enum ResponseDisposition: Int, Sendable {
    /// The task ends: it completes with `NSURLErrorCancelled`.
    case cancel = 0
    /// The task goes on.
    case allow = 1
    /// The rest of the body goes to a file: the delegate's `didBecome downloadTask:` gets the
    /// download task that carries on (a task run in the app; a background session's: as `allow`).
    case becomeDownload = 2
    /// As `allow` (no stream task here).
    case becomeStream = 3
  }

  /// Apple's message for a task made with a completion handler (or awaited) in a background session.
  static let completionHandlerRefused =
    "Completion handler blocks are not supported in background sessions. Use a delegate instead."

  /// Ends the process as iOS does for a convenience task asked of a background session.
  func refuseConvenienceTaskInBackground() {
    if configuration.isBackground {
      UncaughtException.raise("NSGenericException", reason: Self.completionHandlerRefused)
    }
  }

  // MARK: Awaited tasks

  /// The body and response of `url` (a data task); throws the task's error (`URLError`).
  public func data(from url: URL, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (Data, URLResponse) {
    try await data(for: URLRequest(url: url), delegate: delegate)
  }

  /// The body and response of `request` (a data task). Cancelling the awaiting task cancels it.
  /// `delegate` becomes the task's own (its challenges, metrics and progress calls; the result is
  /// returned, not delivered), as Apple's.
  public func data(for request: URLRequest, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (
    Data, URLResponse
  ) {
    try await awaiting(delegate) { done in
      dataTask(with: request) { data, response, error in done(Self.outcome(error, data, response)) }
    }
  }

  /// The reply and response of uploading the file at `fileURL` with `request`.
  public func upload(
    for request: URLRequest, fromFile fileURL: URL, delegate: (any URLSessionTaskDelegate)? = nil
  ) async throws -> (Data, URLResponse) {
    try await awaiting(delegate) { done in
      uploadTask(with: request, fromFile: fileURL) { data, response, error in done(Self.outcome(error, data, response))
      }
    }
  }

  /// The reply and response of uploading `bodyData` with `request`.
  public func upload(
    for request: URLRequest, from bodyData: Data, delegate: (any URLSessionTaskDelegate)? = nil
  ) async throws -> (Data, URLResponse) {
    try await awaiting(delegate) { done in
      uploadTask(with: request, from: bodyData) { data, response, error in done(Self.outcome(error, data, response)) }
    }
  }

  /// The file and response of downloading `url`: the file is the caller's, in the app's temporary
  /// directory (moved there with its class); move or delete it.
  public func download(from url: URL, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (URL, URLResponse)
  {
    try await download(for: URLRequest(url: url), delegate: delegate)
  }

  /// The file and response of downloading `request`, as `download(from:delegate:)`.
  public func download(for request: URLRequest, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (
    URL, URLResponse
  ) {
    try await awaiting(delegate) { done in
      downloadTask(with: request) { location, response, error in
        guard let location, let response, error == nil else {
          return done(.failure(error ?? URLError(.badServerResponse)))
        }
        // The handed-over file goes when the handler returns: it is kept in the app's tmp/.
        let kept = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent(
          "CFNetworkDownload_\(UUID().uuidString.prefix(6)).tmp")
        do {
          try FileManager.default.moveItem(at: location, to: kept)
          done(.success((kept, response)))
        } catch {
          done(.failure(URLError(.cannotMoveFile, userInfo: [NSUnderlyingErrorKey: error])))
        }
      }
    }
  }

  /// A data or upload task's result: its body and response, or its error.
  private static func outcome(_ error: (any Error)?, _ data: Data?, _ response: URLResponse?) -> Result<
    (Data, URLResponse), any Error
  > {
    guard let response, error == nil else { return .failure(error ?? URLError(.badServerResponse)) }
    return .success((data ?? Data(), response))
  }

  /// Runs the convenience task `make` gives (resumed here) to its end: its handler calls `done`
  /// with the task's result. Cancelling the awaiting Swift task cancels it; an error is thrown as
  /// `URLError`, as Foundation throws.
  private func awaiting<Value: Sendable>(
    _ delegate: (any URLSessionTaskDelegate)? = nil,
    _ make: (@escaping @Sendable (Result<Value, any Error>) -> Void) -> URLSessionTask
  ) async throws -> Value {
    let made = Mutex<URLSessionTask?>(nil)
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
        let task = make { result in continuation.resume(with: result.mapError { Self.urlError($0) }) }
        if let delegate { task.delegate = delegate }
        made.withLock { $0 = task }
        task.resume()
        if Task.isCancelled { task.cancel() }
      }
    } onCancel: {
      made.withLock { $0 }?.cancel()
    }
  }

  /// `error` as the `URLError` Foundation's async methods throw.
  static func urlError(_ error: any Error) -> any Error {
    if error is URLError { return error }
    let nsError = error as NSError
    guard nsError.domain == NSURLErrorDomain else { return error }
    return URLError(URLError.Code(rawValue: nsError.code) ?? .unknown, userInfo: nsError.userInfo)
  }
}

/// A task run in the app's own process rather than the session service: the session lists it with
/// the service's tasks, waits for it when finishing, and cancels it when cancelling.
protocol RunsInProcess: URLSessionTask {
  /// Its transfer.
  var run: InProcessTransfer { get }
}

/// A task of this process whose transfer waits, at its response, for the app's answer (the data
/// delegate's disposition): a data task, a standard session's upload. Such a task's body length is
/// its response's. (A standard session's download answers its own response.)
protocol AnswersItsResponse: RunsInProcess {}

extension AnswersItsResponse {
  /// The transfer, which waits for the answer to its response.
  var transfer: DataTransfer { run.transfer }
}

/// The transfer of a task run in the app's own process (a data task, a standard session's
/// download): its request as the session prepares it, made by `DataTransfer` with the session's
/// timeouts, and started when the session's gate lets its host have one more connection.
struct InProcessTransfer: Sendable {
  /// The transfer.
  let transfer: DataTransfer
  /// The session's gate of connections per host, and the task's host there.
  private let gate: DataTransferGate
  private let host: String

  /// The transfer of task `id` for `request` in `session`; `events` gets what it reports, with the
  /// URL requested (after the session's preparation), once the gate has let go of its connection
  /// at its end.
  init(
    id: Int, request: URLRequest, session: URLSession, upload: UploadBody? = nil,
    events: @escaping @Sendable (DataTransfer.Event, _ url: URL) -> Void
  ) {
    let configuration = session.configuration
    let prepared = session.prepared(request)
    let timeout = request.timeoutInterval > 0 ? request.timeoutInterval : configuration.timeoutIntervalForRequest
    let (gate, host) = (session.dataTransfers, HostScheduler.hostKey(prepared.url))
    transfer = DataTransfer(
      url: prepared.url, method: prepared.method, headers: prepared.headers.map { ($0.name, $0.value) },
      body: prepared.body, upload: upload, requestTimeout: timeout,
      resourceTimeout: configuration.timeoutIntervalForResource,
      authenticate: { [weak session] challenge, answer in
        guard let session else { return answer(.answerWithResponse) }
        session.authenticate(task: id, challenge, answer)
      }
    ) { [weak session] event in
      if case .completed = event { gate.ended(task: id, host: host) }
      if case .response(let response) = event {
        session?.state.withLock { $0.tasks[id] }?.lock.withLock { $0.redirects = response.redirectCount }
        session?.storeCookies(response.setCookies, request: request)
      }
      events(event, prepared.url)
    }
    self.gate = gate
    self.host = host
  }

  /// Starts `task`'s transfer (once), when the gate allows.
  func resume(_ task: URLSessionTask) {
    guard task.state == .suspended else { return }
    task.change { $0.state = .running }
    task.noteResumed()
    gate.start(transfer, task: task.taskIdentifier, host: host)
  }

  /// Stops `task`'s transfer: the task completes with `NSURLErrorCancelled`.
  func cancel(_ task: URLSessionTask) {
    guard task.state != .completed else { return }
    task.change { $0.state = .canceling }
    transfer.cancel()
  }
}

/// A session's data tasks by host (`HostScheduler.hostKey`, as the session service counts its
/// transfers): at most `limit` run at once to one host (its configuration's
/// `httpMaximumConnectionsPerHost`, 6 as on iOS), the rest waiting in the order they were
/// resumed, as Foundation queues requests past its connections. Tasks are known by their
/// identifiers, unique in their session.
final class DataTransferGate: Sendable {
  private let limit: Int
  private let hosts = Mutex<[String: Host]>([:])

  private struct Host: Sendable {
    var running: Set<Int> = []
    var waiting: [(task: Int, transfer: DataTransfer)] = []
  }

  init(limit: Int) { self.limit = max(1, limit) }

  /// Starts `transfer` (task `task`) to `host` now, or once one of the host's running tasks ends.
  func start(_ transfer: DataTransfer, task: Int, host: String) {
    let now = hosts.withLock { hosts in
      var entry = hosts[host, default: Host()]
      defer { hosts[host] = entry }
      guard entry.running.count < limit else {
        entry.waiting.append((task, transfer))
        return false
      }
      entry.running.insert(task)
      return true
    }
    if now { transfer.start() }
  }

  /// Task `task` to `host` ended (or was cancelled while it waited): its place goes to the next.
  func ended(task: Int, host: String) {
    let next = hosts.withLock { hosts -> DataTransfer? in
      guard var entry = hosts[host] else { return nil }
      defer { hosts[host] = entry.running.isEmpty && entry.waiting.isEmpty ? nil : entry }
      guard entry.running.remove(task) != nil else {
        entry.waiting.removeAll { $0.task == task }
        return nil
      }
      guard !entry.waiting.isEmpty else { return nil }
      let next = entry.waiting.removeFirst()
      entry.running.insert(next.task)
      return next.transfer
    }
    next?.start()
  }
}
