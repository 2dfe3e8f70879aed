import Foundation
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// A session, as Foundation's `URLSession`, whose transfers run in the device's session service
/// (docs/semantics.md §9): they go on while the app is suspended or gone, and a session recreated
/// with the same background identifier gets its tasks and the delegate calls queued meanwhile.
///
/// Delegate calls run on `delegateQueue`, one at a time and in order per task. A finished
/// download's file is acknowledged to the service as soon as `didFinishDownloadingTo` returns, and
/// deleted then unless the delegate moved it (Apple: "move it before returning"); every task's
/// completion once `didCompleteWithError` returned. Each task completes to the app exactly once,
/// even when the app dies between the two calls (its next session gets the completion alone).
///
/// `@unchecked Sendable`: what changes lives in `state` (a `Mutex`), delegate calls go through
/// `pipeline` and `delegateQueue`, and the rest is immutable; the class is open, as Foundation's.
open class URLSession: NSObject, @unchecked Sendable {
  /// A copy of the configuration the session was made with.
  public let configuration: URLSessionConfiguration
  /// The delegate (held strongly until the session is invalidated, as Foundation does).
  public var delegate: (any URLSessionDelegate)? { state.withLock { $0.delegate } }
  /// The queue delegate calls and completion handlers run on.
  public let delegateQueue: OperationQueue
  /// The app's description of the session.
  open var sessionDescription: String? {
    get { state.withLock { $0.description } }
    set { state.withLock { $0.description = newValue } }
  }

  /// The session's identifier in the service.
  let identifier: String
  /// The service's session; nil when it could not be opened (`openError`).
  let backend: (any SessionBackend)?
  /// Why the service could not be reached: every task fails with it when resumed.
  let openError: ProtFSError?
  /// Hands events to `delegateQueue` one at a time, in arrival order.
  let pipeline = DispatchQueue(label: "ProtFSKit.URLSession")
  let state: Mutex<SessionState>

  /// What the session tracks; guarded by `state`.
  ///
  /// `@unchecked Sendable`: it holds the delegate and the tasks, which are not Sendable, and is only
  /// ever touched inside `state`'s lock.
  struct SessionState: @unchecked Sendable {
    var delegate: (any URLSessionDelegate)?
    var description: String?
    var tasks: [Int: URLSessionTask] = [:]
    var completed: Set<Int> = []
    var resumedAt: [Int: Int64] = [:]
    var queuedDelivered = false
    /// The app was woken for this session's events: the next `queuedEventsDelivered` mark (which
    /// comes after everything the service sent before it) ends them with `urlSessionDidFinishEvents`.
    var woken = false
    /// Finished downloads whose file was acknowledged, whose completion is still to come.
    var acknowledged: Set<Int> = []
    /// No new task may be created (`finishTasksAndInvalidate` or `invalidateAndCancel` was called).
    var invalidated = false
    /// After `finishTasksAndInvalidate`: the tasks whose completion the session still waits for.
    var outstanding: Set<Int>?
    /// The session is over: `didBecomeInvalidWithError` is on its way and events are dropped.
    var ended = false
    var nextLocalID = -1
  }

  /// A session with `configuration`, whose delegate calls run on `queue` (a new serial queue when nil).
  public convenience init(
    configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?
  ) {
    let identifier = configuration.identifier ?? "ProtFSKit.\(ProcessInfo.processInfo.processIdentifier).\(UUID())"
    var backend: (any SessionBackend)?
    var openError: ProtFSError?
    do {
      backend = try SessionServiceClient.open(configuration.sessionConfiguration(identifier: identifier))
    } catch {
      openError = error
    }
    self.init(
      configuration: configuration, delegate: delegate, delegateQueue: queue, identifier: identifier, backend: backend,
      openError: openError)
  }

  /// A session without a delegate.
  public convenience init(configuration: URLSessionConfiguration) {
    self.init(configuration: configuration, delegate: nil, delegateQueue: nil)
  }

  /// A session over `backend` (tests give a fake one).
  package convenience init(
    configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?,
    backend: any SessionBackend
  ) {
    self.init(
      configuration: configuration, delegate: delegate, delegateQueue: queue, identifier: backend.identifier,
      backend: backend, openError: nil)
  }

  init(
    configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?,
    identifier: String, backend: (any SessionBackend)?, openError: ProtFSError?
  ) {
    self.configuration = configuration.copied()
    if let queue {
      delegateQueue = queue
    } else {
      delegateQueue = OperationQueue()
      delegateQueue.maxConcurrentOperationCount = 1
      delegateQueue.name = "URLSession " + identifier
    }
    self.identifier = identifier
    self.backend = backend
    self.openError = openError
    state = Mutex(SessionState(delegate: delegate))
    super.init()
    guard let backend else { return }
    for snapshot in (try? backend.tasks()) ?? [] { _ = task(for: snapshot) }
    // A wake that came before this session was made is this session's.
    if BackgroundSessionEvents.register(self) { state.withLock { $0.woken = true } }
    do {
      try backend.subscribe { [weak self] event in self?.receive(event) }
    } catch {
      FileHandle.standardError.write(Data("URLSession \(identifier): \(error.description)\n".utf8))
    }
  }

  // MARK: Creating tasks

  /// A download of `url`.
  open func downloadTask(with url: URL) -> URLSessionDownloadTask {
    downloadTask(with: URLRequest(url: url))
  }

  /// A download of `request`.
  open func downloadTask(with request: URLRequest) -> URLSessionDownloadTask {
    makeTask(request) { backend throws(ProtFSError) in
      try backend.createDownloadTask(self.prepared(request), resumeData: nil)
    } as! URLSessionDownloadTask
  }

  /// A download continuing where `cancel(byProducingResumeData:)` (or a failure's
  /// `NSURLSessionDownloadTaskResumeData`) left off; `didResumeAtOffset` tells where.
  open func downloadTask(withResumeData resumeData: Data) -> URLSessionDownloadTask {
    let task =
      makeTask(nil, kind: .download) { backend throws(ProtFSError) in
        try backend.createDownloadTask(SessionRequest(url: URL(fileURLWithPath: "/")), resumeData: resumeData)
      } as! URLSessionDownloadTask
    state.withLock { $0.resumedAt[task.taskIdentifier] = task.countOfBytesReceived }
    return task
  }

  /// An upload of the file at `fileURL` with `request`'s method (PUT or POST) and headers. The
  /// file is read now under the lock rules and snapshotted, so the app may delete it afterwards.
  open func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> URLSessionUploadTask {
    makeTask(request, kind: .upload) { backend throws(ProtFSError) in
      // The file is the body: a request's own is ignored, as Foundation does.
      var sent = self.prepared(request)
      sent.body = nil
      return try backend.createUploadTask(sent, fromFile: fileURL.path)
    } as! URLSessionUploadTask
  }

  /// Apple's message for a data upload in a background session.
  static let dataUploadRefused = "Upload tasks from NSData are not supported in background sessions."
  /// Apple's message for a streamed upload in a background session.
  static let streamUploadRefused = "Upload tasks in background sessions must be from a file"

  /// An upload of `bodyData`. A background session refuses it as iOS does: NSGenericException,
  /// which nothing catches, so the app stops with a crash report naming it. Another session
  /// writes the data to a temporary file and uploads that.
  open func uploadTask(with request: URLRequest, from bodyData: Data) -> URLSessionUploadTask {
    if configuration.isBackground {
      UncaughtException.raise("NSGenericException", reason: Self.dataUploadRefused)
    }
    let file = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("protfskit-upload-\(UUID())")
    do {
      try bodyData.write(to: file)
    } catch {
      return failedTask(request, .upload, ProtFSError(.io, "Cannot keep the upload's body: \(error)."))
        as! URLSessionUploadTask
    }
    return uploadTask(with: request, fromFile: file)
  }

  /// An upload whose body a stream gives. A background session refuses it as iOS does
  /// (NSGenericException: the app stops with a crash report). Another session has no stream to
  /// read here (a request carries none, and the session asks no delegate for one): resuming the
  /// task fails it (`NSURLErrorUnsupportedURL`, with the reason); upload from a file instead.
  open func uploadTask(withStreamedRequest request: URLRequest) -> URLSessionUploadTask {
    if configuration.isBackground {
      UncaughtException.raise("NSGenericException", reason: Self.streamUploadRefused)
    }
    return failedTask(
      request, .upload,
      ProtFSError(.invalidArgument, "The upload's body stream cannot be read here: upload from a file instead."))
      as! URLSessionUploadTask
  }

  /// `request` with the configuration's timeout and additional headers.
  func prepared(_ request: URLRequest) -> SessionRequest {
    var request = request
    for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
      if let name = name as? String, request.value(forHTTPHeaderField: name) == nil {
        request.setValue("\(value)", forHTTPHeaderField: name)
      }
    }
    return request.sessionRequest
  }

  /// Apple's message for a task created after the session was invalidated.
  static let invalidatedRefusal = "Task created in a session that has been invalidated"

  /// A task the backend creates with `create`, or one that fails when resumed if it refuses.
  ///
  /// A task asked of an invalidated session ends the process, as on iOS, where `URLSession` raises
  /// an `NSGenericException` nothing catches: the bug shows here as it would on the phone.
  func makeTask(
    _ request: URLRequest?, kind: SessionTaskSnapshot.Kind = .download,
    _ create: (any SessionBackend) throws(ProtFSError) -> SessionTaskSnapshot
  ) -> URLSessionTask {
    if state.withLock({ $0.invalidated }) {
      UncaughtException.raise("NSGenericException", reason: Self.invalidatedRefusal)
    }
    guard let backend else {
      return failedTask(request, kind, openError ?? ProtFSError(.io, "The session service is unavailable."))
    }
    do {
      return task(for: try create(backend))
    } catch {
      return failedTask(request, kind, error)
    }
  }

  /// A task that never reached the service: resuming it completes it with `error`.
  func failedTask(_ request: URLRequest?, _ kind: SessionTaskSnapshot.Kind, _ error: ProtFSError) -> URLSessionTask {
    let id = state.withLock { state in
      defer { state.nextLocalID -= 1 }
      return state.nextLocalID
    }
    let fail: @Sendable (URLSessionTask) -> Void = { [weak self] task in self?.failLocally(task, error) }
    return kind.makeTask(id: id, request: request, backend: nil, creationError: error, failNow: fail)
  }

  /// The task object for `snapshot`, made the first time it is seen.
  func task(for snapshot: SessionTaskSnapshot) -> URLSessionTask {
    let id = Int(snapshot.id)
    let task = state.withLock { state in
      if let existing = state.tasks[id] { return existing }
      let made = snapshot.kind.makeTask(id: id, request: URLRequest(snapshot.request), backend: backend)
      state.tasks[id] = made
      return made
    }
    task.update(snapshot)
    return task
  }

  // MARK: Listing and invalidating

  /// The session's tasks not yet completed to the app, by kind, on the delegate queue.
  open func getTasksWithCompletionHandler(
    _ completionHandler:
      @escaping @Sendable ([URLSessionDataTask], [URLSessionUploadTask], [URLSessionDownloadTask])
      -> Void
  ) {
    let all = currentTasks()
    delegateQueue.addOperation {
      let uploads = all.compactMap { $0 as? URLSessionUploadTask }
      completionHandler([], uploads, all.compactMap { $0 as? URLSessionDownloadTask })
    }
  }

  /// Every task not yet completed to the app, on the delegate queue.
  open func getAllTasks(completionHandler: @escaping @Sendable ([URLSessionTask]) -> Void) {
    let all = currentTasks()
    delegateQueue.addOperation { completionHandler(all) }
  }

  /// Every task not yet completed to the app (`getAllTasks`, for async code), as Apple's
  /// `allTasks`.
  open var allTasks: [URLSessionTask] {
    get async { await withCheckedContinuation { done in getAllTasks { done.resume(returning: $0) } } }
  }

  /// The session's tasks not yet completed to the app, by kind (`getTasksWithCompletionHandler`,
  /// for async code), as Apple's `tasks`.
  open var tasks: ([URLSessionDataTask], [URLSessionUploadTask], [URLSessionDownloadTask]) {
    get async {
      await withCheckedContinuation { done in
        getTasksWithCompletionHandler { data, uploads, downloads in done.resume(returning: (data, uploads, downloads)) }
      }
    }
  }

  /// The service's list, as task objects (the same objects each time).
  func currentTasks() -> [URLSessionTask] {
    guard let backend, let snapshots = try? backend.tasks() else { return [] }
    let done = state.withLock { $0.completed }
    return snapshots.filter { !done.contains(Int($0.id)) }.map { task(for: $0) }
  }

  /// Cancels every task and invalidates the session: `didBecomeInvalidWithError(nil)` comes last.
  open func invalidateAndCancel() { end(cancelling: true) }

  /// Invalidates the session, letting its tasks finish: no task may be created any more, the
  /// outstanding ones run to completion with their delegate calls, and after the last one's
  /// `didCompleteWithError` comes `didBecomeInvalidWithError(nil)` (at once when there is none).
  open func finishTasksAndInvalidate() {
    let first = state.withLock { state in
      defer { state.invalidated = true }
      return !state.invalidated
    }
    guard first else { return }
    // On the pipeline, so that a completion delivered before counts as done.
    pipeline.async {
      let outstanding = Set(self.currentTasks().map(\.taskIdentifier))
      self.state.withLock { $0.outstanding = outstanding }
      if outstanding.isEmpty { self.end(cancelling: false) }
    }
  }

  /// Ends the session: it leaves the service (with `cancelling`, cancelling its unfinished tasks)
  /// and the delegate gets `didBecomeInvalidWithError(nil)`, then is released.
  func end(cancelling: Bool) {
    let (first, woken) = state.withLock { state in
      defer {
        state.invalidated = true
        state.ended = true
        state.woken = false
      }
      return (!state.ended, state.woken)
    }
    guard first else { return }
    BackgroundSessionEvents.unregister(self, woken: woken)
    backend?.invalidate(cancelling: cancelling)
    pipeline.async {
      self.onDelegateQueue {
        self.delegate?.urlSession(self, didBecomeInvalidWithError: nil)
        self.state.withLock { $0.delegate = nil }
      }
    }
  }

  /// Runs `body` on the delegate queue and waits for it (from the pipeline only).
  func onDelegateQueue(_ body: @escaping @Sendable () -> Void) {
    if OperationQueue.current === delegateQueue {
      body()
    } else {
      delegateQueue.addOperations([BlockOperation(block: body)], waitUntilFinished: true)
    }
  }
}
