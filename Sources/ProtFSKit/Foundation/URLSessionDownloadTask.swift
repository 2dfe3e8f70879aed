import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

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
    do {
      let data = try backend.cancel(Int64(taskIdentifier), producingResumeData: true)
      resumeData.withLock { $0 = data }
      completionHandler(data)
    } catch {
      // Not cancelled by the service (gone, or it refused): no resume data, and the task
      // completes here with why, as `cancel()` does.
      completionHandler(nil)
      fail?(self, error)
    }
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
