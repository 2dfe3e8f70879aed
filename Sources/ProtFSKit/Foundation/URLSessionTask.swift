import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// A transfer of a session, as Foundation's `URLSessionTask`: created suspended, started by
/// `resume()`. Its state and counts follow the session service's events.
///
/// `@unchecked Sendable`: what changes lives in `lock` (a `Mutex`), the rest is immutable; the class
/// is open, as Foundation's, so the compiler cannot prove it.
open class URLSessionTask: NSObject, @unchecked Sendable {
  /// Where a task is in its life, as Foundation's.
  public enum State: Int, Sendable {
    /// Transferring (or waiting to).
    case running = 0
    /// Paused.
    case suspended = 1
    /// Cancelled, its completion not yet delivered.
    case canceling = 2
    /// Completed; `error` says how.
    case completed = 3
  }

  /// What the session service knows of it; guarded by `lock`.
  struct Values {
    var state = State.suspended
    var description: String?
    var received: Int64 = 0
    var expectedToReceive: Int64 = -1
    var sent: Int64 = 0
    var expectedToSend: Int64 = 0
    var response: URLResponse?
    var error: (any Error)?
    /// For a task made with a completion handler: the body so far (a data or upload task's), and
    /// where a download's file waits for the handler.
    var body = Data()
    var location: String?
    /// The app's hints (`priority`, `countOfBytesClientExpectsTo…`), kept and never acted on.
    var priority = URLSessionTask.defaultPriority
    var expectsToSend = NSURLSessionTransferSizeUnknown
    var expectsToReceive = NSURLSessionTransferSizeUnknown
    /// `earliestBeginDate`, given to the service with the first `resume()` of a background task.
    var earliestBeginDate: Date?
    /// When the task was made, first resumed and completed, for its metrics.
    var createdAt = Date()
    var resumedAt: Date?
    var completedAt: Date?
    /// The redirects its request followed, when it ran here.
    var redirects = 0
    /// The task's own delegate, held until it completes.
    var delegate: (any URLSessionTaskDelegate)?
  }

  /// What a task made with a completion handler (a "convenience" task) hands its result to,
  /// instead of the delegate's data and completion calls: a data or upload task its body, a
  /// download its file (which exists while the handler runs).
  enum Completion: Sendable {
    case data(@Sendable (Data?, URLResponse?, (any Error)?) -> Void)
    case download(@Sendable (URL?, URLResponse?, (any Error)?) -> Void)
    /// `bytes(for:)`: the response, then the body's pieces as they come, then the end.
    case stream(ByteStreamSink)
  }

  /// The task's id in the session service, unique on the device.
  public let taskIdentifier: Int
  /// The request the task was created with.
  public let originalRequest: URLRequest?
  /// The request being carried out (the original one: redirects are followed by the service).
  public var currentRequest: URLRequest? { originalRequest }
  let lock = Mutex(Values())
  /// The session's runner of this task; nil when it could not be created (`creationError`).
  let backend: (any SessionBackend)?
  /// Why the service refused the task: it completes with this as soon as it is resumed.
  let creationError: ProtFSError?
  /// Called with the task when it is resumed and its creation had failed.
  let failNow: (@Sendable (URLSessionTask) -> Void)?
  /// The completion handler of a convenience task, set once as it is made (nil for a delegate's).
  let completion = Mutex<Completion?>(nil)

  init(
    id: Int, request: URLRequest?, backend: (any SessionBackend)?, creationError: ProtFSError? = nil,
    failNow: (@Sendable (URLSessionTask) -> Void)? = nil
  ) {
    taskIdentifier = id
    originalRequest = request
    self.backend = backend
    self.creationError = creationError
    self.failNow = failNow
    super.init()
    taskProgress.task = self
    // As Foundation's: cancelling, pausing or resuming the progress does so to the task.
    progress.cancellationHandler = { [weak self] in self?.cancel() }
    progress.pausingHandler = { [weak self] in self?.suspend() }
    progress.resumingHandler = { [weak self] in self?.resume() }
  }

  /// The task's progress, as Foundation's: bytes of the body received (an upload's: sent) out of
  /// those expected (-1 while unknown), the same object for the task's whole life, complete when
  /// the task succeeded. Cancelling it cancels the task.
  public var progress: Progress { taskProgress }
  /// `progress`, which tells its observers and the task's of its counts.
  let taskProgress = TaskProgress(totalUnitCount: -1)
  /// Who observes the task's properties (`addObserver`, `observe`).
  let keyValueObservers = KeyValueObservers()

  /// Brings `progress` up to the task's counts.
  func refreshProgress() {
    let (state, sent, toSend, received, toReceive, failed) = lock.withLock {
      ($0.state, $0.sent, $0.expectedToSend, $0.received, $0.expectedToReceive, $0.error != nil)
    }
    let uploading = self is URLSessionUploadTask
    var total = uploading ? toSend : toReceive
    let done = uploading ? sent : received
    if state == .completed, !failed, total < done || total < 0 { total = done }
    if progress.totalUnitCount != total { progress.totalUnitCount = total }
    if progress.completedUnitCount != done { progress.completedUnitCount = done }
  }

  /// Notes the first `resume()`, for the metrics.
  func noteResumed() { lock.withLock { $0.resumedAt = $0.resumedAt ?? Date() } }

  /// What the task's metrics say, once it completed.
  func metrics() -> URLSessionTaskMetrics {
    let values = lock.withLock { $0 }
    let end = values.completedAt ?? Date()
    let start = values.resumedAt ?? values.createdAt
    let transaction = URLSessionTaskTransactionMetrics(
      request: originalRequest, response: values.response, fetchStartDate: start,
      responseEndDate: values.response == nil ? nil : end, sent: values.sent, received: values.received)
    return URLSessionTaskMetrics(
      taskInterval: DateInterval(start: min(values.createdAt, start), end: max(end, start)),
      redirectCount: values.redirects, transactionMetrics: [transaction])
  }

  /// `priority`'s usual value.
  public static let defaultPriority: Float = 0.5
  /// `priority`'s low value.
  public static let lowPriority: Float = 0.25
  /// `priority`'s high value.
  public static let highPriority: Float = 0.75

  /// The app's hint of the task's importance, 0 to 1 (kept: the service runs tasks in order).
  open var priority: Float {
    get { lock.withLock { $0.priority } }
    set { change { $0.priority = min(1, max(0, newValue)) } }
  }
  /// The app's estimate of the bytes the task sends (kept: a hint, as on iOS).
  open var countOfBytesClientExpectsToSend: Int64 {
    get { lock.withLock { $0.expectsToSend } }
    set { change { $0.expectsToSend = newValue } }
  }
  /// The app's estimate of the bytes the task receives (kept: a hint, as on iOS).
  open var countOfBytesClientExpectsToReceive: Int64 {
    get { lock.withLock { $0.expectsToReceive } }
    set { change { $0.expectsToReceive = newValue } }
  }

  /// Whether the task belongs to a background session, where `earliestBeginDate` counts; set by
  /// the session as it makes the task.
  let delaysBegin = Atomic<Bool>(false)

  /// The earliest time the transfer may begin, as Foundation's: for a background session's task
  /// resumed for the first time, the session service begins it no earlier (also while the app is
  /// suspended or gone); no effect in another session. Set it before `resume()`.
  open var earliestBeginDate: Date? {
    get { lock.withLock { $0.earliestBeginDate } }
    set { change { $0.earliestBeginDate = newValue } }
  }

  /// The task's own delegate, as Foundation's (iOS 15): it gets the task's calls in place of the
  /// session's delegate (ProtFSKit cannot tell which methods it implements, so it gets them all),
  /// held until the task completes.
  open var delegate: (any URLSessionTaskDelegate)? {
    get { lock.withLock { $0.delegate } }
    set { lock.withLock { $0.delegate = newValue } }
  }

  /// Running, suspended, canceling or completed.
  public var state: State { lock.withLock { $0.state } }
  /// The server's response, once one arrived.
  public var response: URLResponse? { lock.withLock { $0.response } }
  /// Why the task failed (an `NSError` in `NSURLErrorDomain`), nil while running or on success.
  public var error: (any Error)? { lock.withLock { $0.error } }
  /// Bytes of the body received.
  public var countOfBytesReceived: Int64 { lock.withLock { $0.received } }
  /// Bytes of the body expected, -1 (`NSURLSessionTransferSizeUnknown`) when unknown.
  public var countOfBytesExpectedToReceive: Int64 { lock.withLock { $0.expectedToReceive } }
  /// Bytes of the request body sent.
  public var countOfBytesSent: Int64 { lock.withLock { $0.sent } }
  /// Bytes of the request body to send.
  public var countOfBytesExpectedToSend: Int64 { lock.withLock { $0.expectedToSend } }

  /// The app's description of the task, kept by the service (a relaunched app sees it again).
  public var taskDescription: String? {
    get { lock.withLock { $0.description } }
    set {
      change { $0.description = newValue }
      // Best effort: Apple's setter cannot fail; the task keeps it here whatever the service took.
      try? backend?.setDescription(newValue, of: Int64(taskIdentifier))
    }
  }

  /// Starts or continues the task.
  open func resume() {
    guard state != .completed, state != .canceling else { return }
    guard let backend else {
      failNow?(self)
      return
    }
    let notBefore = delaysBegin.load(ordering: .relaxed) ? earliestBeginDate : nil
    if (try? backend.resume(Int64(taskIdentifier), notBefore: notBefore)) != nil {
      change { $0.state = .running }
      noteResumed()
    }
  }

  /// Pauses the task.
  open func suspend() {
    guard state == .running, let backend else { return }
    if (try? backend.suspend(Int64(taskIdentifier))) != nil { change { $0.state = .suspended } }
  }

  /// Cancels the task: it completes with `NSURLErrorCancelled`.
  open func cancel() {
    guard state != .completed else { return }
    change { $0.state = .canceling }
    guard let backend else {
      failNow?(self)
      return
    }
    _ = try? backend.cancel(Int64(taskIdentifier), producingResumeData: false)
  }

  /// Takes what the service reports of the task.
  func update(_ snapshot: SessionTaskSnapshot) { change { Self.take(snapshot, into: &$0) } }

  /// Takes into `values` what the service reports of the task.
  static func take(_ snapshot: SessionTaskSnapshot, into values: inout Values) {
    values.received = max(values.received, snapshot.bytesReceived)
    if snapshot.bytesExpectedToReceive >= 0 { values.expectedToReceive = snapshot.bytesExpectedToReceive }
    values.sent = max(values.sent, snapshot.bytesSent)
    if snapshot.bytesExpectedToSend > 0 { values.expectedToSend = snapshot.bytesExpectedToSend }
    if snapshot.request.taskDescription != nil { values.description = snapshot.request.taskDescription }
    if snapshot.statusCode != 0, let url = snapshot.request.url as URL? {
      let fields = snapshot.responseHeaders.map { HTTPURLResponse.fields($0.map { ($0.name, $0.value) }) }
      let current = values.response as? HTTPURLResponse
      // A response of this process (with its fields) is not replaced by the bare one, nor one by
      // the same (its observers would hear of a change that is none).
      let same =
        current?.url == url && current?.statusCode == snapshot.statusCode
        && (fields == nil || current?.allHeaderFields as? [String: String] == fields)
      if !same, fields != nil || current?.allHeaderFields.isEmpty != false {
        values.response = HTTPURLResponse(
          url: url, statusCode: snapshot.statusCode, httpVersion: "HTTP/1.1", headerFields: fields)
      }
    }
    // A task the service finished is still running to the app until its `didCompleteWithError`
    // (which sets `.completed`): Apple's `.completed` means no delegate call is to come, and a
    // relaunched app that lists its tasks keeps those whose calls are still to come.
    switch State(serviceName: snapshot.state) {
    case .completed?: if values.state == .suspended { values.state = .running }
    case let state?: if values.state != .completed { values.state = state }
    case nil: break
    }
  }
}

extension URLSessionTask.State {
  /// The state the service names `name`.
  init?(serviceName name: String) {
    switch name {
    case "running": self = .running
    case "suspended": self = .suspended
    case "canceling": self = .canceling
    case "completed": self = .completed
    default: return nil
    }
  }
}

extension SessionTaskSnapshot.Kind {
  /// A task object of this kind.
  func makeTask(
    id: Int, request: URLRequest?, backend: (any SessionBackend)?, creationError: ProtFSError? = nil,
    failNow: (@Sendable (URLSessionTask) -> Void)? = nil
  ) -> URLSessionTask {
    switch self {
    case .download:
      URLSessionDownloadTask(id: id, request: request, backend: backend, creationError: creationError, failNow: failNow)
    case .upload:
      URLSessionUploadTask(id: id, request: request, backend: backend, creationError: creationError, failNow: failNow)
    case .data:
      URLSessionDataTask(id: id, request: request, backend: backend, creationError: creationError, failNow: failNow)
    }
  }
}

/// A task whose response body is delivered to the app (`dataTask(_:didReceive:)`).
///
/// `@unchecked Sendable`: adds nothing to `URLSessionTask`.
open class URLSessionDataTask: URLSessionTask, @unchecked Sendable {}

/// A data task (`dataTask(with:)`), run in the app's own process as iOS runs a standard session's:
/// its request by `DataTransfer`, its answer in memory, so the lock never stops it. Its events take
/// the session's way to the delegate, with ids of their own (below zero, as the service's are not).
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessDataTask: URLSessionDataTask, RunsInProcess, AnswersItsResponse, @unchecked Sendable {
  /// The transfer, made with the task.
  let run: InProcessTransfer

  /// Where the body goes once the delegate answered the response with `.becomeDownload`.
  let becameDownload = BecameDownload()

  init(id: Int, request: URLRequest, session: URLSession, upload: UploadBody? = nil) {
    let becameDownload = self.becameDownload
    run = InProcessTransfer(id: id, request: request, session: session, upload: upload) {
      [weak session] event, url in
      if let download = becameDownload.target {
        becameDownload.carry(event, to: download, url: url, session: session)
      } else {
        session?.receive(Self.event(event, task: Int64(id), url: url))
      }
    }
    super.init(id: id, request: request, backend: nil)
  }

  /// The session's event for the transfer's `event` (an upload's too).
  static func event(
    _ event: DataTransfer.Event, task: Int64, url: URL, kind: SessionTaskSnapshot.Kind = .data
  ) -> SessionEvent {
    switch event {
    case .response(let response):
      return .receivedResponse(
        task: task, url: response.url.absoluteString, statusCode: response.statusCode,
        headers: response.headers.map { SessionHeader(name: $0.name, value: $0.value) })
    case .data(let body):
      return .receivedData(task: task, statusCode: 0, body: body)
    case .sent(let bytes, let total, let expected):
      return .sentBodyData(task: task, bytesSent: bytes, totalBytesSent: total, totalBytesExpectedToSend: expected)
    case .completed(let failure):
      return .completed(
        task: task,
        snapshot: SessionTaskSnapshot(
          id: task, kind: kind, request: SessionRequest(url: url), state: "completed", error: failure),
        error: failure)
    }
  }

  /// Starts the request (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: a data task's request, once begun, runs to its end here (iOS may pause its reads).
  override func suspend() {}

  /// Stops the request: the task completes with `NSURLErrorCancelled`.
  override func cancel() { run.cancel(self) }
}

/// A task sending a file (a data task, as on iOS: the server's reply arrives as data).
///
/// `@unchecked Sendable`: adds nothing to `URLSessionDataTask`.
open class URLSessionUploadTask: URLSessionDataTask, @unchecked Sendable {}

/// A standard (not background) session's upload, run in the app's own process as iOS runs one:
/// its body is the app's bytes or a file the app opens when it makes the task (so the file's
/// class decides then, and the app may remove its name afterwards), read as it is sent, with
/// `didSendBodyData` as it goes; the server's reply comes as a data task's. It lives and dies
/// with the app, as a data task does.
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessUploadTask: URLSessionUploadTask, RunsInProcess, AnswersItsResponse, @unchecked Sendable {
  /// The transfer, made with the task.
  let run: InProcessTransfer

  init(id: Int, request: URLRequest, body: UploadBody, session: URLSession) {
    run = InProcessTransfer(id: id, request: request, session: session, upload: body) { [weak session] event, url in
      session?.receive(InProcessDataTask.event(event, task: Int64(id), url: url, kind: .upload))
    }
    super.init(id: id, request: request, backend: nil)
    switch body {
    case .data(let data): change { $0.expectedToSend = Int64(data.count) }
    case .file(_, let size, _): change { $0.expectedToSend = size }
    case .stream: change { $0.expectedToSend = NSURLSessionTransferSizeUnknown }
    case .failed: break
    }
    refreshProgress()
  }

  /// The body of an upload from the file at `path`, opened now by the app itself (without
  /// blocking: a FIFO with no writer is refused, not waited for).
  static func body(fromFile path: String) -> UploadBody {
    let fd: Int32
    switch valueOrErrno(.open, { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }) {
    case .success(let opened): fd = opened
    case .failure(let error): return .failed(ProtFSError.system("open the file to upload", path: path, errno: error))
    }
    let file = FileDescriptor(owning: fd)
    var status = stat()
    guard case .success = valueOrErrno(.stat, { fstat(fd, &status) }), status.st_mode & S_IFMT == S_IFREG else {
      return .failed(ProtFSError(.invalidArgument, "'\(path)' is not a regular file to upload.", path: path))
    }
    return .file(file, size: Int64(status.st_size), path: path)
  }

  /// Starts the upload (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: an upload, once begun, runs to its end here.
  override func suspend() {}

  /// Stops the upload: the task completes with `NSURLErrorCancelled`.
  override func cancel() { run.cancel(self) }
}

/// A task downloading to a file handed to `didFinishDownloadingTo`.
///
/// `@unchecked Sendable`: adds only `resumeData`, a `Mutex`.
open class URLSessionDownloadTask: URLSessionTask, @unchecked Sendable {
  /// Resume data handed out by `cancel(byProducingResumeData:)`, attached to the cancellation's error.
  let resumeData = Mutex<Data?>(nil)

  /// Cancels the task and hands `completionHandler` the data `downloadTask(withResumeData:)`
  /// continues from (nil when the download cannot be continued).
  open func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
    guard state != .completed, let backend else {
      completionHandler(nil)
      return
    }
    change { $0.state = .canceling }
    let data = try? backend.cancel(Int64(taskIdentifier), producingResumeData: true)
    resumeData.withLock { $0 = data ?? nil }
    completionHandler(data ?? nil)
  }
}

/// What a task's transfer took, as Foundation's `URLSessionTaskMetrics`, given to the delegate's
/// `didFinishCollecting` before `didCompleteWithError`: from the task's creation to its end, the
/// redirects followed (counted for the tasks run in the app; 0 for the session service's), and
/// one transaction for the request.
public final class URLSessionTaskMetrics: NSObject, @unchecked Sendable {
  // @unchecked: immutable; its transactions hold requests and responses made once.
  /// From the task's creation to its completion.
  public let taskInterval: DateInterval
  /// The redirects the request followed.
  public let redirectCount: Int
  /// The request and its response.
  public let transactionMetrics: [URLSessionTaskTransactionMetrics]

  init(taskInterval: DateInterval, redirectCount: Int, transactionMetrics: [URLSessionTaskTransactionMetrics]) {
    self.taskInterval = taskInterval
    self.redirectCount = redirectCount
    self.transactionMetrics = transactionMetrics
  }
}

/// One request and its response, as Foundation's `URLSessionTaskTransactionMetrics`: when it was
/// begun and answered, and its body's bytes. What libcurl does not report here (DNS, connection
/// and TLS times) is nil.
public final class URLSessionTaskTransactionMetrics: NSObject, @unchecked Sendable {
  // @unchecked: immutable after init.
  /// The request.
  public let request: URLRequest?
  /// Its response, if one came.
  public let response: URLResponse?
  /// When the task began fetching.
  public let fetchStartDate: Date?
  /// When the response's last byte arrived.
  public let responseEndDate: Date?
  /// Not measured here.
  public let domainLookupStartDate: Date? = nil
  /// Not measured here.
  public let connectStartDate: Date? = nil
  /// Not measured here.
  public let requestStartDate: Date? = nil
  /// Not measured here.
  public let responseStartDate: Date? = nil
  /// The protocol, `http/1.1`.
  public let networkProtocolName: String? = "http/1.1"
  /// Whether the connection was reused (not known here: false).
  public let isReusedConnection = false
  /// Bytes of the request body sent.
  public let countOfRequestBodyBytesSent: Int64
  /// Bytes of the response body received.
  public let countOfResponseBodyBytesReceived: Int64

  init(
    request: URLRequest?, response: URLResponse?, fetchStartDate: Date?, responseEndDate: Date?, sent: Int64,
    received: Int64
  ) {
    self.request = request
    self.response = response
    self.fetchStartDate = fetchStartDate
    self.responseEndDate = responseEndDate
    countOfRequestBodyBytesSent = sent
    countOfResponseBodyBytesReceived = received
  }
}

/// A data task's body turned into a download (`.becomeDownload`): the download task that carries
/// on and the file in the app's `tmp/` the rest of the body goes to, set before the transfer goes
/// past its response.
final class BecameDownload: Sendable {
  private let state = Mutex<(id: Int, file: DownloadFile, failure: ProtFSError?)?>(nil)

  /// The download task's id and file, once the data task became one.
  var target: (id: Int, file: DownloadFile)? { state.withLock { $0.map { ($0.id, $0.file) } } }

  /// The data task becomes download task `id`, writing `file` (or failing with `failure`, which
  /// its completion carries, when the file could not be made).
  func become(_ id: Int, writing file: DownloadFile, failure: ProtFSError? = nil) {
    state.withLock { $0 = (id, file, failure) }
  }

  /// The session's events for the transfer's `event`, as the download task's.
  func carry(
    _ event: DataTransfer.Event, to download: (id: Int, file: DownloadFile), url: URL, session: URLSession?
  ) {
    let task = Int64(download.id)
    switch event {
    case .data(let body):
      do throws(ProtFSError) {
        let (total, expected) = try download.file.append(body)
        session?.receive(
          .wroteData(
            task: task, bytesWritten: Int64(body.count), totalBytesWritten: total, totalBytesExpectedToWrite: expected))
      } catch {
        state.withLock { if $0?.failure == nil { $0?.failure = error } }
        (session?.state.withLock { $0.tasks[download.id] } as? RunsInProcess)?.run.transfer.cancel()
      }
    case .completed(let failure):
      let error = state.withLock { $0?.failure } ?? failure
      let (written, expected) = download.file.counts
      let snapshot = SessionTaskSnapshot(
        id: task, kind: .download, request: SessionRequest(url: url), state: "completed", bytesReceived: written,
        bytesExpectedToReceive: expected, error: error)
      if error == nil, let location = download.file.close() {
        session?.receive(.finishedDownloading(task: task, location: location))
      } else {
        download.file.discard()
      }
      session?.receive(.completed(task: task, snapshot: snapshot, error: error))
    case .response, .sent:
      break
    }
  }
}

/// The download task a data task became (`.becomeDownload`), carrying on its transfer.
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessBecameDownloadTask: URLSessionDownloadTask, RunsInProcess, @unchecked Sendable {
  let run: InProcessTransfer

  init(id: Int, request: URLRequest?, run: InProcessTransfer) {
    self.run = run
    super.init(id: id, request: request, backend: nil)
    change { $0.state = .running }
  }

  /// Nothing: it runs already.
  override func resume() {}
  /// Nothing: the transfer, once begun, runs to its end here.
  override func suspend() {}
  /// Stops the transfer: the task completes with `NSURLErrorCancelled`.
  override func cancel() { run.cancel(self) }
  /// Cancels; no resume data (the data task's request may not be a GET that continues).
  override func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
    cancel()
    completionHandler(nil)
  }
}
