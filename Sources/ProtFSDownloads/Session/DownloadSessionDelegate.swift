import Foundation
import ProtFSSystem

/// URLSession-style callbacks of a download session; every method has an empty default.
///
/// Called on the session's serial delegate queue. `didFinishDownloadingTo` is called synchronously
/// before the file is moved, so the temp file is still there while it runs.
public protocol DownloadSessionDelegate: AnyObject, Sendable {
  /// Bytes arrived for `task`.
  func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
    totalBytesExpectedToWrite: Int64)
  /// `task`'s bytes are all in the temp file at `location`.
  func downloadSession(_ session: DownloadSession, task: DownloadTask, didFinishDownloadingTo location: URL)
  /// An upload task sent body bytes (URLSession's `didSendBodyData`).
  func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64)
  /// An upload task's server answered with `data` (URLSession's `dataTask(_:didReceive:)`), before
  /// `didCompleteWithError`; the status is `task.responseStatus`.
  func downloadSession(_ session: DownloadSession, task: DownloadTask, didReceive data: Data)
  /// `task` completed (`error` nil) or failed; called once per task (waiting for unlock is not a completion).
  func downloadSession(_ session: DownloadSession, task: DownloadTask, didCompleteWithError error: ProtFSError?)
  /// Whether `didFinishDownloadingTo` is to be called (true by default). A delegate that never
  /// takes the temp file says false, sparing the finisher a synchronous call and a check per file.
  var receivesFinishedDownloads: Bool { get }
}

extension DownloadSessionDelegate {
  /// Does nothing.
  public func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
    totalBytesExpectedToWrite: Int64
  ) {}
  /// Does nothing.
  public func downloadSession(_ session: DownloadSession, task: DownloadTask, didFinishDownloadingTo location: URL) {}
  /// Does nothing.
  public func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {}
  /// Does nothing.
  public func downloadSession(_ session: DownloadSession, task: DownloadTask, didReceive data: Data) {}
  /// Does nothing.
  public func downloadSession(_ session: DownloadSession, task: DownloadTask, didCompleteWithError error: ProtFSError?)
  {}
  /// True: `didFinishDownloadingTo` is called.
  public var receivesFinishedDownloads: Bool { true }
}
