import Foundation
import ProtFSSystem
import Synchronization

/// The shared innards of a `DownloadSession`: its store, engine, finisher and registry of tasks.
/// Tasks hold it, so a task outliving its session object still answers (and does nothing once the
/// session is invalidated).
///
/// `@unchecked Sendable`: `session`, `delegate`, `engine` and `finisher` are set once during the
/// session's initialiser, before any other thread can see this object; the rest is immutable or
/// guarded by a mutex.
package final class DownloadSessionCore: @unchecked Sendable {
  package let configuration: DownloadSessionConfiguration
  package let store: DownloadStore
  /// This session object's claim on its tasks in the store.
  package let owner = DownloadStore.makeOwner()
  package let tasks = Mutex<[Int64: DownloadTask]>([:])
  package let invalidated = Mutex<Bool>(false)
  package let continuation: AsyncStream<DownloadEvent>.Continuation
  package let events: AsyncStream<DownloadEvent>
  /// Whether `DownloadSession.events` was read: until then no event is made.
  package let eventsObserved = Atomic<Bool>(false)
  package let delegateQueue = DispatchQueue(label: "protfs.download.delegate")
  weak var session: DownloadSession?
  package var delegate: (any DownloadSessionDelegate)?
  package var engine: TransferEngine!
  package var finisher: DownloadFinisher!

  package init(configuration: DownloadSessionConfiguration, store: DownloadStore) {
    self.configuration = configuration
    self.store = store
    // Progress is a stream of snapshots: when nobody reads, keep only the newest events.
    (events, continuation) = AsyncStream.makeStream(of: DownloadEvent.self, bufferingPolicy: .bufferingNewest(4096))
  }

  package var isInvalidated: Bool { invalidated.withLock { $0 } }

  package func task(id: Int64) -> DownloadTask? { tasks.withLock { $0[id] } }

  // MARK: Commands from tasks

  package func resume(_ task: DownloadTask) {
    guard !isInvalidated else { return }
    let start = task.runtime.withLock { r -> Bool in
      // A running task whose suspension has not settled yet is resumed once it has: else the
      // suspension, settling after this, would leave it stopped for good.
      if r.record.state == .running && r.suspending {
        r.resumesAfterSuspending = true
        return false
      }
      // A suspended task starts, and so does a failed one that kept its temp file (stopped by the
      // device locking); a running one is already queued or transferring.
      let resumable = r.record.state == .failed && r.record.temporaryFileName != nil
      guard r.record.state == .suspended || resumable else { return false }
      r.error = nil
      r.record.errorMessage = nil
      r.record.errorNumber = nil
      r.record.failure = nil
      r.record.state = .running
      r.attempts = 0
      return true
    }
    guard start else { return }
    // Running again, it is no longer the settled task the store may not have taken yet.
    _ = unsaved.withLock { $0.removeValue(forKey: task.id) }
    engine.enqueue(task)
  }

  package func stop(_ task: DownloadTask, _ reason: StopReason) {
    guard !isInvalidated else {
      if case .cancelProducingResumeData(let reply) = reason { reply(nil) }
      return
    }
    task.runtime.withLock { r in
      if r.record.state == .running, case .cancel = reason { r.record.state = .canceling }
      // The latest of suspend and resume wins: a suspension asked now is not undone by a resume
      // asked before it.
      if case .suspend = reason {
        r.suspending = r.record.state == .running
        r.resumesAfterSuspending = false
      } else {
        r.suspending = false
        r.resumesAfterSuspending = false
      }
    }
    engine.stop(task, reason)
  }

  /// Applies the requests other processes left in the store for this session's tasks.
  package func applyRequests() {
    guard let requests = try? store.takeRequests(owner: owner) else { return }
    for (id, request) in requests {
      guard let task = task(id: id) else { continue }
      switch request {
      case .cancel: task.cancel()
      case .suspend: task.suspend()
      case .resume: task.resume()
      }
    }
  }

  // MARK: Persistence

  /// Writes progress records (the engine's periodic snapshot); a store error must not stop transfers,
  /// and the next snapshot tries again.
  package func persist(_ records: [DownloadTaskRecord]) {
    try? store.update(records)  // best effort: the next snapshot writes them again
  }

  /// Writes settled records before their waiters are woken. A store that cannot take them (a full
  /// disk) loses nothing: they wait in `unsaved`, the finisher writes them again (with its next
  /// batch, and every `unsavedRetryInterval` until the store takes them), and the session service
  /// delivers them from there meanwhile.
  package func persistSettled(_ records: [DownloadTaskRecord]) {
    let all = unsaved.withLock { waiting -> [DownloadTaskRecord] in
      guard !waiting.isEmpty else { return records }
      // A task settled again since (a resumed one) is written as it is now.
      for record in records { waiting[record.id] = nil }
      return waiting.values.sorted { $0.id < $1.id } + records
    }
    guard !all.isEmpty else { return }
    // Only the finisher's thread writes settled records (and `invalidate`, once it has ended), so
    // nothing settles between the update and the bookkeeping.
    let taken = (try? store.update(all)) != nil  // those not taken wait in `unsaved`
    unsaved.withLock { waiting in
      for record in all { waiting[record.id] = taken ? nil : record }
    }
  }

  /// Settled records the store did not take yet (by task id): the store still shows these tasks
  /// as they were before they settled.
  package let unsaved = Mutex<[Int64: DownloadTaskRecord]>([:])

  /// How long the finisher waits before writing `unsaved` records again.
  package static let unsavedRetryInterval = DispatchTimeInterval.milliseconds(200)

  /// Writes one record now, from the engine thread while the task transfers (the finisher does not
  /// touch it then, so this cannot undo a state it wrote).
  package func persistNow(_ record: DownloadTaskRecord) {
    try? store.update([record])  // best effort: the next snapshot writes it again
  }

  /// Writes a task's new description now; only that column, so a snapshot taken here cannot undo
  /// a state the finisher wrote meanwhile.
  package func persistDescription(_ description: String?, of task: DownloadTask) {
    // Best effort: a setter cannot throw, and the task's next write of its record carries it again.
    try? store.updateDescription(description, of: task.id)
  }

  package func persistEarliestBegin(_ time: Double?, of task: DownloadTask) throws(ProtFSError) {
    try store.updateEarliestBegin(time, of: task.id)
  }

  // MARK: Reporting

  /// Whether anyone reads the events.
  package var reportsEvents: Bool { eventsObserved.load(ordering: .sequentiallyConsistent) }

  package func notify(_ event: @autoclosure () -> DownloadEvent) {
    if reportsEvents { continuation.yield(event()) }
  }

  package func notifyProgress(_ task: DownloadTask, bytesWritten: Int64, total: Int64, expected: Int64) {
    notify(.progress(taskID: task.id, totalBytesWritten: total, totalBytesExpected: expected))
    guard let delegate, let session else { return }
    if task.kind == .upload {
      delegateQueue.async {
        delegate.downloadSession(
          session, task: task, didSendBodyData: bytesWritten, totalBytesSent: total,
          totalBytesExpectedToSend: expected)
      }
      return
    }
    delegateQueue.async {
      delegate.downloadSession(
        session, task: task, didWriteData: bytesWritten, totalBytesWritten: total, totalBytesExpectedToWrite: expected)
    }
  }

  /// `location` is made only when someone listens: thousands of small files make one URL each.
  package func notifyFinishedDownloading(_ task: DownloadTask, location makeLocation: () -> URL) {
    guard reportsEvents || delegateTakesFiles else { return }
    let location = makeLocation()
    notify(.finishedDownloading(taskID: task.id, temporaryLocation: location))
    guard delegateTakesFiles, let delegate, let session else { return }
    // Synchronous, as URLSession's: the temp file must still be there while the delegate looks at it.
    delegateQueue.sync { delegate.downloadSession(session, task: task, didFinishDownloadingTo: location) }
  }

  /// An upload's answer, before its completion.
  package func notifyResponse(_ task: DownloadTask, status: Int, body: Data) {
    notify(.receivedResponse(taskID: task.id, statusCode: status, body: body))
    guard let delegate, let session else { return }
    delegateQueue.async { delegate.downloadSession(session, task: task, didReceive: body) }
  }

  /// Whether the delegate is called with finished temp files (and so may move one away).
  package var delegateTakesFiles: Bool { delegate?.receivesFinishedDownloads ?? false }

  /// The completions of a batch, in order, in one turn of the delegate queue (thousands of small
  /// files make one hop per batch, not one per file).
  package func notifyCompleted(_ completions: [(task: DownloadTask, error: ProtFSError?)]) {
    guard let delegate, let session, !completions.isEmpty else { return }
    delegateQueue.async {
      for (task, error) in completions { delegate.downloadSession(session, task: task, didCompleteWithError: error) }
    }
  }

  // MARK: Shutdown

  /// Stops the engine (transfers stay `running` in the store), settles what is pending, saves
  /// progress and gives the tasks back to the store for the next session with this identifier.
  /// With `interrupting`, the tasks still running are recorded as interrupted (returned).
  @discardableResult
  package func invalidate(interrupting: Bool = false) -> [DownloadTaskRecord] {
    let first = invalidated.withLock { flag -> Bool in
      defer { flag = true }
      return !flag
    }
    guard first else { return [] }
    engine.shutdown()
    finisher.shutdown()
    let all = tasks.withLock { registry in
      let values = Array(registry.values)
      registry.removeAll()
      return values
    }
    // Nothing transfers any more: a task the engine left running was interrupted, and says so
    // (its waiters get that state, and the store keeps it with its progress).
    let now = Date().timeIntervalSince1970
    let interrupted = all.compactMap { task -> DownloadTaskRecord? in
      guard interrupting else { return nil }
      return task.runtime.withLock { r -> DownloadTaskRecord? in
        guard r.record.state == .running else { return nil }
        r.record.state = .interrupted
        r.record.updatedAt = now
        return r.record
      }
    }
    // Settled tasks were stored by the finisher before their waiters woke (those the store could
    // not take get a last try); the rest keep progress.
    persistSettled([])
    persist(all.map(\.record).filter { !$0.state.isSettled })
    // Best effort: tasks it leaves claimed are free once this process ends (the claim names it).
    try? store.release(owner: owner)
    // Nothing will settle these tasks in this session any more: their waiters get the state as it is.
    for task in all {
      let (state, waiters) = task.runtime.withLock { r in
        defer {
          r.waiters.removeAll()
          r.waitersReleased = true
        }
        return (r.record.state, r.waiters)
      }
      for waiter in waiters { waiter(state) }
    }
    continuation.finish()
    return interrupted.sorted { $0.id < $1.id }
  }
}
