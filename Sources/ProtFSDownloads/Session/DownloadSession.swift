import Foundation
import ProtFSSystem
import Synchronization

/// A background download session shaped like `URLSession`'s: an identifier, download tasks, resume
/// data, and progress through `events` or a delegate.
///
/// Its tasks are persisted in the task store: a session opened again with the same identifier
/// (after `invalidate()`, or in a new process after the old one was killed) reattaches the unfinished
/// tasks no live session owns, and restarts those that were running from their temp files.
public final class DownloadSession: Sendable {
  package let core: DownloadSessionCore

  /// The session's identifier.
  public var identifier: String { core.configuration.identifier }
  /// The configuration the session was opened with.
  public var configuration: DownloadSessionConfiguration { core.configuration }
  /// Every task's progress and outcome, in order per task, from the first time this is read (a
  /// session nobody asked for events spends nothing on them). One consumer; when nobody reads,
  /// only the newest events are kept.
  ///
  /// Read it before resuming tasks to see all their events. Progress reported before the first
  /// read is already in each task's `countOfBytesReceived`: a task's count is updated before its
  /// event is made, so a caller that reads `events` and then the count misses nothing.
  public var events: AsyncStream<DownloadEvent> {
    // Sequentially consistent, paired with the engine's load: with relaxed ordering the engine
    // could miss this store while this thread misses the engine's count.
    core.eventsObserved.store(true, ordering: .sequentiallyConsistent)
    return core.events
  }
  /// The task store.
  public var store: DownloadStore { core.store }

  /// Opens the session `configuration.identifier`, reattaching its unfinished tasks.
  public init(configuration: DownloadSessionConfiguration, delegate: (any DownloadSessionDelegate)? = nil)
    throws(ProtFSError)
  {
    let store = try DownloadStore(path: configuration.storePath)
    try store.registerSession(identifier: configuration.identifier, bundleID: configuration.bundleID)
    let core = DownloadSessionCore(configuration: configuration, store: store)
    // The last step that can fail comes before any thread starts, so a failed init leaves nothing running.
    let reattached = try store.claimUnfinished(session: configuration.identifier, owner: core.owner)
    self.core = core
    core.delegate = delegate
    core.session = self
    core.engine = TransferEngine(core: core)
    core.finisher = DownloadFinisher(core: core)
    core.finisher.start()
    var toResume: [DownloadTask] = []
    var toCancel: [DownloadTask] = []
    for record in reattached {
      let url = URL(string: record.url) ?? URL(fileURLWithPath: "/")
      let task = DownloadTask(record: record, url: url, fileNameIsExplicit: record.fileName != nil, core: core)
      core.tasks.withLock { $0[task.id] = task }
      switch record.state {
      case .running, .interrupted:
        // Its process ended mid-transfer: it goes on from its temp file once resumed.
        task.runtime.withLock { $0.record.state = .suspended }
        if configuration.resumesReattachedTasks { toResume.append(task) }
      case .canceling: toCancel.append(task)
      default: break
      }
    }
    for task in toResume { task.resume() }
    for task in toCancel { task.cancel() }
    // Requests left while no session owned these tasks take effect now (in the session that will
    // run them: one that records for the service leaves them to it).
    if !configuration.recordsForService { core.applyRequests() }
  }

  deinit { core.invalidate() }

  /// Stops every transfer, keeping temp files and progress in the store, and releases the tasks so
  /// that a session opened later with the same identifier reattaches them. The session does nothing
  /// afterwards.
  public func invalidate() { core.invalidate() }

  /// Stops every transfer as `invalidate()` does, for a process that is ending before its tasks
  /// settled (a Ctrl-C): the tasks that were running are recorded as interrupted, so that the store
  /// shows that no process transfers them, and a session opened later with this identifier goes on
  /// with them from their temp files. Returns those tasks' records, as stored.
  @discardableResult
  public func interrupt() -> [DownloadTaskRecord] { core.invalidate(interrupting: true) }

  /// The session's tasks (created or reattached by this session object), oldest first.
  public var allTasks: [DownloadTask] {
    core.tasks.withLock { $0.values.sorted { $0.id < $1.id } }
  }

  /// The task `id`, if this session holds it.
  public func task(id: Int64) -> DownloadTask? { core.task(id: id) }

  /// Whether a task this session holds is unfinished (unsorted, unlike `allTasks`: asked after
  /// every completion of a session with thousands of tasks).
  public var hasUnfinishedTasks: Bool {
    let tasks = core.tasks.withLock { Array($0.values) }
    return tasks.contains { $0.state.isUnfinished }
  }

  /// A suspended task downloading `url`; call `resume()` to start it.
  ///
  /// When this session already holds an unfinished task for the same URL and destination (one
  /// reattached after a crash), that task is returned instead of a new one, so running the same
  /// download again resumes it.
  public func downloadTask(
    with url: URL, to directory: String? = nil, fileName: String? = nil, expectedSHA256: String? = nil
  ) throws(ProtFSError) -> DownloadTask {
    try downloadTasks(
      with: [
        DownloadRequest(url: url, destinationDirectory: directory, fileName: fileName, expectedSHA256: expectedSHA256)
      ]
    )[0]
  }

  /// Where an unfinished task downloads: what a new request for the same download matches.
  private struct ResumableKey: Hashable {
    var url: String
    var directory: String
  }

  /// The unfinished tasks a new request may resume, by URL and destination directory, oldest
  /// first, so that thousands of requests find theirs without a scan each.
  private func resumableTasks() -> [ResumableKey: [(fileName: String?, task: DownloadTask)]] {
    var unfinished: [ResumableKey: [(fileName: String?, task: DownloadTask)]] = [:]
    for task in allTasks {
      let r = task.record
      guard r.state.isUnfinished && r.state != .waitingForUnlock && !r.handsOver, r.isResumable else { continue }
      unfinished[ResumableKey(url: r.url, directory: r.destinationDirectory), default: []].append((r.fileName, task))
    }
    return unfinished
  }

  /// Suspended tasks for `requests`, created in one store transaction (cheap for thousands).
  public func downloadTasks(with requests: [DownloadRequest]) throws(ProtFSError) -> [DownloadTask] {
    try checkUsable()
    let now = Date().timeIntervalSince1970
    var result: [DownloadTask?] = Array(repeating: nil, count: requests.count)
    var fresh: [(index: Int, record: DownloadTaskRecord, request: DownloadRequest)] = []
    let unfinished = resumableTasks()
    for (index, request) in requests.enumerated() {
      let directory = request.destinationDirectory ?? configuration.destinationDirectory
      let url = request.url.absoluteString
      if let name = request.fileName {
        _ = try DownloadFileName.validate(name, source: "the request for '\(url)'")
      }
      let digest = try request.expectedSHA256.map(Self.normalizedDigest)
      let headers = try request.headers.map { header throws(ProtFSError) in try header.validated() }
      let method = try DownloadRequest.validatedMethod(request.method)
      let body = DownloadRequest.sendsBody(method) ? request.body : nil
      if let body { try DownloadRequest.checkBodySize(body, url: url) }
      // A handed-over task is the app's own: each request makes one.
      if !request.handsOver, method == "GET",
        let match = unfinished[ResumableKey(url: url, directory: directory)]?.first(where: {
          request.fileName == nil || request.fileName == $0.fileName
        })
      {
        result[index] = match.task
        continue
      }
      var record = DownloadTaskRecord(
        id: 0, sessionIdentifier: identifier, url: url, destinationDirectory: directory,
        fileName: request.fileName, temporaryDirectory: configuration.temporaryDirectory, temporaryFileName: nil,
        state: .suspended, bytesReceived: 0, bytesExpected: -1, entityTag: nil, lastModified: nil,
        expectedSHA256: digest, errorMessage: nil, errorNumber: nil, taskDescription: request.taskDescription,
        createdAt: now, updatedAt: now)
      record.requestTimeout = Monotonic.seconds(configuration.requestTimeout)
      record.resourceTimeout = Monotonic.seconds(configuration.resourceTimeout)
      record.handsOver = request.handsOver
      record.requestHeaders = headers
      record.requestMethod = method == "GET" ? nil : method
      record.requestBody = body
      record.earliestBegin = request.earliestBegin
      fresh.append((index, record, request))
    }
    let inserted = try core.store.insert(
      fresh.map(\.record), owner: core.owner, requesting: configuration.recordsForService ? .resume : nil)
    for (item, record) in zip(fresh, inserted) {
      let task = DownloadTask(
        record: record, url: item.request.url, fileNameIsExplicit: item.request.fileName != nil, core: core)
      core.tasks.withLock { $0[task.id] = task }
      result[item.index] = task
    }
    return result.map { $0! }
  }

  /// A suspended task that continues the download `resumeData` describes (from
  /// `cancel(byProducingResumeData:)`), with `Range` and `If-Range`; with `handsOver`, its
  /// finished file is handed over rather than placed (see `DownloadRequest.handsOver`).
  public func downloadTask(withResumeData resumeData: Data, handsOver: Bool = false) throws(ProtFSError)
    -> DownloadTask
  {
    try checkUsable()
    let data = try DownloadResumeData(data: resumeData)
    let record = try record(
      resuming: data, temporaryDirectory: data.temporaryDirectory, destinationDirectory: data.destinationDirectory,
      handsOver: handsOver)
    return register(try core.store.insert([record], owner: core.owner)[0], resuming: data)
  }

  /// The record of a suspended task continuing `data` from `temporaryDirectory` into
  /// `destinationDirectory`, with the session's timeouts; throws for a name in `data` that is not
  /// a file name.
  private func record(
    resuming data: DownloadResumeData, temporaryDirectory: String, destinationDirectory: String, handsOver: Bool
  ) throws(ProtFSError) -> DownloadTaskRecord {
    if let name = data.fileName { _ = try DownloadFileName.validate(name, source: "the resume data") }
    _ = try DownloadFileName.validate(data.temporaryFileName, source: "the resume data")
    let now = Date().timeIntervalSince1970
    var record = DownloadTaskRecord(
      id: 0, sessionIdentifier: identifier, url: data.url.absoluteString, destinationDirectory: destinationDirectory,
      fileName: data.fileName, temporaryDirectory: temporaryDirectory, temporaryFileName: data.temporaryFileName,
      state: .suspended, bytesReceived: data.bytesReceived, bytesExpected: data.bytesExpected,
      entityTag: data.entityTag, lastModified: data.lastModified, expectedSHA256: data.expectedSHA256,
      errorMessage: nil, errorNumber: nil, taskDescription: data.taskDescription, createdAt: now, updatedAt: now)
    record.requestTimeout = Monotonic.seconds(configuration.requestTimeout)
    record.resourceTimeout = Monotonic.seconds(configuration.resourceTimeout)
    record.handsOver = handsOver
    record.requestHeaders = try (data.headers ?? []).map { header throws(ProtFSError) in try header.validated() }
    return record
  }

  /// The task of the stored `record`, which continues `data`, known to the session from now on.
  private func register(_ record: DownloadTaskRecord, resuming data: DownloadResumeData) -> DownloadTask {
    let task = DownloadTask(record: record, url: data.url, fileNameIsExplicit: data.fileName != nil, core: core)
    core.tasks.withLock { $0[task.id] = task }
    return task
  }

  /// The tasks that settled while the store could not record it (a full disk), as they settled,
  /// with their deliveries queued as the store would queue them; `ids` limits them. The store
  /// shows them as they were until the session writes them (it keeps trying).
  package func unsavedSettlements(_ ids: [Int64]? = nil) -> [DownloadTaskRecord] {
    let records = core.unsaved.withLock { waiting in ids.map { $0.compactMap { waiting[$0] } } ?? Array(waiting.values)
    }
    return records.map { record in
      var queued = record
      if queued.handsOver && queued.delivery == nil { queued.delivery = .pending }
      return queued
    }.sorted { $0.id < $1.id }
  }

  /// A suspended task continuing `data` for a caller not trusted with paths (the session service,
  /// for an app): the temp directory and the destination are this session's own, whatever `data`
  /// names, and the temp file `data` names is continued only while the store records it for the
  /// failed task `source` of this session, which gives it up in the same transaction (so resume
  /// data continues its file once); otherwise the task starts from byte 0. The temp file itself is
  /// continued only when it is what the session would make there (`TemporaryFile.open`).
  package func downloadTask(resuming data: DownloadResumeData, from source: Int64, handsOver: Bool)
    throws(ProtFSError) -> DownloadTask
  {
    try checkUsable()
    let record = try record(
      resuming: data, temporaryDirectory: configuration.temporaryDirectory,
      destinationDirectory: configuration.destinationDirectory, handsOver: handsOver)
    let inserted = try core.store.insert(record, owner: core.owner, takingTemporaryFileFrom: source)
    if let name = inserted.temporaryFileName {
      // The task the file came from no longer has it, here as in the store.
      core.task(id: source)?.runtime.withLock { r in
        if r.record.temporaryFileName == name { r.record.temporaryFileName = nil }
      }
    }
    return register(inserted, resuming: data)
  }

  /// Applies the requests other processes left in the store for this session's tasks now, instead
  /// of at the next check: the service does so for the tasks it has just adopted, among them
  /// those a `download --detach` recorded and did not live to hand over.
  package func applyPendingRequests() { core.applyRequests() }

  /// Takes the session's unfinished tasks that appeared in the store since this session opened
  /// (recorded by another process, then released) and that no live session owns; returns them,
  /// suspended. The session service adopts the tasks `download --detach` hands it this way.
  public func adoptUnfinished() throws(ProtFSError) -> [DownloadTask] {
    try checkUsable()
    let claimed = try core.store.claimUnfinished(session: identifier, owner: core.owner)
    var adopted: [DownloadTask] = []
    for record in claimed where core.task(id: record.id) == nil {
      let url = URL(string: record.url) ?? URL(fileURLWithPath: "/")
      let task = DownloadTask(record: record, url: url, fileNameIsExplicit: record.fileName != nil, core: core)
      if [.running, .interrupted].contains(record.state) { task.runtime.withLock { $0.record.state = .suspended } }
      core.tasks.withLock { $0[task.id] = task }
      adopted.append(task)
    }
    return adopted
  }

  /// Lets go of `tasks`, suspended ones of this session, so that another session with the same
  /// identifier can adopt them (`adoptUnfinished`) while this one goes on with the rest: the way
  /// `download --detach` hands its tasks to the session service a part at a time. Tasks in
  /// another state stay. The tasks let go of are no longer this session's; returns them.
  @discardableResult
  public func release(_ tasks: [DownloadTask]) throws(ProtFSError) -> [DownloadTask] {
    try checkUsable()
    let released = core.tasks.withLock { registry in
      tasks.filter { task in
        guard registry[task.id] === task, task.state == .suspended else { return false }
        registry[task.id] = nil
        return true
      }
    }
    try core.store.release(tasks: released.map(\.id), owner: core.owner)
    return released
  }

  /// Moves the finished files of tasks waiting for unlock into place, where the access policy now
  /// allows it; returns the tasks that left `waitingForUnlock` (completed or failed).
  @discardableResult
  public func completeWaitingTasks() -> [DownloadTask] {
    guard !core.isInvalidated else { return [] }
    let waiting = allTasks.filter { $0.state == .waitingForUnlock }
    let outcomes = core.finisher.place(waiting)
    core.finisher.deliver(outcomes)
    return waiting.filter { $0.state != .waitingForUnlock }
  }

  private func checkUsable() throws(ProtFSError) {
    if core.isInvalidated {
      throw ProtFSError(
        .invalidArgument, "The download session '\(identifier)' was invalidated.",
        remedy: .advice("open the session again with the same identifier"))
    }
  }

  private static func normalizedDigest(_ text: String) throws(ProtFSError) -> String {
    guard let lower = DownloadRequest.normalizedSHA256(text) else {
      throw ProtFSError(
        .invalidArgument, "The SHA-256 digest '\(text)' is not 64 hexadecimal digits.",
        remedy: .advice("give the digest as `sha256sum` prints it"))
    }
    return lower
  }
}
