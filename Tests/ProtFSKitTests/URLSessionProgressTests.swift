import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// A task's `progress` and its metrics, as Foundation's, for the tasks an app runs itself.
@Suite(.timeLimit(.minutes(2))) struct URLSessionProgressTests {
  /// Records the metrics and the order of the last calls.
  final class MetricsDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    let calls = Mutex<[String]>([])
    let metrics = Mutex<URLSessionTaskMetrics?>(nil)
    let completedProgress = Mutex<(Int64, Int64)?>(nil)
    let error = Mutex<NSError?>(nil)
    let done = DispatchSemaphore(value: 0)

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
      calls.withLock { $0.append("finish") }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
      calls.withLock { $0.append("metrics") }
      self.metrics.withLock { $0 = metrics }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      calls.withLock { $0.append("complete") }
      completedProgress.withLock { $0 = (task.progress.completedUnitCount, task.progress.totalUnitCount) }
      self.error.withLock { $0 = error.map { $0 as NSError } }
      done.signal()
    }

    func waitForCompletion() async -> Bool { await offPool { [self] in done.wait(timeout: .now() + 20) == .success } }
  }

  func session(_ delegate: MetricsDelegate) -> URLSession {
    URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.progress.\(UUID())"))
  }

  /// A download's progress counts its bytes out of the announced length, is whole when the task
  /// succeeds, and is the same object throughout; the metrics come just before the completion,
  /// with the request and its response.
  @Test func aDownloadsProgressAndMetrics() async throws {
    let body = DownloadFixture.bytes(400_000)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let delegate = MetricsDelegate()
    let task = session(delegate).downloadTask(with: server.url("report.bin"))
    let progress = task.progress
    #expect(progress.totalUnitCount == -1 && progress.completedUnitCount == 0)
    task.resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.error.withLock { $0 } == nil)
    #expect(task.progress === progress)
    #expect(progress.totalUnitCount == 400_000 && progress.completedUnitCount == 400_000)
    #expect(progress.fractionCompleted == 1)
    #expect(delegate.completedProgress.withLock { $0 }.map { [$0.0, $0.1] } == [400_000, 400_000])
    #expect(delegate.calls.withLock { $0 } == ["finish", "metrics", "complete"])
    let metrics = try #require(delegate.metrics.withLock { $0 })
    #expect(metrics.redirectCount == 0 && metrics.transactionMetrics.count == 1)
    let transaction = try #require(metrics.transactionMetrics.first)
    #expect(transaction.request?.url == server.url("report.bin"))
    #expect((transaction.response as? HTTPURLResponse)?.statusCode == 200)
    #expect(transaction.countOfResponseBodyBytesReceived == 400_000)
    #expect(metrics.taskInterval.duration >= 0)
  }

  /// An upload's progress counts the bytes sent; a data task's metrics count its redirects.
  @Test func anUploadsProgressAndARedirectedRequestsMetrics() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let delegate = MetricsDelegate()
    var request = URLRequest(url: server.url("items"))
    request.httpMethod = "POST"
    let upload = session(delegate).uploadTask(with: request, from: Data(repeating: 1, count: 90_000))
    #expect(upload.progress.totalUnitCount == 90_000)
    upload.resume()
    #expect(await delegate.waitForCompletion())
    #expect(upload.progress.completedUnitCount == 90_000 && upload.progress.fractionCompleted == 1)

    let redirected = MetricsDelegate()
    session(redirected).dataTask(with: server.url("redirect/302/moved")).resume()
    #expect(await redirected.waitForCompletion())
    #expect(redirected.error.withLock { $0 } == nil)
    #expect(redirected.metrics.withLock { $0 }?.redirectCount == 1)
  }

  /// Cancelling the progress cancels the task, as on iOS.
  @Test func cancellingTheProgressCancelsTheTask() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { server.stop() }
    let delegate = MetricsDelegate()
    let task = session(delegate).downloadTask(with: server.url("slow.bin"))
    task.resume()
    task.progress.cancel()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.error.withLock { $0 }?.code == NSURLErrorCancelled)
    server.openGate()
  }
}
