import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// One download, shaped like `URLSessionDownloadTask`: created suspended, started with `resume()`.
public final class DownloadTask: Sendable {
  /// What the task knows and who waits on it; changed by the caller's thread, the engine and the finisher.
  package struct Runtime {
    var record: DownloadTaskRecord
    var error: ProtFSError?
    /// Whether the caller fixed the file name, so Content-Disposition must not change it.
    var fileNameIsExplicit: Bool
    /// Attempts made since the last `resume()`.
    var attempts = 0
    /// The name the file would have had, when another task of the session had already placed one
    /// of that name in the same directory.
    var renamedFrom: String?
    /// An upload's snapshot still being copied by this process.
    var snapshotCopy: SnapshotCopy?
    /// Called with the settled state once it is persisted (or with the state left when the
    /// session is invalidated first).
    var waiters: [@Sendable (DownloadState) -> Void] = []
    /// Set by an invalidated session once it woke the waiters: nothing wakes a later one.
    var waitersReleased = false
    /// A `suspend()` of the running task is on its way to the finisher (the state says running
    /// until it settles).
    var suspending = false
    /// `resume()` came while `suspending`: the finisher resumes the task once it settled it.
    var resumesAfterSuspending = false
  }

  package let runtime: Mutex<Runtime>
  package let core: DownloadSessionCore

  /// The task's id in the task store.
  public let id: Int64
  /// The URL being downloaded.
  public let url: URL

  package init(record: DownloadTaskRecord, url: URL, fileNameIsExplicit: Bool, core: DownloadSessionCore) {
    id = record.id
    self.url = url
    self.core = core
    runtime = Mutex(Runtime(record: record, fileNameIsExplicit: fileNameIsExplicit))
  }

  /// The stored record as it is now.
  public var record: DownloadTaskRecord { runtime.withLock { $0.record } }
  /// Where the task is.
  public var state: DownloadState { runtime.withLock { $0.record.state } }
  /// The error a failed task ended with.
  public var error: ProtFSError? { runtime.withLock { $0.error } }
  /// The name the file would have had, when another task of this session had already placed a
  /// file of that name in the same directory and this one got a numbered name (`name (1).ext`).
  public var renamedFrom: String? { runtime.withLock { $0.renamedFrom } }
  /// Bytes received so far (`countOfBytesReceived`).
  public var countOfBytesReceived: Int64 { runtime.withLock { $0.record.bytesReceived } }
  /// Bytes expected in total, or -1 when unknown (`countOfBytesExpectedToReceive`).
  public var countOfBytesExpectedToReceive: Int64 { runtime.withLock { $0.record.bytesExpected } }
  /// Where the file is once completed.
  public var location: URL? {
    runtime.withLock {
      $0.record.state == .completed
        ? $0.record.destinationPath.map { URL(fileURLWithPath: $0, isDirectory: false) } : nil
    }
  }
  /// The temp file, while there is one.
  public var temporaryLocation: URL? {
    runtime.withLock { r in
      r.record.temporaryFileName.map {
        URL(fileURLWithPath: r.record.temporaryDirectory + "/" + $0, isDirectory: false)
      }
    }
  }

  /// The caller's description of the task, stored with it.
  public var taskDescription: String? {
    get { runtime.withLock { $0.record.taskDescription } }
    set {
      runtime.withLock { $0.record.taskDescription = newValue }
      core.persistDescription(newValue, of: self)
    }
  }

  /// The time before which the task does not begin (`URLSessionTask.earliestBeginDate`), kept with
  /// it: a resumed task waits for it, also in a later session; nil begins as soon as it is
  /// resumed. Set before `resume()`.
  public var earliestBeginDate: Date? {
    runtime.withLock { $0.record.earliestBegin.map { Date(timeIntervalSince1970: $0) } }
  }

  /// Sets `earliestBeginDate` and stores it with the task.
  public func setEarliestBeginDate(_ date: Date?) throws(ProtFSError) {
    let time = date?.timeIntervalSince1970
    // Only a time every printed form of a date can show.
    if let time, !time.isFinite || time.magnitude >= JSONStateFile.timestampLimit {
      throw ProtFSError(.invalidArgument, "A task's earliest begin date \(time) is not a time protfs can keep.")
    }
    try core.persistEarliestBegin(time, of: self)
    runtime.withLock { $0.record.earliestBegin = time }
  }

  /// Starts or continues the transfer from the bytes already in the temp file. Besides a suspended
  /// task, a failed one that kept its temp file (stopped when the device locked, or cancelled with
  /// resume data) can be resumed.
  public func resume() { core.resume(self) }

  /// Stops the transfer, keeping the temp file, so that `resume()` can continue it.
  public func suspend() { core.stop(self, .suspend) }

  /// Stops the transfer and deletes its temp file; the task fails with a cancellation error.
  /// Returns at once; the engine lets go of the transfer on its own thread.
  public func cancel() { core.stop(self, .cancel) }

  /// Stops the transfer, keeping the temp file, and hands out the data that
  /// `DownloadSession.downloadTask(withResumeData:)` continues from (nil when there is nothing to resume).
  public func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
    core.stop(self, .cancelProducingResumeData(completionHandler))
  }

  /// As `cancel(byProducingResumeData:)`, awaiting the data.
  public func cancelByProducingResumeData() async -> Data? {
    await withCheckedContinuation { continuation in
      cancel(byProducingResumeData: { continuation.resume(returning: $0) })
    }
  }

  /// Waits until the task is completed, failed or waiting for unlock, and returns that state; when
  /// the session is invalidated first, returns the state the task was left in.
  @discardableResult
  public func waitUntilSettled() async -> DownloadState {
    await withCheckedContinuation { continuation in
      whenSettled { continuation.resume(returning: $0) }
    }
  }

  /// Waits on the calling thread, not on an executor, until every one of `tasks` is completed,
  /// failed or waiting for unlock (or left by an invalidated session), and returns their states
  /// by id. The thread wakes once, when the last one settles: awaiting each task in turn resumes
  /// the waiter once per task, a thread handoff each, which for thousands of small downloads cost
  /// more than their files.
  public static func waitUntilAllSettled(_ tasks: [DownloadTask]) -> [Int64: DownloadState] {
    waitUntilAllSettled(tasks, unless: { false }) ?? [:]
  }

  /// As `waitUntilAllSettled(_:)`, asking `giveUp` every half second meanwhile: nil once it says
  /// to stop waiting (whoever waited went away).
  public static func waitUntilAllSettled(_ tasks: [DownloadTask], unless giveUp: () -> Bool) -> [Int64: DownloadState]?
  {
    guard !tasks.isEmpty else { return [:] }
    let states = Mutex<[Int64: DownloadState]>([:])
    let remaining = Atomic<Int>(tasks.count)
    let done = DispatchSemaphore(value: 0)
    for task in tasks {
      let id = task.id
      task.whenSettled { state in
        states.withLock { $0[id] = state }
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
      }
    }
    while done.wait(timeout: .now() + .milliseconds(500)) == .timedOut {
      if giveUp() { return nil }
    }
    return states.withLock { $0 }
  }

  /// Calls `body` with the settled state: now, when the task is settled already or its session
  /// was invalidated (with the state it was left in), else once its outcome is persisted or the
  /// session is invalidated.
  private func whenSettled(_ body: @escaping @Sendable (DownloadState) -> Void) {
    let settled: DownloadState? = runtime.withLock { r in
      if r.record.state.isSettled || r.waitersReleased { return r.record.state }
      r.waiters.append(body)
      return nil
    }
    if let settled { body(settled) }
  }

  /// Sets the state and error; returns the new record and the waiters to wake once it is persisted.
  package func transition(
    to state: DownloadState, error: ProtFSError? = nil, update: (inout DownloadTaskRecord) -> Void = { _ in }
  ) -> (record: DownloadTaskRecord, waiters: Waiters) {
    runtime.withLock { r in
      r.record.state = state
      r.error = error
      r.record.errorMessage = error?.description
      r.record.errorNumber = error?.errno
      r.record.failure = error
      update(&r.record)
      r.record.updatedAt = Date().timeIntervalSince1970
      var waiters: [@Sendable (DownloadState) -> Void] = []
      if state.isSettled { swap(&waiters, &r.waiters) }
      return (r.record, Waiters(callbacks: waiters, state: state))
    }
  }

  /// The callers of `waitUntilSettled()` to wake after a transition has been persisted.
  package struct Waiters: Sendable {
    var callbacks: [@Sendable (DownloadState) -> Void]
    var state: DownloadState
    func wake() { for callback in callbacks { callback(state) } }
  }
}
