import Foundation

/// The session's own events, as Foundation's `URLSessionDelegate`. Every method but
/// `didFinishDownloadingTo` has a default that does nothing (Objective-C optional methods).
public protocol URLSessionDelegate: NSObjectProtocol, Sendable {
  /// The session was invalidated: at once for `invalidateAndCancel`, after the last outstanding
  /// task's calls for `finishTasksAndInvalidate`.
  func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?)
  /// Every event queued for this background session was delivered, after the app was woken with
  /// `handleEventsForBackgroundURLSession`: call the completion handler it was given.
  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession)
  /// A session-wide demand for credentials (server trust, client certificates, NTLM, Negotiate).
  /// A task run here meets none of these: its HTTP Basic and Digest demands go to the task's method.
  func urlSession(
    _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
}

/// A task's events, as Foundation's `URLSessionTaskDelegate`.
public protocol URLSessionTaskDelegate: URLSessionDelegate {
  /// The task completed; `error` is an `NSError` in `NSURLErrorDomain`, nil on success.
  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?)
  /// An upload's body bytes went out.
  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64)
  /// A streamed upload (or a request sent again from its start) needs its body: hand a new
  /// stream to `completionHandler` (nil: none, and the task fails).
  func urlSession(
    _ session: URLSession, task: URLSessionTask,
    needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void)
  /// The task's metrics, just before its `didCompleteWithError`.
  func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics)
  /// Never called here: a background task delayed by `earliestBeginDate` begins with its request as
  /// it was (declared so that code answering it compiles).
  func urlSession(
    _ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest,
    completionHandler: @escaping @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void)
  /// The server asked a task for credentials (HTTP Basic or Digest: a 401): answer with
  /// `completionHandler`, once. Only for the tasks the app runs itself (data tasks, a standard
  /// session's downloads and uploads); a background task's 401 is its answer.
  func urlSession(
    _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void)
}

/// A download task's events, as Foundation's `URLSessionDownloadDelegate`.
public protocol URLSessionDownloadDelegate: URLSessionTaskDelegate {
  /// The file is complete at `location`, which exists only until this returns: move it.
  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL)
  /// Bytes arrived.
  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
  /// A task made from resume data continues at `fileOffset`.
  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64,
    expectedTotalBytes: Int64)
}

/// A data or upload task's events, as Foundation's `URLSessionDataDelegate` (an upload task is a
/// data task: its server's reply arrives here).
public protocol URLSessionDataDelegate: URLSessionTaskDelegate {
  /// A data task's final response arrived, before its body: say with `completionHandler` whether
  /// the task goes on (`.allow`, the default) or ends (`.cancel`: `NSURLErrorCancelled`).
  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void)
  /// Bytes of the response body arrived.
  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data)
  /// The data task became `downloadTask` (the delegate answered its response `.becomeDownload`):
  /// the rest of its calls are the download task's.
  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask)
  /// Never called: the session keeps no response in a cache (declared so that code answering it
  /// compiles).
  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse,
    completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void)
}

extension URLSessionDelegate {
  /// Does nothing.
  public func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) {}
  /// Does nothing.
  public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {}
  /// The default handling.
  public func urlSession(
    _ session: URLSession, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) { completionHandler(.performDefaultHandling, nil) }
}

extension URLSessionTaskDelegate {
  /// Does nothing.
  public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {}
  /// Does nothing.
  public func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {}
  /// Does nothing.
  public func urlSession(
    _ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics
  ) {}
  /// Lets the request begin as it is.
  public func urlSession(
    _ session: URLSession, task: URLSessionTask, willBeginDelayedRequest request: URLRequest,
    completionHandler: @escaping @Sendable (URLSession.DelayedRequestDisposition, URLRequest?) -> Void
  ) { completionHandler(.continueLoading, nil) }
  /// Hands over no stream.
  public func urlSession(
    _ session: URLSession, task: URLSessionTask,
    needNewBodyStream completionHandler: @escaping @Sendable (InputStream?) -> Void
  ) { completionHandler(nil) }
  /// The default handling: a credential the storage holds for the space, else the 401 stands.
  public func urlSession(
    _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping @Sendable (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) { completionHandler(.performDefaultHandling, nil) }
}

extension URLSessionDownloadDelegate {
  /// Does nothing.
  public func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
  ) {}
  /// Does nothing.
  public func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64,
    expectedTotalBytes: Int64
  ) {}
}

extension URLSessionDataDelegate {
  /// Lets the task go on.
  public func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
  ) { completionHandler(.allow) }
  /// Does nothing.
  public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {}
  /// Does nothing.
  public func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask
  ) {}
  /// Keeps the proposed response.
  public func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, willCacheResponse proposedResponse: CachedURLResponse,
    completionHandler: @escaping @Sendable (CachedURLResponse?) -> Void
  ) { completionHandler(proposedResponse) }
}
