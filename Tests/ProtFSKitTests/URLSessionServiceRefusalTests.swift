import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A task whose `resume()` or `cancel()` the session service cannot take (it is gone, or it
/// refuses) completes with why, where it would otherwise wait for ever: Apple's methods cannot
/// throw, so the delegate's `didCompleteWithError` is where the error goes.
@Suite struct URLSessionServiceRefusalTests {
  let url = URL(string: "http://example.test/file.bin")!
  let refusal = ProtFSError(.io, "The session service is gone.", errno: ECONNREFUSED)

  func refusingSession(_ identifier: String, _ delegate: RecordingDelegate) -> (URLSession, FakeSessionBackend) {
    let backend = FakeSessionBackend(identifier: identifier)
    let session = URLSession(
      configuration: .background(withIdentifier: identifier), delegate: delegate, delegateQueue: nil,
      backend: backend)
    return (session, backend)
  }

  /// A download resumed in a session whose service then refuses every call; its delegate.
  func runningTaskOfARefusingService(_ identifier: String) -> (URLSessionDownloadTask, RecordingDelegate) {
    let delegate = RecordingDelegate()
    let (session, backend) = refusingSession(identifier, delegate)
    let task = session.downloadTask(with: url)
    task.resume()
    backend.store.withLock { $0.refusal = refusal }
    return (task, delegate)
  }

  @Test func aResumeTheServiceCannotTakeCompletesTheTaskWithAnError() async {
    let delegate = RecordingDelegate()
    let (session, backend) = refusingSession("fake.refused.resume", delegate)
    let task = session.downloadTask(with: url)
    backend.store.withLock { $0.refusal = refusal }
    task.resume()
    let log = await delegate.waitFor(1)
    #expect(log.count == 1)
    #expect(log.first?.hasPrefix("complete \(task.taskIdentifier) ") == true)
    #expect(log.first != "complete \(task.taskIdentifier) ok")
    #expect(task.state == .completed)
    #expect(task.error != nil)
  }

  @Test func aCancelTheServiceCannotTakeCompletesTheTaskWithAnError() async {
    let (task, delegate) = runningTaskOfARefusingService("fake.refused.cancel")
    task.cancel()
    let log = await delegate.waitFor(1)
    #expect(log.first?.hasPrefix("complete \(task.taskIdentifier) ") == true)
    #expect(task.state == .completed)
  }

  @Test func cancellingForResumeDataThatTheServiceCannotTakeHandsNoneAndCompletesTheTask() async {
    let (task, delegate) = runningTaskOfARefusingService("fake.refused.resumedata")
    let handed = await withCheckedContinuation { continuation in
      task.cancel { continuation.resume(returning: $0) }
    }
    #expect(handed == nil)
    let log = await delegate.waitFor(1)
    #expect(log.first?.hasPrefix("complete \(task.taskIdentifier) ") == true)
    #expect(task.state == .completed)
  }

  @Test func aSuspensionTheServiceCannotTakeLeavesTheTaskRunning() {
    let (task, _) = runningTaskOfARefusingService("fake.refused.suspend")
    task.suspend()
    #expect(task.state == .running)
  }
}
