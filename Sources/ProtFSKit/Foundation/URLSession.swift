import Foundation
import ProtFSDownloads
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
  /// The session's data tasks by host, `httpMaximumConnectionsPerHost` at a time.
  let dataTransfers: DataTransferGate
  /// The service's session: opened with a background session, and with another session when its
  /// first download or upload is made (its data tasks never need it).
  let connection: Mutex<Connection>
  /// The service's session; nil before it is opened, or when it could not be (`openError`).
  var backend: (any SessionBackend)? {
    if case .opened(let backend) = connection.withLock({ $0 }) { return backend }
    return nil
  }
  /// Why the service could not be reached: every task fails with it when resumed.
  var openError: ProtFSError? {
    if case .failed(let error) = connection.withLock({ $0 }) { return error }
    return nil
  }

  /// Hands events to `delegateQueue` one at a time, in arrival order.
  let pipeline = DispatchQueue(label: "ProtFSKit.URLSession")
  let state: Mutex<SessionState>

  /// A session with `configuration`, whose delegate calls run on `queue` (a new serial queue when nil).
  /// A background session reaches the service at once, for the tasks and events waiting for it.
  public convenience init(
    configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?
  ) {
    let identifier = configuration.identifier ?? "ProtFSKit.\(ProcessInfo.processInfo.processIdentifier).\(UUID())"
    self.init(
      configuration: configuration, delegate: delegate, delegateQueue: queue, identifier: identifier,
      connection: .deferred)
    if configuration.isBackground { _ = openedBackend() }
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
      connection: .deferred)
    attach(backend)
  }

  init(
    configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?,
    identifier: String, connection: Connection
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
    self.connection = Mutex(connection)
    dataTransfers = DataTransferGate(limit: configuration.httpMaximumConnectionsPerHost)
    state = Mutex(SessionState(delegate: delegate))
    super.init()
  }

  // MARK: Creating tasks

  /// A download of `url`.
  open func downloadTask(with url: URL) -> URLSessionDownloadTask {
    downloadTask(with: URLRequest(url: url))
  }

  /// A download of `request`: a background session's runs in the session service, out of the
  /// app's process; another session's runs in the app's own process, as on iOS
  /// (`InProcessDownloadTask`: it stops while the app is suspended and ends with it).
  open func downloadTask(with request: URLRequest) -> URLSessionDownloadTask {
    if !configuration.isBackground {
      return inProcessTask { InProcessDownloadTask(id: $0, request: request, session: self) }
    }
    return makeTask(request) { backend throws(ProtFSError) in
      try backend.createDownloadTask(self.prepared(request), resumeData: nil)
    } as! URLSessionDownloadTask
  }

  /// A download continuing where `cancel(byProducingResumeData:)` (or a failure's
  /// `NSURLSessionDownloadTaskResumeData`) left off; `didResumeAtOffset` tells where.
  /// A standard session's own resume data continues in the app, from the file it left in `tmp/`.
  open func downloadTask(withResumeData resumeData: Data) -> URLSessionDownloadTask {
    if !configuration.isBackground {
      // Data that is not resume data makes a task that fails when resumed, as one the service refuses.
      let resume: InProcessResumeData
      do {
        resume = try InProcessResumeData(resumeData)
      } catch {
        return failedTask(nil, .download, error) as! URLSessionDownloadTask
      }
      return inProcessTask {
        InProcessDownloadTask(id: $0, request: resume.request, session: self, resuming: resume)
      }
    }
    let task =
      makeTask(nil, kind: .download) { backend throws(ProtFSError) in
        try backend.createDownloadTask(SessionRequest(url: URL(fileURLWithPath: "/")), resumeData: resumeData)
      } as! URLSessionDownloadTask
    state.withLock { $0.resumedAt[task.taskIdentifier] = task.countOfBytesReceived }
    return task
  }

  /// An upload of the file at `fileURL` with `request`'s method and headers. A background
  /// session's (PUT or POST) goes to the session service, which reads the file now under the lock
  /// rules and snapshots it; another session's runs in the app, from the file opened now. Either
  /// way the app may delete the file afterwards.
  open func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> URLSessionUploadTask {
    guard configuration.isBackground else {
      return inProcessTask {
        InProcessUploadTask(
          id: $0, request: request, body: InProcessUploadTask.body(fromFile: fileURL.path), session: self)
      }
    }
    return makeTask(request, kind: .upload) { backend throws(ProtFSError) in
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
  /// which nothing catches, so the app stops with a crash report naming it. Another session sends
  /// it from memory, in the app.
  open func uploadTask(with request: URLRequest, from bodyData: Data) -> URLSessionUploadTask {
    if configuration.isBackground {
      UncaughtException.raise("NSGenericException", reason: Self.dataUploadRefused)
    }
    return inProcessTask { InProcessUploadTask(id: $0, request: request, body: .data(bodyData), session: self) }
  }

  /// An upload whose body a stream gives. A background session refuses it as iOS does
  /// (NSGenericException: the app stops with a crash report). Another session runs it in the app
  /// and, as Foundation, ignores the request's body and asks the delegate's `needNewBodyStream` for
  /// the stream when it sends the body (again after a 307, 308 or a credential); sent chunked.
  open func uploadTask(withStreamedRequest request: URLRequest) -> URLSessionUploadTask {
    if configuration.isBackground {
      UncaughtException.raise("NSGenericException", reason: Self.streamUploadRefused)
    }
    var sent = request
    sent.httpBody = nil
    sent.httpBodyStream = nil
    return inProcessTask {
      InProcessUploadTask(
        id: $0, request: sent, body: .stream(provider: bodyStreams(task: $0, first: nil)), session: self)
    }
  }

  // MARK: Data tasks

  /// A data task for `url`: its response and body go to the delegate (`URLSessionDataDelegate`).
  open func dataTask(with url: URL) -> URLSessionDataTask { dataTask(with: URLRequest(url: url)) }

  /// A data task for `request` (its method, headers and body), run in the app's own process as iOS
  /// runs a standard session's: its answer stays in memory, so the lock never stops it. In a
  /// background session too (iOS runs those only while the app is not suspended).
  open func dataTask(with request: URLRequest) -> URLSessionDataTask {
    inProcessTask { id in
      // A body stream is read as it is sent (then, sent again, asked of needNewBodyStream).
      let streamed = request.httpBody == nil ? request.httpBodyStream : nil
      return InProcessDataTask(
        id: id, request: request, session: self,
        upload: streamed.map { .stream(provider: bodyStreams(task: id, first: $0)) })
    }
  }

  /// A data task for `url` whose body, response and error go to `completionHandler` (on the
  /// delegate queue) instead of the delegate. A background session refuses it as iOS does.
  open func dataTask(
    with url: URL, completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionDataTask {
    dataTask(with: URLRequest(url: url), completionHandler: completionHandler)
  }

  /// A data task for `request` whose body, response and error go to `completionHandler`.
  open func dataTask(
    with request: URLRequest, completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionDataTask {
    refuseConvenienceTaskInBackground()
    let task = dataTask(with: request)
    task.completion.withLock { $0 = .data(completionHandler) }
    return task
  }

  // MARK: Downloads and uploads with a completion handler

  /// A download of `url` whose file (there while the handler runs), response and error go to
  /// `completionHandler`. A background session refuses it as iOS does.
  open func downloadTask(
    with url: URL, completionHandler: @escaping @Sendable (URL?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionDownloadTask {
    downloadTask(with: URLRequest(url: url), completionHandler: completionHandler)
  }

  /// A download of `request` whose file, response and error go to `completionHandler`.
  open func downloadTask(
    with request: URLRequest, completionHandler: @escaping @Sendable (URL?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionDownloadTask {
    refuseConvenienceTaskInBackground()
    let task = downloadTask(with: request)
    task.completion.withLock { $0 = .download(completionHandler) }
    return task
  }

  /// An upload of the file at `fileURL` whose reply, response and error go to `completionHandler`.
  open func uploadTask(
    with request: URLRequest, fromFile fileURL: URL,
    completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionUploadTask {
    refuseConvenienceTaskInBackground()
    let task = uploadTask(with: request, fromFile: fileURL)
    task.completion.withLock { $0 = .data(completionHandler) }
    return task
  }

  /// An upload of `bodyData` whose reply, response and error go to `completionHandler`.
  open func uploadTask(
    with request: URLRequest, from bodyData: Data?,
    completionHandler: @escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void
  ) -> URLSessionUploadTask {
    refuseConvenienceTaskInBackground()
    let task = uploadTask(with: request, from: bodyData ?? Data())
    task.completion.withLock { $0 = .data(completionHandler) }
    return task
  }

  /// The shared session: the default configuration, no delegate, completion handlers on a queue of
  /// its own, as Foundation's. Its data tasks run in the app's process; its downloads and uploads,
  /// as every session's, in the session service.
  open class var shared: URLSession { sharedSession }

  /// Tells the delegate queue's `completionHandler` once what the session wrote is written (it
  /// keeps nothing unwritten: the cookie storage writes as it goes).
  open func flush(completionHandler: @escaping @Sendable () -> Void) {
    delegateQueue.addOperation(completionHandler)
  }

  /// Empties the configuration's cookies, credentials and cache, then calls `completionHandler` on
  /// the delegate queue, as Foundation's `reset`.
  open func reset(completionHandler: @escaping @Sendable () -> Void) {
    if let storage = configuration.httpCookieStorage {
      for cookie in storage.cookies ?? [] { storage.deleteCookie(cookie) }
    }
    if let storage = configuration.urlCredentialStorage {
      for (space, credentials) in storage.allCredentials {
        for credential in credentials.values { storage.remove(credential, for: space) }
      }
    }
    configuration.urlCache?.removeAllCachedResponses()
    delegateQueue.addOperation(completionHandler)
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
      let data = all.compactMap { $0 as? URLSessionDataTask }.filter { !($0 is URLSessionUploadTask) }
      completionHandler(data, uploads, all.compactMap { $0 as? URLSessionDownloadTask })
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

}

/// The one shared session (`URLSession.shared`).
private let sharedSession = URLSession(configuration: .default)
