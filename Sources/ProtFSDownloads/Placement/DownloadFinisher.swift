import Foundation
import ProtFSSystem
import Synchronization

/// Settles tasks off the engine thread: verifies and flushes finished temp files, moves them into
/// place, persists the outcome, then tells the waiters. Work that arrives together is done together:
/// one `syncfs` and one store transaction for a batch of small files instead of one each.
///
/// `@unchecked Sendable`: the job list is guarded by its mutex; the rest is used by the finisher thread.
package final class DownloadFinisher: @unchecked Sendable {
  package enum Job: Sendable {
    case complete(Transfer)
    case fail(DownloadTask, ProtFSError, deleting: TemporaryRemoval?)
    case stop(DownloadTask, StopReason)
    case exit(DispatchSemaphore)
  }

  private let jobs = Mutex<[Job]>([])
  /// The destination paths this session's tasks have placed files at: a second task of the same
  /// name gets a numbered one instead of replacing the first's file.
  package let claimed = Mutex<Set<String>>([])
  /// Destination directories opened for earlier placements, by path. Reusing one is safe because
  /// every batch of placements checks, after its renames, that the held directory is still the
  /// one at its path; it saves an open per file.
  package let destinations = Mutex<[String: DirectoryHandle]>([:])
  private let available = DispatchSemaphore(value: 0)
  /// Signalled by a job that must not wait out a group window.
  private let gathering = DispatchSemaphore(value: 0)
  // Unowned: the core owns this object and stops its thread before it goes away.
  unowned let core: DownloadSessionCore

  package init(core: DownloadSessionCore) { self.core = core }

  /// Starts the finisher's thread (in debug builds, with the starting thread's planned syscall
  /// failures, as the engine's thread gets them).
  package func start() {
    #if DEBUG
      let faults = SyscallFaults.current
      let thread = Thread { [self] in if let faults { faults.during { run() } } else { run() } }
    #else
      let thread = Thread { [self] in run() }
    #endif
    thread.name = "protfs.download.finisher"
    thread.start()
  }

  /// Queues `job`. A finished transfer waits out the group window for company, unless it is
  /// `last`: the engine has nothing else running or queued, so nothing would join it.
  package func post(_ job: Job, last: Bool = false) {
    // One signal per batch: the thread takes every pending job after each wait, so only the job
    // that finds the list empty has to wake it. A job that must not wait ends a group window.
    let (wasEmpty, urgent) = jobs.withLock { list in
      list.append(job)
      if case .complete = job { return (list.count == 1, last) }
      return (list.count == 1, true)
    }
    if wasEmpty { available.signal() }
    if urgent { gathering.signal() }
  }

  /// Whether every pending job is a finished transfer (which may wait for company).
  private func isOnlyCompletions() -> Bool {
    jobs.withLock { list in
      list.allSatisfy {
        if case .complete = $0 { return true } else { return false }
      }
    }
  }

  /// Finishes the jobs already posted, then ends the thread.
  package func shutdown() {
    let done = DispatchSemaphore(value: 0)
    post(.exit(done))
    done.wait()
  }

  private func run() {
    let window = core.configuration.effectiveGroupWindow
    while true {
      // Records the store could not take are written again while nothing else comes.
      if core.unsaved.withLock({ $0.isEmpty }) {
        available.wait()
      } else if available.wait(timeout: .now() + DownloadSessionCore.unsavedRetryInterval) == .timedOut {
        core.persistSettled([])
        continue
      }
      // Group commit: files that finish within the window join this batch's flush and transaction.
      // Only finished transfers wait; a stop, a failure or the end of the session goes at once.
      if window > .zero, isOnlyCompletions() {
        _ = gathering.wait(timeout: .now() + .nanoseconds(Int(Monotonic.nanoseconds(window))))
      }
      let batch = jobs.withLock { list in
        let taken = list
        list.removeAll(keepingCapacity: true)
        return taken
      }
      // Signals for jobs taken now must not cut the next window short.
      while gathering.wait(timeout: .now()) == .success {}
      if let exit = process(batch) {
        exit.signal()
        return
      }
      // The next transfers' temp files, made here rather than on the engine's thread.
      if core.configuration.usesUnnamedTemporaryFiles {
        core.engine.temporaryFiles.refill(
          fileSystem: core.configuration.fileSystem, policy: core.configuration.accessPolicy)
      }
    }
  }

  /// A settled task's record and what to do once it is persisted.
  package struct Outcome {
    var record: DownloadTaskRecord
    var waiters: DownloadTask.Waiters
    var task: DownloadTask
    var event: DownloadEvent?
    var error: ProtFSError?
    var notifyDelegate: Bool
  }

  /// The outcomes of one batch, in the order of its jobs. Placed files are settled together once
  /// their directories are checked (nil slots until then), keeping their places among the others.
  private struct BatchOutcomes {
    var outcomes: [Outcome?]
    var placements = PlacementBatch()
    var placedSlots: [Int] = []
    var placedFiles: [Transfer] = []

    /// Adds a settled outcome.
    mutating func append(_ outcome: Outcome) { outcomes.append(outcome) }

    /// Keeps a slot for `transfer`, placed in `placements` and settled with them.
    mutating func appendPlaced(_ transfer: Transfer) {
      placedSlots.append(outcomes.count)
      placedFiles.append(transfer)
      outcomes.append(nil)
    }

    /// Settles the files placed so far with `settle`, and closes them.
    mutating func settlePlacements(_ settle: (PlacementBatch) -> [Outcome]) {
      guard !placedSlots.isEmpty else { return }
      for (slot, outcome) in zip(placedSlots, settle(placements)) { outcomes[slot] = outcome }
      for transfer in placedFiles { transfer.file.close() }
      placements = PlacementBatch()
      placedSlots.removeAll()
      placedFiles.removeAll()
    }
  }

  private func process(_ batch: [Job]) -> DispatchSemaphore? {
    var exit: DispatchSemaphore?
    var failedChecks: [Outcome] = []
    var resumeDataReplies: [(@Sendable (Data?) -> Void, Data?)] = []
    var resuming: [DownloadTask] = []
    var completing: [Transfer] = []
    for job in batch {
      switch job {
      case .complete(let transfer) where transfer.upload == nil: completing.append(transfer)
      default: break
      }
    }
    let verified = verifyAndSync(completing, outcomes: &failedChecks)
    var finished = Set(verified.map { ObjectIdentifier($0) })
    var results = BatchOutcomes(outcomes: failedChecks)
    for job in batch {
      // Settles the files placed so far before a job that could see their tasks' states.
      if case .complete = job {} else { results.settlePlacements { settle($0) } }
      switch job {
      case .complete(let transfer) where transfer.upload != nil:
        results.append(completeUpload(transfer))
      case .complete(let transfer):
        guard finished.remove(ObjectIdentifier(transfer)) != nil else { continue }
        complete(transfer, into: &results)
      case .fail(let task, let error, let removal):
        // Without a file to delete, the temp file (if any) stays with the task for a later resume.
        removal?.remove()
        results.append(settle(task, .failed, error: error) { if removal != nil { $0.temporaryFileName = nil } })
      case .stop(let task, let reason):
        if let outcome = stop(task, reason, replies: &resumeDataReplies) { results.append(outcome) }
        if Self.resumesAfterStop(task, reason) { resuming.append(task) }
      case .exit(let semaphore):
        exit = semaphore
      }
    }
    results.settlePlacements { settle($0) }
    deliver(results.outcomes.map { $0! })
    for (reply, data) in resumeDataReplies { reply(data) }
    // Resumed while their suspension was on its way: running again once it is recorded.
    for task in resuming { core.resume(task) }
    return exit
  }

  /// Places the verified download `transfer`, its outcome settled now or kept for the placement
  /// batch of `results`.
  private func complete(_ transfer: Transfer, into results: inout BatchOutcomes) {
    // Whoever hears of the finished file (an event's reader, a delegate) may look for it there.
    if core.reportsEvents || core.delegateTakesFiles, let failure = Self.name(transfer) {
      transfer.file.close()
      results.append(settle(transfer.task, .failed, error: failure) { $0.temporaryFileName = nil })
      return
    }
    core.notifyFinishedDownloading(transfer.task) {
      URL(fileURLWithPath: transfer.temporaryPath, isDirectory: false)
    }
    switch finish(transfer, in: results.placements) {
    case .settled(let outcome):
      results.append(outcome)
      transfer.file.close()
    case .pending:
      results.appendPlaced(transfer)
    }
  }

  /// Whether `task`, stopped for `reason`, was resumed while its suspension was on its way (and so
  /// runs again once it is recorded); its suspension ends here either way.
  private static func resumesAfterStop(_ task: DownloadTask, _ reason: StopReason) -> Bool {
    guard case .suspend = reason else { return false }
    return task.runtime.withLock { r -> Bool in
      defer { (r.suspending, r.resumesAfterSuspending) = (false, false) }
      return r.resumesAfterSuspending
    }
  }

  /// Gives the finished temp file of `transfer` its name in the temp directory, where the task's
  /// record, the app or a delegate will look for it; returns the error when it cannot (the bytes
  /// then go with the descriptor).
  package static func name(_ transfer: Transfer) -> ProtFSError? {
    guard let failure = transfer.giveName() else { return nil }
    return ProtFSError.system(
      "keep the finished download of '\(transfer.task.url.absoluteString)' in", path: transfer.temporaryDirectory,
      errno: failure)
  }

  /// Persists the outcomes in one transaction, queues the delegate's completions, then wakes
  /// waiters and reports events: a waiter that then drains the delegate queue has seen its task's
  /// `didCompleteWithError`.
  package func deliver(_ outcomes: [Outcome]) {
    core.persistSettled(outcomes.map(\.record))
    core.notifyCompleted(outcomes.filter(\.notifyDelegate).map { ($0.task, $0.error) })
    for outcome in outcomes {
      outcome.waiters.wake()
      if let event = outcome.event { core.notify(event) }
    }
  }

  /// The outcome of moving `task` to `state`, with the event and delegate call it brings.
  package func settle(
    _ task: DownloadTask, _ state: DownloadState, error: ProtFSError? = nil, event explicit: DownloadEvent? = nil,
    update: (inout DownloadTaskRecord) -> Void = { _ in }
  ) -> Outcome {
    let (record, waiters) = task.transition(to: state, error: error, update: update)
    var event = explicit
    if event == nil, let error { event = .failed(taskID: task.id, error: error) }
    if event == nil, state == .suspended { event = .suspended(taskID: task.id) }
    // The delegate hears of a task's completion once: waiting for unlock is not one.
    return Outcome(
      record: record, waiters: waiters, task: task, event: event, error: error,
      notifyDelegate: state == .completed || state == .failed)
  }

  /// Completes an upload whose server answered 2xx: the snapshot is removed, the answer (already
  /// in the record) is stored with the task.
  private func completeUpload(_ t: Transfer) -> Outcome {
    t.directory.removeFile(t.temporaryFileName, ifStill: t.file.rawValue)
    t.file.close()
    let sent = t.position
    return settle(t.task, .completed, event: .completed(taskID: t.task.id, location: t.task.url)) { r in
      r.temporaryFileName = nil
      r.bytesReceived = sent
    }
  }

  /// Writes the last bytes of `transfers`, checks their digests and flushes the files to disk;
  /// returns those that passed.
  private func verifyAndSync(_ transfers: [Transfer], outcomes: inout [Outcome]) -> [Transfer] {
    var passed: [Transfer] = []
    for t in transfers {
      // The engine left a finished download's staged bytes to this thread.
      t.flush()
      t.returnStaging()
      t.releaseReservation()
      if let error = t.writeError {
        t.directory.removeFile(t.temporaryFileName, ifStill: t.file.rawValue)
        t.file.close()
        outcomes.append(settle(t.task, .failed, error: error) { $0.temporaryFileName = nil })
        continue
      }
      let expected = t.task.runtime.withLock { r in
        r.record.bytesReceived = t.position
        if r.record.bytesExpected < 0 { r.record.bytesExpected = t.position }
        return r.record.expectedSHA256
      }
      if let expected, let digest = t.digest {
        let actual = digest.finalizeHex()
        if actual != expected.lowercased() {
          t.directory.removeFile(t.temporaryFileName, ifStill: t.file.rawValue)
          t.file.close()
          let error = ProtFSError(
            .checksumMismatch,
            "The download of '\(t.task.url.absoluteString)' has SHA-256 \(actual), not the expected \(expected.lowercased()); nothing was kept.",
            remedy: .advice("check the expected digest, or whether the server's file changed"))
          outcomes.append(settle(t.task, .failed, error: error) { $0.temporaryFileName = nil })
          continue
        }
      }
      passed.append(t)
    }
    if core.configuration.synchronizesFiles {
      // One syncfs flushes a batch of small files in one journal commit; a lone file needs only fsync.
      if passed.count >= 4 {
        _ = Kernel.syncfs(passed[0].file.rawValue)
      } else {
        for t in passed { _ = Kernel.fsync(t.file.rawValue) }
      }
    }
    // The descriptors stay open until placement, which labels the file through them.
    return passed
  }

  private func stop(
    _ task: DownloadTask, _ reason: StopReason, replies: inout [(@Sendable (Data?) -> Void, Data?)]
  ) -> Outcome? {
    let record = task.record
    let cancelled = ProtFSError(
      .cancelled, "The \(record.kind) of '\(task.url.absoluteString)' was cancelled.", errno: ECANCELED)
    if !record.isResumable, case .cancelProducingResumeData(let reply) = reason {
      // An upload, or a download with another method than GET, starts over from byte 0 whatever
      // it sent or received: there is no resume data to give (iOS gives none either).
      replies.append((reply, nil))
      guard !(record.state == .completed || record.state == .failed) else { return nil }
      TemporaryRemoval(task, in: core.configuration.fileSystem)?.remove()
      return settle(task, .failed, error: cancelled) { $0.temporaryFileName = nil }
    }
    switch reason {
    case .suspend:
      guard record.state == .running || record.state == .suspended else { return nil }
      return settle(task, .suspended)
    case .cancel:
      guard !(record.state == .completed || record.state == .failed) else { return nil }
      TemporaryRemoval(task, in: core.configuration.fileSystem)?.remove()
      return settle(task, .failed, error: cancelled) { $0.temporaryFileName = nil }
    case .cancelProducingResumeData(let reply):
      guard !(record.state == .completed || record.state == .failed), let name = record.temporaryFileName else {
        replies.append((reply, nil))
        if record.state == .completed || record.state == .failed { return nil }
        return settle(task, .failed, error: cancelled)
      }
      var size: Int64 = record.bytesReceived
      let directory = try? core.configuration.fileSystem.openDirectory(record.temporaryDirectory, creating: false)
      if let status = try? directory?.status(name) { size = status.size }
      let data = DownloadResumeData(record: record, url: task.url, temporaryFileName: name, bytesReceived: size)
      replies.append((reply, data.encoded()))
      // The record keeps the temp file's name, so the cache manager sees it as resumable, not orphaned.
      return settle(task, .failed, error: cancelled) { $0.bytesReceived = size }
    }
  }
}
