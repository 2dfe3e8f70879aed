import Foundation
import ProtFSKit
import ProtFSTestSupport
import Synchronization

/// A delegate that records every call (and on which queue), so tests can follow the order.
final class RecordingDelegate: NSObject, URLSessionDownloadDelegate, URLSessionDataDelegate, @unchecked Sendable {
  let log = Mutex<[String]>([])
  let queues = Mutex<[OperationQueue?]>([])
  let errors = Mutex<[Int: NSError]>([:])
  let signal = DispatchSemaphore(value: 0)
  /// Run inside `didFinishDownloadingTo`, with the location.
  var onFinish: (@Sendable (URL) -> Void)?
  /// Run inside `didCompleteWithError`, before it is recorded.
  var onComplete: (@Sendable (URLSessionTask) -> Void)?

  private func record(_ line: String) {
    log.withLock { $0.append(line) }
    queues.withLock { $0.append(OperationQueue.current) }
    signal.signal()
  }

  /// Waits (off the pool) until `count` calls were recorded, at most 10 s; returns the log.
  func waitFor(_ count: Int) async -> [String] {
    await offPool { [self] in
      while log.withLock({ $0.count }) < count {
        if signal.wait(timeout: .now() + 10) == .timedOut { break }
      }
      return log.withLock { $0 }
    }
  }

  /// Waits (off the pool) until a call `line` was recorded, at most 10 s; returns the log.
  func waitFor(_ line: String) async -> [String] {
    await offPool { [self] in
      while !log.withLock({ $0.contains(line) }) {
        if signal.wait(timeout: .now() + 10) == .timedOut { break }
      }
      return log.withLock { $0 }
    }
  }

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    onFinish?(location)
    record("finish \(downloadTask.taskIdentifier) \(location.path)")
  }
  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
  ) { record("write \(downloadTask.taskIdentifier) \(totalBytesWritten)/\(totalBytesExpectedToWrite)") }
  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64,
    expectedTotalBytes: Int64
  ) { record("resumeAt \(downloadTask.taskIdentifier) \(fileOffset)") }
  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    onComplete?(task)
    if let error { errors.withLock { $0[task.taskIdentifier] = error as NSError } }
    record("complete \(task.taskIdentifier) \(error.map { String(($0 as NSError).code) } ?? "ok")")
  }
  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) { record("sent \(task.taskIdentifier) \(totalBytesSent)/\(totalBytesExpectedToSend)") }
  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    record("data \(dataTask.taskIdentifier) \(String(decoding: data, as: UTF8.self))")
  }
  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) { record("finishEvents") }
  func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) { record("invalid") }
}
