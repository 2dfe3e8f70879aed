import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// ProtFSKit's URLSession over a fake backend: a system cancellation's typed reason, the
/// completions a force-quit app gets when it makes its session again, the acknowledgement when
/// `didFinishDownloadingTo` returns, `finishTasksAndInvalidate`, and a task asked of an
/// invalidated session.
@Suite struct URLSessionCompletionTests {
  let url = URL(string: "http://example.test/file.bin")!

  func session(_ backend: FakeSessionBackend, _ delegate: RecordingDelegate) -> URLSession {
    URLSession(
      configuration: .background(withIdentifier: backend.identifier), delegate: delegate, delegateQueue: nil,
      backend: backend)
  }

  @Test func theCancelledReasonIsTypedNotReadFromTheMessage() async {
    let backend = FakeSessionBackend(identifier: "fake.reason")
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    let worded = session.downloadTask(with: url)
    let typed = session.downloadTask(with: url)
    let (a, b) = (Int64(worded.taskIdentifier), Int64(typed.taskIdentifier))
    // A message that says "force-quit" is not a reason.
    backend.post(
      .completed(task: a, snapshot: backend.completedSnapshot(a), error: ProtFSError(.cancelled, "A force-quit.")))
    var snapshot = backend.completedSnapshot(b)
    snapshot.cancelledReason = .insufficientSystemResources
    backend.post(.completed(task: b, snapshot: snapshot, error: ProtFSError(.cancelled, "Cancelled.")))
    _ = await delegate.waitFor(2)
    let errors = delegate.errors.withLock { $0 }
    #expect(errors[Int(a)]?.code == NSURLErrorCancelled)
    #expect(errors[Int(a)]?.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] == nil)
    #expect(errors[Int(b)]?.code == NSURLErrorCancelled)
    #expect(
      errors[Int(b)]?.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int
        == NSURLErrorCancelledReasonInsufficientSystemResources)
    #expect(BackgroundTaskCancelledReason.userForceQuitApplication.rawValue == 0)
    #expect(BackgroundTaskCancelledReason.backgroundUpdatesDisabled.rawValue == 1)
  }

  @Test func aForceQuitAppMakingItsSessionAgainGetsEachCancelledTaskWithResumeData() async {
    let backend = FakeSessionBackend(identifier: "fake.forcequit")
    // The tasks the service cancelled when the user force-quit the app, queued for its next launch.
    var ids: [Int64] = []
    for name in ["a", "b"] {
      let request = SessionRequest(url: URL(string: "http://example.test/\(name).bin")!)
      let id = (try? backend.createDownloadTask(request, resumeData: nil))!.id
      var snapshot = backend.completedSnapshot(id)
      snapshot.cancelledReason = .userForceQuitApplication
      snapshot.resumeData = Data("\(request.url.absoluteString) \(1000 + id)".utf8)
      backend.post(.completed(task: id, snapshot: snapshot, error: ProtFSError(.cancelled, "Cancelled.")))
      ids.append(id)
    }
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    #expect(await delegate.waitFor(2) == ids.map { "complete \($0) \(NSURLErrorCancelled)" })
    let errors = delegate.errors.withLock { $0 }
    for id in ids {
      let error = errors[Int(id)]
      #expect(error?.domain == NSURLErrorDomain)
      #expect(
        error?.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int
          == NSURLErrorCancelledReasonUserForceQuitApplication)
    }
    // The service's resume data, not a new cancel's: the download continues where it stopped.
    let data = errors[Int(ids[1])]?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data
    #expect(data == Data("http://example.test/b.bin \(1000 + ids[1])".utf8))
    let again = session.downloadTask(withResumeData: data!)
    again.resume()
    #expect(again.originalRequest?.url == URL(string: "http://example.test/b.bin"))
    let next = Int64(again.taskIdentifier)
    backend.post(.wroteData(task: next, bytesWritten: 8, totalBytesWritten: 2000, totalBytesExpectedToWrite: 4000))
    #expect(
      await Array(delegate.waitFor(4).suffix(2)) == ["resumeAt \(next) \(1000 + ids[1])", "write \(next) 2000/4000"])
    #expect(!backend.store.withLock { $0.calls }.contains { $0.hasPrefix("cancel") })
    #expect(backend.store.withLock { $0.acknowledged } == ids)
  }

  @Test func theFileIsDeletedAndAcknowledgedWhenDidFinishDownloadingReturnsTheTaskAfterItsCompletion() async throws {
    let backend = FakeSessionBackend(identifier: "fake.finish")
    let delegate = RecordingDelegate()
    let directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("protfskit-\(UUID())")
    try Foundation.FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? Foundation.FileManager.default.removeItem(at: directory) }
    let left = directory.appendingPathComponent("CFNetworkDownload_left.tmp")
    let taken = directory.appendingPathComponent("CFNetworkDownload_taken.tmp")
    let kept = directory.appendingPathComponent("kept.bin")
    try Data("left".utf8).write(to: left)
    try Data("taken".utf8).write(to: taken)
    delegate.onFinish = { location in
      #expect(backend.store.withLock { $0.filesAcknowledged }.isEmpty || location == taken)
      if location == taken { try? Foundation.FileManager.default.moveItem(at: taken, to: kept) }
    }
    let seen = SeenAtCompletion()
    delegate.onComplete = { task in
      seen.record(task.taskIdentifier, exists: Foundation.FileManager.default.fileExists(atPath: left.path))
      seen.acknowledged(task.taskIdentifier, backend.store.withLock { ($0.filesAcknowledged, $0.acknowledged) })
    }
    let session = session(backend, delegate)
    let first = session.downloadTask(with: url)
    let second = session.downloadTask(with: url)
    for (task, location) in [(first, left), (second, taken)] {
      let id = Int64(task.taskIdentifier)
      backend.post(.finishedDownloading(task: id, location: location.path))
      backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    }
    _ = await delegate.waitFor(4)
    let a = first.taskIdentifier
    let b = second.taskIdentifier
    // The file gone, and acknowledged, by the time didCompleteWithError runs; the task itself
    // once that returned (so that an app dying in between gets the completion again).
    #expect(seen.exists.withLock { $0[a] } == false)
    #expect(seen.filesThen.withLock { $0[a] } == [Int64(a)])
    #expect(seen.acknowledgedThen.withLock { $0[a] } == [])
    #expect(seen.filesThen.withLock { $0[b] } == [Int64(a), Int64(b)])
    #expect(seen.acknowledgedThen.withLock { $0[b] } == [Int64(a)])
    #expect(await offPool { backend.acknowledgement.wait(timeout: .now() + 10) } == .success)
    #expect(await offPool { backend.acknowledgement.wait(timeout: .now() + 10) } == .success)
    #expect(backend.store.withLock { $0.acknowledged } == [Int64(a), Int64(b)])
    #expect(backend.store.withLock { $0.filesAcknowledged } == [Int64(a), Int64(b)])
    #expect(Foundation.FileManager.default.fileExists(atPath: kept.path))
    #expect(!Foundation.FileManager.default.fileExists(atPath: left.path))
  }

  @Test func finishTasksAndInvalidateLetsOutstandingTasksCompleteThenInvalidates() async {
    let backend = FakeSessionBackend(identifier: "fake.finishing")
    let delegate = RecordingDelegate()
    let session = session(backend, delegate)
    let task = session.downloadTask(with: url)
    task.resume()
    let id = Int64(task.taskIdentifier)
    session.finishTasksAndInvalidate()
    // The outstanding task goes on and makes its calls, then the session is invalid.
    backend.post(.wroteData(task: id, bytesWritten: 5, totalBytesWritten: 5, totalBytesExpectedToWrite: 5))
    backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    #expect(await delegate.waitFor(3) == ["write \(id) 5/5", "complete \(id) ok", "invalid"])
    #expect(backend.store.withLock { $0.calls }.last == "invalidate false")
  }

  /// iOS raises an NSGenericException for a task asked of an invalidated session, which ends the
  /// app: so does ProtFSKit, with Apple's words, whichever kind of task and invalidation.
  @Test func aTaskAskedOfAnInvalidatedSessionEndsTheProcessAsOnIOS() async {
    let finishing = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let backend = FakeSessionBackend(identifier: "fake.refused")
      let session = URLSession(
        configuration: .background(withIdentifier: backend.identifier), delegate: nil, delegateQueue: nil,
        backend: backend)
      session.finishTasksAndInvalidate()
      _ = session.downloadTask(with: URL(string: "http://example.test/file.bin")!)
    }
    let cancelling = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let backend = FakeSessionBackend(identifier: "fake.refused.upload")
      let session = URLSession(
        configuration: .background(withIdentifier: backend.identifier), delegate: nil, delegateQueue: nil,
        backend: backend)
      session.invalidateAndCancel()
      var request = URLRequest(url: URL(string: "http://example.test/upload")!)
      request.httpMethod = "PUT"
      _ = session.uploadTask(with: request, fromFile: URL(fileURLWithPath: "/etc/hostname"))
    }
    for result in [finishing, cancelling] {
      let output = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
      #expect(
        output.contains(
          "Terminating app due to uncaught exception 'NSGenericException', reason: 'Task created in a session that has been invalidated'"
        ), "\(output)")
    }
  }

  @Test func finishTasksAndInvalidateWithNothingOutstandingAndInvalidateAndCancelAreAtOnce() async {
    let idle = FakeSessionBackend(identifier: "fake.idle")
    let delegate = RecordingDelegate()
    let session = session(idle, delegate)
    session.finishTasksAndInvalidate()
    #expect(await delegate.waitFor(1) == ["invalid"])
    #expect(idle.store.withLock { $0.calls } == ["invalidate false"])
    let busy = FakeSessionBackend(identifier: "fake.cancelled")
    let other = RecordingDelegate()
    let cancelled = self.session(busy, other)
    let task = cancelled.downloadTask(with: url)
    task.resume()
    cancelled.invalidateAndCancel()
    #expect(await other.waitFor(1) == ["invalid"])
    #expect(busy.store.withLock { $0.calls }.last == "invalidate true")
  }
}

/// What a delegate saw when `didCompleteWithError` ran, by task.
final class SeenAtCompletion: Sendable {
  /// Whether the file left at its location still existed.
  let exists = Mutex<[Int: Bool]>([:])
  /// The downloads whose file was acknowledged by then.
  let filesThen = Mutex<[Int: [Int64]]>([:])
  /// The tasks acknowledged by then.
  let acknowledgedThen = Mutex<[Int: [Int64]]>([:])

  /// Records whether the file existed for `task`.
  func record(_ task: Int, exists value: Bool) { exists.withLock { $0[task] = value } }
  /// Records the acknowledgements made when `task` completed: of files, and of tasks.
  func acknowledged(_ task: Int, _ ids: (files: [Int64], tasks: [Int64])) {
    filesThen.withLock { $0[task] = ids.files }
    acknowledgedThen.withLock { $0[task] = ids.tasks }
  }
}
