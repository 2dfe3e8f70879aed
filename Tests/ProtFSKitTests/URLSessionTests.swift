import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// ProtFSKit's URLSession over a fake backend: delegate calls, acknowledgements, errors.
@Suite struct URLSessionTests {
  let url = URL(string: "http://example.test/file.bin")!

  func session(_ backend: FakeSessionBackend, _ delegate: RecordingDelegate, queue: OperationQueue? = nil) -> URLSession
  {
    URLSession(
      configuration: .background(withIdentifier: backend.identifier), delegate: delegate, delegateQueue: queue,
      backend: backend)
  }

  /// `earliestBeginDate` goes to the session service with a background task's resume (in another
  /// session it does nothing: URLSessionDataTaskTests).
  @Test func anEarliestBeginDateReachesTheServiceWithABackgroundTasksResume() {
    let date = Date(timeIntervalSince1970: 2_000_000_000)
    let background = FakeSessionBackend()
    let task = session(background, RecordingDelegate()).downloadTask(with: url)
    #expect(task.earliestBeginDate == nil)
    task.earliestBeginDate = date
    #expect(task.earliestBeginDate == date)
    task.resume()
    #expect(background.store.withLock { $0.calls }.contains("resume \(task.taskIdentifier) not before 2000000000.0"))
  }

  @Test func downloadDelegateOrderTheFileAcknowledgedAfterTheFinishTheTaskAfterTheCompletion() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    delegate.onFinish = { _ in #expect(backend.store.withLock { $0.filesAcknowledged.isEmpty }) }
    delegate.onComplete = { _ in
      #expect(backend.store.withLock { ($0.filesAcknowledged.count, $0.acknowledged.count) } == (1, 0))
    }
    let session = session(backend, delegate)
    let task = session.downloadTask(with: url)
    task.taskDescription = "nightly"
    task.resume()
    #expect(task.state == .running)
    #expect(task.originalRequest?.url == url)
    let id = Int64(task.taskIdentifier)
    backend.post(.wroteData(task: id, bytesWritten: 10, totalBytesWritten: 10, totalBytesExpectedToWrite: 20))
    backend.post(.wroteData(task: id, bytesWritten: 10, totalBytesWritten: 20, totalBytesExpectedToWrite: 20))
    backend.post(.finishedDownloading(task: id, location: "/tmp/CFNetworkDownload_1.tmp"))
    backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    let log = await delegate.waitFor(4)
    #expect(
      log == [
        "write \(id) 10/20", "write \(id) 20/20", "finish \(id) /tmp/CFNetworkDownload_1.tmp", "complete \(id) ok",
      ])
    #expect(await offPool { backend.acknowledgement.wait(timeout: .now() + 10) } == .success)
    #expect(backend.store.withLock { $0.acknowledged } == [id])
    #expect(backend.store.withLock { $0.filesAcknowledged } == [id])
    #expect(task.state == .completed)
    #expect(task.countOfBytesReceived == 20)
    #expect(task.taskDescription == "nightly")
  }

  @Test func allTasksAndTasksAwaitTheTasksNotYetCompletedAsApplesAsyncAPIDoes() async throws {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    #expect(await session.allTasks.isEmpty)
    let download = session.downloadTask(with: url)
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-kit-\(UUID().uuidString)")
    try Data("body".utf8).write(to: file)
    defer { try? FileManager.default.removeItem(at: file) }
    let upload = session.uploadTask(with: URLRequest(url: url), fromFile: file)
    let all = await session.allTasks
    #expect(all.map(\.taskIdentifier) == [download.taskIdentifier, upload.taskIdentifier])
    // The same objects the app made, as on iOS.
    #expect(all.first === download && all.last === upload)
    let (data, uploads, downloads) = await session.tasks
    #expect(data.isEmpty && uploads.map(\.taskIdentifier) == [upload.taskIdentifier])
    #expect(downloads.map(\.taskIdentifier) == [download.taskIdentifier])
  }

  @Test func delegateCallsRunOnTheGivenQueue() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let session = session(backend, delegate, queue: queue)
    #expect(session.delegateQueue === queue)
    let task = session.downloadTask(with: url)
    backend.post(.completed(task: Int64(task.taskIdentifier), snapshot: backend.completedSnapshot(1), error: nil))
    _ = await delegate.waitFor(1)
    #expect(delegate.queues.withLock { $0 }.allSatisfy { $0 === queue })
    let own = self.session(FakeSessionBackend(identifier: "other"), RecordingDelegate())
    #expect(own.delegateQueue.maxConcurrentOperationCount == 1)
  }

  @Test func resumeDataRoundTrip() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    let task = session.downloadTask(with: url)
    task.resume()
    let got = DispatchSemaphore(value: 0)
    nonisolated(unsafe) var data: Data?
    task.cancel(byProducingResumeData: {
      data = $0; got.signal()
    })
    _ = await offPool { got.wait(timeout: .now() + 10) }
    #expect(data == Data("\(url.absoluteString) 42".utf8))
    let id = Int64(task.taskIdentifier)
    backend.post(
      .completed(task: id, snapshot: backend.completedSnapshot(id), error: ProtFSError(.cancelled, "Cancelled.")))
    _ = await delegate.waitFor(1)
    let error = delegate.errors.withLock { $0[Int(id)] }
    #expect(error?.domain == NSURLErrorDomain)
    #expect(error?.code == NSURLErrorCancelled)
    #expect(error?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data == data)
    let again = session.downloadTask(withResumeData: data!)
    #expect(again.originalRequest?.url == url)
    let next = Int64(again.taskIdentifier)
    backend.post(.wroteData(task: next, bytesWritten: 8, totalBytesWritten: 50, totalBytesExpectedToWrite: 100))
    #expect(await Array(delegate.waitFor(3).suffix(2)) == ["resumeAt \(next) 42", "write \(next) 50/100"])
  }

  @Test func errorsAreNSURLErrorDomainWithUnderlyingPOSIX() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    let file = URL(fileURLWithPath: "/device/Documents/report.locked")
    var request = URLRequest(url: url)
    request.httpMethod = "PUT"
    let upload = session.uploadTask(with: request, fromFile: file)
    upload.resume()
    #expect(await delegate.waitFor(1) == ["complete \(upload.taskIdentifier) \(NSURLErrorCannotCreateFile)"])
    let error = delegate.errors.withLock { $0[upload.taskIdentifier] }
    #expect(error?.domain == NSURLErrorDomain)
    let underlying = error?.userInfo[NSUnderlyingErrorKey] as? NSError
    #expect(underlying?.domain == NSPOSIXErrorDomain)
    #expect(underlying?.code == Int(EPERM))
    let task = session.downloadTask(with: url)
    let id = Int64(task.taskIdentifier)
    var quitSnapshot = backend.completedSnapshot(id)
    quitSnapshot.cancelledReason = .userForceQuitApplication
    backend.post(
      .completed(task: id, snapshot: quitSnapshot, error: ProtFSError(.cancelled, "The download was cancelled.")))
    _ = await delegate.waitFor(2)
    let quit = delegate.errors.withLock { $0[Int(id)] }
    #expect(quit?.code == NSURLErrorCancelled)
    #expect(
      quit?.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int
        == NSURLErrorCancelledReasonUserForceQuitApplication)
    #expect(quit?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data != nil)
  }

  @Test func recreatedSessionGetsTasksAndQueuedCallsThenFinishEvents() async {
    let backend = FakeSessionBackend(identifier: "fake.recreated")
    let first = session(backend, RecordingDelegate())
    let upload = first.uploadTask(with: URLRequest(url: url), fromFile: URL(fileURLWithPath: "/c/f"))
    let id = Int64(upload.taskIdentifier)
    // The first app's session goes away before its task's calls (invalidated here; the fake keeps
    // the task), so they are queued for the session made again.
    first.invalidateAndCancel()
    backend.post(.sentBodyData(task: id, bytesSent: 5, totalBytesSent: 5, totalBytesExpectedToSend: 5))
    backend.post(.receivedData(task: id, statusCode: 201, body: Data("{\"ok\":true}".utf8)))
    backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    BackgroundSessionEvents.wake(backend.identifier)
    let delegate = RecordingDelegate()
    let again = session(backend, delegate)
    let log = await delegate.waitFor(4)
    #expect(log == ["sent \(id) 5/5", "data \(id) {\"ok\":true}", "complete \(id) ok", "finishEvents"])
    #expect(backend.store.withLock { $0.acknowledged } == [id])
    _ = again
  }

  @Test func aSessionWokenFromSuspensionFinishesItsEventsOnlyAfterWhatItHadNotReadYet() async {
    let backend = FakeSessionBackend(identifier: "fake.woken")
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    let upload = session.uploadTask(with: URLRequest(url: url), fromFile: URL(fileURLWithPath: "/c/f"))
    let id = Int64(upload.taskIdentifier)
    // The session subscribed long ago. While the app was frozen the service wrote the task's
    // completion to the subscription; the app is woken before it read it.
    let completion = SessionEvent.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil)
    backend.store.withLock { $0.unread = [completion] }
    BackgroundSessionEvents.wake(backend.identifier)
    let log = await delegate.waitFor(2)
    #expect(log == ["complete \(id) ok", "finishEvents"])
    #expect(backend.store.withLock { $0.calls }.contains("mark delivered"))
  }

  @Test func requestHeaders() {
    var request = URLRequest(url: url)
    request.setValue("a", forHTTPHeaderField: "X-One")
    request.addValue("b", forHTTPHeaderField: "x-one")
    #expect(request.value(forHTTPHeaderField: "X-ONE") == "a,b")
    #expect(request.allHTTPHeaderFields == ["X-One": "a,b"])
    #expect(request.httpMethod == "GET")
  }
}
