import Foundation
import ProtFSDownloads
import ProtFSSystem

/// What an app's background session asks of whoever runs its transfers (docs/semantics.md §9).
///
/// `SessionServiceClient` hands the transfers to the device's session service over its socket, so
/// that they go on while the app is suspended or gone; the tests have a fake of their own.
/// ProtFSKit's `URLSession` is written against this protocol only.
package protocol SessionBackend: AnyObject, Sendable {
  /// The session's identifier.
  var identifier: String { get }

  /// A suspended download task for `request` (or continuing `resumeData`, from
  /// `cancel(producingResumeData:)`), whose finished file is handed to the app through
  /// `SessionEvent.finishedDownloading` rather than placed anywhere.
  func createDownloadTask(_ request: SessionRequest, resumeData: Data?) throws(ProtFSError) -> SessionTaskSnapshot

  /// A suspended upload task sending the file at `path` (read under the lock rules and snapshotted
  /// now, so the app may delete it afterwards) with `request`'s method and headers.
  func createUploadTask(_ request: SessionRequest, fromFile path: String) throws(ProtFSError) -> SessionTaskSnapshot

  /// Starts or continues task `id`; a suspended task that has not begun waits until `notBefore`
  /// (`earliestBeginDate`), kept with it, when one is given.
  func resume(_ id: Int64, notBefore: Date?) throws(ProtFSError)
  /// Pauses task `id`, keeping what it has.
  func suspend(_ id: Int64) throws(ProtFSError)
  /// Cancels task `id`; with `producingResumeData`, returns the data `createDownloadTask` takes to
  /// continue it (nil when the task cannot be continued).
  func cancel(_ id: Int64, producingResumeData: Bool) throws(ProtFSError) -> Data?
  /// Sets task `id`'s description.
  func setDescription(_ description: String?, of id: Int64) throws(ProtFSError)

  /// The session's tasks that have not yet completed to the app, oldest first.
  func tasks() throws(ProtFSError) -> [SessionTaskSnapshot]

  /// Delivers the session's events to `handler`, in order per task: first those queued while
  /// nobody listened (completions kept for the app), then live ones. One subscriber at a time.
  func subscribe(_ handler: @escaping @Sendable (SessionEvent) -> Void) throws(ProtFSError)

  /// The app is done with task `id`'s completion (a finished download's `didFinishDownloadingTo`
  /// returned, another task's `didCompleteWithError`): a handed-over temp file still there is
  /// deleted, and the completion is never delivered again.
  func acknowledge(_ id: Int64) throws(ProtFSError)

  /// A finished download's `didFinishDownloadingTo` returned: its handed-over temp file still
  /// there is deleted, and its completion stays queued, without the file, until `acknowledge`.
  func acknowledgeFile(_ id: Int64) throws(ProtFSError)
  /// Asks for `queuedEventsDelivered` on the subscription once every waiting delivery went out
  /// there (after a wake from suspension).
  func markDelivered() throws(ProtFSError)

  /// The app invalidated the session: with `cancelling` (`invalidateAndCancel`) its unfinished
  /// tasks are cancelled; once none is unfinished (`finishTasksAndInvalidate` calls this after the
  /// last one completed) the session is gone, its identifier free for a new one. This object is
  /// detached from it either way.
  func invalidate(cancelling: Bool)
}

extension SessionBackend {
  /// Starts or continues task `id` at once.
  package func resume(_ id: Int64) throws(ProtFSError) { try resume(id, notBefore: nil) }
}

/// A task's request as the app built it (`URLRequest`'s parts protfs uses).
package struct SessionRequest: Sendable, Equatable, Codable {
  /// The URL.
  package var url: URL
  /// The HTTP method: GET for downloads; PUT or POST for uploads.
  package var method: String
  /// Header fields, in order.
  package var headers: [SessionHeader]
  /// The task's description (`taskDescription`).
  package var taskDescription: String?
  /// A download's body (`httpBody`), sent with a method other than GET or HEAD; an upload's body
  /// is its file. Snapshots carry none back.
  package var body: Data?

  /// Creates a request.
  package init(
    url: URL, method: String = "GET", headers: [SessionHeader] = [], taskDescription: String? = nil,
    body: Data? = nil
  ) {
    self.url = url
    self.method = method
    self.headers = headers
    self.taskDescription = taskDescription
    self.body = body
  }
}

extension SessionRequest {
  /// Whether a request with `method` (uppercase) carries its body: the download layer's rule.
  package static func sendsBody(_ method: String) -> Bool { DownloadRequest.sendsBody(method) }
}

/// One header field: the download layer's, which the service hands to the engine as it is.
package typealias SessionHeader = UploadHeader

/// A task as the app sees it.
package struct SessionTaskSnapshot: Sendable, Equatable, Codable {
  /// Download, upload, or data (a data task, run in the app's process: never the service's).
  package enum Kind: String, Sendable, Codable { case download, upload, data }
  /// The task's id (`taskIdentifier`), unique on the device.
  package var id: Int64
  /// Download or upload.
  package var kind: Kind
  /// The request it was created with.
  package var request: SessionRequest
  /// Running, suspended, canceling or completed, as URLSessionTask.State's names.
  package var state: String
  /// Bytes received (download) or of the response body (upload).
  package var bytesReceived: Int64
  /// Bytes expected to receive, -1 when unknown.
  package var bytesExpectedToReceive: Int64
  /// Bytes of the body sent (upload).
  package var bytesSent: Int64
  /// Bytes of the body to send (upload), 0 for a download.
  package var bytesExpectedToSend: Int64
  /// The HTTP status of the last response, 0 before one.
  package var statusCode: Int
  /// The header fields of a completed download's response, nil when not known.
  package var responseHeaders: [SessionHeader]?
  /// The failure of a completed task, nil when it succeeded or has not completed.
  package var error: ProtFSError?
  /// Why the system (not the app) cancelled the task, nil when it did not.
  package var cancelledReason: BackgroundTaskCancelledReason?
  /// What `createDownloadTask` takes to continue a failed download from the bytes it kept, nil
  /// when it cannot be continued.
  package var resumeData: Data?

  /// Creates a snapshot.
  package init(
    id: Int64, kind: Kind, request: SessionRequest, state: String, bytesReceived: Int64 = 0,
    bytesExpectedToReceive: Int64 = -1, bytesSent: Int64 = 0, bytesExpectedToSend: Int64 = 0, statusCode: Int = 0,
    error: ProtFSError? = nil, cancelledReason: BackgroundTaskCancelledReason? = nil, resumeData: Data? = nil,
    responseHeaders: [SessionHeader]? = nil
  ) {
    self.responseHeaders = responseHeaders
    self.id = id
    self.kind = kind
    self.request = request
    self.state = state
    self.bytesReceived = bytesReceived
    self.bytesExpectedToReceive = bytesExpectedToReceive
    self.bytesSent = bytesSent
    self.bytesExpectedToSend = bytesExpectedToSend
    self.statusCode = statusCode
    self.error = error
    self.cancelledReason = cancelledReason
    self.resumeData = resumeData
  }
}

/// Why the system cancelled a background task, as Apple's `NSURLErrorCancelledReason…` values
/// (`NSURLErrorBackgroundTaskCancelledReasonKey`'s value in the task's error).
package enum BackgroundTaskCancelledReason: Int, Sendable, Codable {
  /// The user force-quit the app (`NSURLErrorCancelledReasonUserForceQuitApplication`).
  case userForceQuitApplication = 0
  /// Background transfers are disabled (`NSURLErrorCancelledReasonBackgroundUpdatesDisabled`).
  case backgroundUpdatesDisabled = 1
  /// The system lacked the resources (`NSURLErrorCancelledReasonInsufficientSystemResources`).
  case insufficientSystemResources = 2
}

/// One delegate call to make, as the session's runner reports it. Codable: the service sends them
/// as JSON lines, and `protfs tasks events` prints them.
package enum SessionEvent: Sendable, Equatable, Codable {
  /// Bytes arrived for a download (`didWriteData`).
  case wroteData(task: Int64, bytesWritten: Int64, totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
  /// Body bytes went out for an upload (`didSendBodyData`).
  case sentBodyData(task: Int64, bytesSent: Int64, totalBytesSent: Int64, totalBytesExpectedToSend: Int64)
  /// A download's file is complete at `location` (`didFinishDownloadingTo`); the file stays until
  /// the task is acknowledged.
  case finishedDownloading(task: Int64, location: String)
  /// The final response of a data task, before its body (`dataTask(_:didReceive:completionHandler:)`):
  /// where it came from after redirects, its HTTP status and its header fields.
  case receivedResponse(task: Int64, url: String, statusCode: Int, headers: [SessionHeader])
  /// The response body of an upload, or a piece of a data task's (`dataTask(_:didReceive:)`), with
  /// its HTTP status.
  case receivedData(task: Int64, statusCode: Int, body: Data)
  /// The task completed, with its error if it failed (`didCompleteWithError`); sent once per task.
  case completed(task: Int64, snapshot: SessionTaskSnapshot, error: ProtFSError?)
  /// Every completion queued when the subscription began has been sent
  /// (`urlSessionDidFinishEvents(forBackgroundURLSession:)` follows once they are acknowledged).
  case queuedEventsDelivered

  /// The task the event is about, if any.
  package var taskID: Int64? {
    switch self {
    case .wroteData(let task, _, _, _), .sentBodyData(let task, _, _, _), .finishedDownloading(let task, _),
      .receivedResponse(let task, _, _, _), .receivedData(let task, _, _), .completed(let task, _, _):
      task
    case .queuedEventsDelivered: nil
    }
  }
}
