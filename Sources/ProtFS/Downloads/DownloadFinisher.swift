import CProtFSSys
import Foundation
import Synchronization

/// Settles tasks off the engine thread: verifies and flushes finished temp files, moves them into
/// place, persists the outcome, then tells the waiters. Work that arrives together is done together:
/// one `syncfs` and one store transaction for a batch of small files instead of one each.
///
/// `@unchecked Sendable`: the job list is guarded by its mutex; the rest is used by the finisher thread.
final class DownloadFinisher: @unchecked Sendable {
  enum Job: Sendable {
    case complete(Transfer)
    case fail(DownloadTask, ProtFSError, deleting: TemporaryRemoval?)
    case stop(DownloadTask, StopReason)
    case exit(DispatchSemaphore)
  }

  private let jobs = Mutex<[Job]>([])
  /// The destination paths this session's tasks have placed files at: a second task of the same
  /// name gets a numbered one instead of replacing the first's file.
  private let claimed = Mutex<Set<String>>([])
  /// Destination directories opened for earlier placements, by path. Reusing one is safe because
  /// every placement checks, after its rename, that the held directory is still the one at its
  /// path; it saves an open per file.
  private let destinations = Mutex<[String: DirectoryHandle]>([:])
  private let available = DispatchSemaphore(value: 0)
  /// Signalled by a job that must not wait out a group window.
  private let gathering = DispatchSemaphore(value: 0)
  // Unowned: the core owns this object and stops its thread before it goes away.
  private unowned let core: DownloadSessionCore

  init(core: DownloadSessionCore) { self.core = core }

  func start() {
    let thread = Thread { [self] in run() }
    thread.name = "protfs.download.finisher"
    thread.start()
  }

  func post(_ job: Job) {
    // One signal per batch: the thread takes every pending job after each wait, so only the job
    // that finds the list empty has to wake it. A job that must not wait ends a group window.
    let (wasEmpty, urgent) = jobs.withLock { list in
      list.append(job)
      if case .complete = job { return (list.count == 1, false) }
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
  func shutdown() {
    let done = DispatchSemaphore(value: 0)
    post(.exit(done))
    done.wait()
  }

  private func run() {
    let window = core.configuration.settleGroupWindow
    while true {
      available.wait()
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
    }
  }

  /// A settled task's record and what to do once it is persisted.
  struct Outcome {
    var record: DownloadTaskRecord
    var waiters: DownloadTask.Waiters
    var task: DownloadTask
    var event: DownloadEvent?
    var error: ProtFSError?
    var notifyDelegate: Bool
  }

  private func process(_ batch: [Job]) -> DispatchSemaphore? {
    var exit: DispatchSemaphore?
    var outcomes: [Outcome] = []
    var resumeDataReplies: [(@Sendable (Data?) -> Void, Data?)] = []
    var completing: [Transfer] = []
    for job in batch {
      switch job {
      case .complete(let transfer): completing.append(transfer)
      default: break
      }
    }
    let verified = verifyAndSync(completing, outcomes: &outcomes)
    var finished = Set(verified.map { ObjectIdentifier($0) })
    for job in batch {
      switch job {
      case .complete(let transfer):
        guard finished.remove(ObjectIdentifier(transfer)) != nil else { continue }
        core.notifyFinishedDownloading(transfer.task) {
          URL(fileURLWithPath: transfer.temporaryPath, isDirectory: false)
        }
        outcomes.append(place(transfer.task, transfer: transfer))
        transfer.file.close()
      case .fail(let task, let error, let removal):
        // Without a file to delete, the temp file (if any) stays with the task for a later resume.
        removal?.remove()
        outcomes.append(settle(task, .failed, error: error) { if removal != nil { $0.temporaryFileName = nil } })
      case .stop(let task, let reason):
        if let outcome = stop(task, reason, replies: &resumeDataReplies) { outcomes.append(outcome) }
      case .exit(let semaphore):
        exit = semaphore
      }
    }
    deliver(outcomes)
    for (reply, data) in resumeDataReplies { reply(data) }
    return exit
  }

  /// Persists the outcomes in one transaction, then wakes waiters and reports events.
  func deliver(_ outcomes: [Outcome]) {
    core.persistSettled(outcomes.map(\.record))
    for outcome in outcomes {
      outcome.waiters.wake()
      if let event = outcome.event { core.notify(event) }
      if outcome.notifyDelegate { core.notifyCompleted(outcome.task, error: outcome.error) }
    }
  }

  /// Moves a finished task's temp file to its destination if the access policy allows it now.
  ///
  /// `transfer` is the attempt that just wrote the file, with its temp directory and file still
  /// open; without one (a task that waited for unlock) both are opened again. Runs on the finisher
  /// thread, or on the caller's for `completeWaitingTasks()`.
  func place(_ task: DownloadTask, transfer: Transfer? = nil) -> Outcome {
    let record = task.record
    let url = task.url.absoluteString
    guard let name = record.temporaryFileName, let destination = record.destinationPath,
      let fileName = record.fileName
    else {
      return settle(
        task, .failed,
        error: ProtFSError(.notFound, "The finished download of '\(url)' has no temp file or file name to place."))
    }
    let temporary = record.temporaryDirectory + "/" + name
    switch core.configuration.accessPolicy.canPlaceDestination(destination) {
    case .allow:
      var heldDirectory = transfer?.directory
      let placedName = claim(fileName, in: record.destinationDirectory)
      do throws(ProtFSError) {
        try move(record, fileName: placedName, transfer: transfer, heldDirectory: &heldDirectory)
      } catch {
        // The bytes are removed from wherever the held directory is now, even if it was moved
        // out of the device: nothing of the download stays outside it.
        heldDirectory?.removeFile(name, ifStill: transfer?.file.rawValue)
        var failure = error
        failure.message = "The download of '\(url)' was not placed: \(error.message)"
        failure.hint = error.hint ?? "nothing was kept; download it again"
        return settle(task, .failed, error: failure) { $0.temporaryFileName = nil }
      }
      if placedName != fileName { task.runtime.withLock { $0.renamedFrom = fileName } }
      // The event's URL is made only for a listener.
      let event =
        core.reportsEvents
        ? DownloadEvent.completed(
          taskID: task.id,
          location: URL(fileURLWithPath: record.destinationDirectory, isDirectory: true).appendingPathComponent(
            placedName, isDirectory: false))
        : nil
      return settle(task, .completed, event: event) {
        $0.temporaryFileName = nil
        $0.fileName = placedName
      }
    case .waitForUnlock:
      return settle(
        task, .waitingForUnlock,
        event: .waitingForUnlock(
          taskID: task.id, temporaryLocation: URL(fileURLWithPath: temporary, isDirectory: false)))
    case .deny(let code):
      TemporaryRemoval(task, in: core.configuration.fileSystem)?.remove()
      return settle(
        task, .failed,
        error: ProtFSError(
          .protectedDataUnavailable,
          "Cannot move the download of '\(url)' to '\(destination)': \(String(cString: strerror(code))).",
          path: destination, errno: code, hint: "unlock the device and download it again")
      ) { $0.temporaryFileName = nil }
    }
  }

  /// `fileName`, or the first numbered variant of it (`name (1).ext`) that no other task of this
  /// session has placed in `directory`, now claimed for the caller. A file there from before the
  /// session is replaced, as the same download run again replaces its earlier result.
  private func claim(_ fileName: String, in directory: String) -> String {
    claimed.withLock { paths in
      var name = fileName
      var n = 0
      while paths.contains(directory + "/" + name) {
        n += 1
        name = DownloadFileName.numbered(fileName, n)
      }
      paths.insert(directory + "/" + name)
      return name
    }
  }

  /// Labels the finished temp file with its destination's class and renames it there, between
  /// directories opened without following a symlink. A temp directory that is no longer the one
  /// the bytes were written in (moved, replaced, or swapped for a link) fails the placement.
  /// `heldDirectory` is set to the temp directory as soon as it is open, for the caller's cleanup.
  private func move(
    _ record: DownloadTaskRecord, fileName: String, transfer: Transfer?, heldDirectory: inout DirectoryHandle?
  ) throws(ProtFSError) {
    let fileSystem = core.configuration.fileSystem
    let name = record.temporaryFileName!
    let current: DirectoryHandle
    do throws(ProtFSError) {
      current = try fileSystem.openDirectory(record.temporaryDirectory, creating: false)
    } catch {
      if heldDirectory == nil { throw error }
      throw Self.directoryChanged(record.temporaryDirectory, because: error)
    }
    if let held = heldDirectory {
      guard held.isSameDirectory(as: current) else { throw Self.directoryChanged(record.temporaryDirectory) }
    } else {
      heldDirectory = current
    }
    let source = heldDirectory!
    let destination = try destinationDirectory(record.destinationDirectory)
    // The attempt's own descriptor stays open for the caller to close; one opened here closes
    // when `file` goes away.
    let file: FileDescriptor
    if let transfer {
      file = transfer.file
    } else {
      file = try source.openDescriptor(name, flags: O_RDONLY | O_NONBLOCK)
    }
    try Self.requirePrivateFile(file.rawValue, at: source.pathOf(name))
    try fileSystem.label(file: file.rawValue, for: destination)
    switch valueOrErrno({ renameat(source.fd, name, destination.fd, fileName) }) {
    case .success:
      // The held destination may have been moved out of the device between its opening and the
      // rename: then the file is taken back out of it and the task fails.
      let now = try? fileSystem.openDirectory(record.destinationDirectory, creating: false)
      guard let now, now.isSameDirectory(as: destination) else {
        destination.removeFile(fileName, ifStill: file.rawValue)
        _ = destinations.withLock { $0.removeValue(forKey: record.destinationDirectory) }
        throw Self.directoryChanged(record.destinationDirectory)
      }
    case .failure(let e) where e == .crossDevice:
      let failure = TemporaryFile.moveAcrossFilesystems(name, in: source, to: fileName, in: destination) { fd in
        do throws(ProtFSError) {
          try fileSystem.label(file: fd, for: destination)
          return nil
        } catch {
          return error.errno ?? EIO
        }
      }
      if let failure {
        throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: failure)
      }
    case .failure(let e):
      throw ProtFSError.system("move the download to", path: destination.pathOf(fileName), errno: e.rawValue)
    }
  }

  /// The destination directory at `path`: the one opened for an earlier placement while it still
  /// exists (a directory removed and made again at the path is opened anew), else opened now.
  private func destinationDirectory(_ path: String) throws(ProtFSError) -> DirectoryHandle {
    if let held = destinations.withLock({ $0[path] }), let status = try? held.status(), status.linkCount > 0 {
      return held
    }
    let opened = try core.configuration.fileSystem.openDirectory(path, creating: false)
    destinations.withLock { $0[path] = opened }
    return opened
  }

  /// Refuses to label, hand over or move anything but a regular file with one link: another link
  /// (made while the download ran) could be outside the device, and the label and owner would
  /// change that item too.
  private static func requirePrivateFile(_ fd: Int32, at path: String) throws(ProtFSError) {
    var status = stat()
    _ = try valueOrErrno { fstat(fd, &status) }.orThrow("read", path: path)
    guard status.st_mode & S_IFMT == S_IFREG, status.st_nlink == 1 else {
      throw ProtFSError(
        .invalidArgument,
        "The temp file '\(path)' is not a regular file with a single link (another name was linked to it); protfs does not move it.",
        path: path, hint: "nothing was kept; download it again")
    }
  }

  static func directoryChanged(_ path: String, because cause: ProtFSError? = nil) -> ProtFSError {
    var message =
      "the directory '\(path)' was moved, replaced or swapped for a symbolic link during the download"
    if let cause { message += " (\(cause.message.hasSuffix(".") ? String(cause.message.dropLast()) : cause.message))" }
    return ProtFSError(
      .symlink, message + "; the downloaded file was removed.", path: path, errno: ELOOP,
      hint: "leave the container's directories in place while a download runs, then download it again")
  }

  private func settle(
    _ task: DownloadTask, _ state: DownloadState, error: ProtFSError? = nil, event explicit: DownloadEvent? = nil,
    update: (inout DownloadTaskRecord) -> Void = { _ in }
  ) -> Outcome {
    let (record, waiters) = task.transition(to: state, error: error, update: update)
    var event = explicit
    if event == nil, let error { event = .failed(taskID: task.id, error: error) }
    if event == nil, state == .suspended { event = .suspended(taskID: task.id) }
    return Outcome(
      record: record, waiters: waiters, task: task, event: event, error: error, notifyDelegate: state.isSettled)
  }

  /// Checks digests and flushes the files of `transfers` to disk; returns those that passed.
  private func verifyAndSync(_ transfers: [Transfer], outcomes: inout [Outcome]) -> [Transfer] {
    var passed: [Transfer] = []
    for t in transfers {
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
            hint: "check the expected digest, or whether the server's file changed")
          outcomes.append(settle(t.task, .failed, error: error) { $0.temporaryFileName = nil })
          continue
        }
      }
      passed.append(t)
    }
    if core.configuration.synchronizesFiles {
      // One syncfs flushes a batch of small files in one journal commit; a lone file needs only fsync.
      if passed.count >= 4 {
        _ = protfs_syncfs(passed[0].file.rawValue)
      } else {
        for t in passed { _ = fsync(t.file.rawValue) }
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
      .cancelled, "The download of '\(task.url.absoluteString)' was cancelled.", errno: ECANCELED)
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
      let data = DownloadResumeData(
        url: task.url, bytesReceived: size, bytesExpected: record.bytesExpected,
        temporaryDirectory: record.temporaryDirectory, temporaryFileName: name,
        destinationDirectory: record.destinationDirectory, fileName: record.fileName, entityTag: record.entityTag,
        lastModified: record.lastModified, expectedSHA256: record.expectedSHA256,
        taskDescription: record.taskDescription)
      replies.append((reply, data.encoded()))
      // The record keeps the temp file's name, so the cache manager sees it as resumable, not orphaned.
      return settle(task, .failed, error: cancelled) { $0.bytesReceived = size }
    }
  }
}

/// A temp file to delete when its task fails: its name in the directory it was made in, held open
/// when the caller still has it.
struct TemporaryRemoval: Sendable {
  /// The temp directory, or nil when it can no longer be opened safely (the file is left alone).
  let directory: DirectoryHandle?
  let name: String

  init(directory: DirectoryHandle?, name: String) {
    self.directory = directory
    self.name = name
  }

  /// The temp file of `task`, if it has one, with its directory opened through `fileSystem`.
  init?(_ task: DownloadTask, in fileSystem: any DownloadFileSystem) {
    let record = task.record
    guard let name = record.temporaryFileName else { return nil }
    self.init(directory: try? fileSystem.openDirectory(record.temporaryDirectory, creating: false), name: name)
  }

  /// Deletes the file, relative to its directory.
  func remove() { directory?.removeFile(name, ifStill: nil) }
}
