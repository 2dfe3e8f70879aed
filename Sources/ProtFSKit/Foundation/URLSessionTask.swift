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
  /// Completes the task with an error at once (on the delegate queue, in order): its creation
  /// failed, or the service could not be asked to run or cancel it.
  let fail: (@Sendable (URLSessionTask, ProtFSError) -> Void)?
  /// The completion handler of a convenience task, set once as it is made (nil for a delegate's).
  let completion = Mutex<Completion?>(nil)

  init(
    id: Int, request: URLRequest?, backend: (any SessionBackend)?, creationError: ProtFSError? = nil,
    fail: (@Sendable (URLSessionTask, ProtFSError) -> Void)? = nil
  ) {
    taskIdentifier = id
    originalRequest = request
    self.backend = backend
    self.creationError = creationError
    self.fail = fail
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
      if let creationError { fail?(self, creationError) }
      return
    }
    let notBefore = delaysBegin.load(ordering: .relaxed) ? earliestBeginDate : nil
    do {
      try backend.resume(Int64(taskIdentifier), notBefore: notBefore)
      change { $0.state = .running }
      noteResumed()
    } catch {
      // The service cannot run it (gone, or it refused): the task completes with why, where it
      // would otherwise wait for ever for a transfer that never begins.
      fail?(self, error)
    }
  }

  /// Pauses the task.
  open func suspend() {
    guard state == .running, let backend else { return }
    // A suspension the service could not take leaves the task as the service last reported it
    // (running), which is what it is: Apple's `suspend()` reports nothing either.
    if (try? backend.suspend(Int64(taskIdentifier))) != nil { change { $0.state = .suspended } }
  }

  /// Cancels the task: it completes with `NSURLErrorCancelled`.
  open func cancel() {
    guard state != .completed else { return }
    change { $0.state = .canceling }
    guard let backend else {
      if let creationError { fail?(self, creationError) }
      return
    }
    do {
      _ = try backend.cancel(Int64(taskIdentifier), producingResumeData: false)
    } catch {
      // Not cancelled by the service (gone, or it refused): the task completes here with why,
      // where it would otherwise stay `canceling` with no completion.
      fail?(self, error)
    }
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
    fail: (@Sendable (URLSessionTask, ProtFSError) -> Void)? = nil
  ) -> URLSessionTask {
    switch self {
    case .download:
      URLSessionDownloadTask(id: id, request: request, backend: backend, creationError: creationError, fail: fail)
    case .upload:
      URLSessionUploadTask(id: id, request: request, backend: backend, creationError: creationError, fail: fail)
    case .data:
      URLSessionDataTask(id: id, request: request, backend: backend, creationError: creationError, fail: fail)
    }
  }
}
