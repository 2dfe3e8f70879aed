import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// A delegate that moves the finished file away, as an iOS app's `didFinishDownloadingTo` does,
/// and counts completions.
final class MovingDelegate: DownloadSessionDelegate {
  /// Where the file goes.
  let target: String
  /// Every `didCompleteWithError` call's error.
  let completions = Mutex<[ProtFSError?]>([])

  init(target: String) { self.target = target }

  func downloadSession(_ session: DownloadSession, task: DownloadTask, didFinishDownloadingTo location: URL) {
    _ = rename(location.path, target)
  }

  func downloadSession(_ session: DownloadSession, task: DownloadTask, didCompleteWithError error: ProtFSError?) {
    completions.withLock { $0.append(error) }
    completed.signal()
  }

  /// Signalled at each `didCompleteWithError`.
  let completed = DispatchSemaphore(value: 0)

  /// Waits, off the cooperative pool, until `didCompleteWithError` has been called once more.
  func waitForCompletion() async {
    await withCheckedContinuation { continuation in
      DispatchQueue.global().async {
        self.completed.wait()
        continuation.resume()
      }
    }
  }
}

/// Handed-over tasks (their temp file kept for the app until acknowledged) and a delegate session's
/// single completion (docs/semantics.md §9).
@Suite("Download handover", .timeLimit(.minutes(1)))
struct DownloadsHandoverTests {
  let fixture: DownloadFixture
  let nginx: NginxServer

  init() throws {
    fixture = try DownloadFixture()
    nginx = try NginxServer()
  }

  @Test func delegateThatMovesTheFileCompletesOnceEvenWhenTheDestinationIsLocked() async throws {
    let url = try nginx.put(Data(DownloadFixture.bytes(100_000)), at: "moved.bin")
    let target = fixture.directory.path + "/moved-by-app.bin"
    let delegate = MovingDelegate(target: target)
    var configuration = fixture.configuration()
    let policy = SwitchableAccessPolicy(destination: .waitForUnlock)
    configuration.accessPolicy = policy
    let session = try DownloadSession(configuration: configuration, delegate: delegate)
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    // The task's waiters wake when it settles; its delegate hears of it on the delegate queue, which
    // may not have the call yet (under load it had not): wait for the call itself.
    await delegate.waitForCompletion()
    policy.set(destination: .allow)
    session.completeWaitingTasks()
    session.core.delegateQueue.sync {}
    #expect(delegate.completions.withLock { $0.count } == 1)
    #expect(delegate.completions.withLock { $0.first } == .some(nil))
    #expect(FileManager.default.fileExists(atPath: target))
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
    session.invalidate()
  }

  @Test func handedOverFileIsKeptUntilAcknowledgedThenDeletedUnlessMoved() async throws {
    let first = try nginx.put(Data(DownloadFixture.bytes(50_000)), at: "one.bin")
    let second = try nginx.put(Data(DownloadFixture.bytes(60_000)), at: "two.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    var requests = [DownloadRequest(url: first), DownloadRequest(url: second)]
    for i in requests.indices { requests[i].handsOver = true }
    let tasks = try session.downloadTasks(with: requests)
    for task in tasks { task.resume() }
    for task in tasks { #expect(await task.waitUntilSettled() == .completed) }
    #expect(fixture.destinationFiles.isEmpty)
    #expect(fixture.temporaryFiles.count == 2)
    let pending = try session.store.pendingDeliveries(session: session.identifier)
    #expect(pending.map(\.id) == tasks.map(\.id))
    let kept = try #require(pending[0].handedOverPath)
    let moved = fixture.directory.path + "/kept.bin"
    #expect(rename(kept, moved) == 0)
    try session.store.acknowledge(task: tasks[0].id)
    try session.store.acknowledge(task: tasks[1].id)
    #expect(FileManager.default.fileExists(atPath: moved))
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(try session.store.pendingDeliveries(session: session.identifier).isEmpty)
    #expect(try session.store.task(id: tasks[1].id)?.delivery == .delivered)
    session.invalidate()
  }

  @Test func deliveriesSurviveReopeningTheStore() async throws {
    let url = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "later.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    var request = DownloadRequest(url: url)
    request.handsOver = true
    let task = try session.downloadTasks(with: [request])[0]
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    session.invalidate()
    let store = try DownloadStore(path: fixture.storePath)
    let pending = try store.pendingDeliveries(session: fixture.configuration().identifier)
    #expect(pending.count == 1)
    #expect(pending.first?.handsOver == true)
    #expect(pending.first.flatMap(\.handedOverPath).map { FileManager.default.fileExists(atPath: $0) } == true)
  }
}
