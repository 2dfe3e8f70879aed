import Foundation
import ProtFSSystem

/// What a download session reports, in order per task, on `DownloadSession.events`.
public enum DownloadEvent: Sendable {
  /// Bytes arrived: the total written so far and the total expected (-1 when unknown).
  case progress(taskID: Int64, totalBytesWritten: Int64, totalBytesExpected: Int64)
  /// The transfer finished and the temp file at `temporaryLocation` holds every byte
  /// (URLSession's `didFinishDownloadingTo`); the move to the destination comes next.
  case finishedDownloading(taskID: Int64, temporaryLocation: URL)
  /// The file is at `location`, its destination.
  case completed(taskID: Int64, location: URL)
  /// The destination is not available; the finished temp file waits at `temporaryLocation`.
  case waitingForUnlock(taskID: Int64, temporaryLocation: URL)
  /// The task was suspended; `resume()` continues it.
  case suspended(taskID: Int64)
  /// The device locked while the task was writing: the transfer is paused and continues by itself
  /// once the access policy allows writing its temp file again.
  case pausedForLock(taskID: Int64)
  /// An upload's server answered with `statusCode` and `body` (at most 16 MiB of it kept), before
  /// the task completes or fails (URLSession's `didReceive data`).
  case receivedResponse(taskID: Int64, statusCode: Int, body: Data)
  /// The task failed (or was cancelled) with `error`.
  case failed(taskID: Int64, error: ProtFSError)

  /// The task the event is about.
  public var taskID: Int64 {
    switch self {
    case .progress(let id, _, _), .finishedDownloading(let id, _), .completed(let id, _),
      .waitingForUnlock(let id, _), .suspended(let id), .pausedForLock(let id), .failed(let id, _),
      .receivedResponse(let id, _, _):
      return id
    }
  }
}
