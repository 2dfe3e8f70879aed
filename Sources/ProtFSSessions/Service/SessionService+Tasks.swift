import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The service's answers about tasks: new ones, changes to one, listings, and what an app says it
/// is done with.
extension SessionService {
  /// `answer`'s new handed-over download task of session `identifier`.
  func createDownloadTask(_ wanted: SessionRequest, resumeData: Data?, in identifier: String, peer: Peer)
    throws(ProtFSError) -> SessionTaskSnapshot
  {
    let hosted = try session(identifier, peer: peer)
    try checkNewTask(wanted, in: hosted, peer: peer)
    let task: DownloadTask
    if let data = resumeData {
      // Apple's resume data, which the app may have rewritten: believed only where it names a
      // download this session keeps, with that URL and that many bytes (`resumable`).
      let (resume, source) = try resumable(data, in: hosted)
      task = try hosted.session.downloadTask(resuming: resume, from: source, handsOver: true)
      if let text = wanted.taskDescription { task.taskDescription = text }
    } else {
      try Self.checkFetchable(wanted.url, for: peer)
      var download = DownloadRequest(
        url: wanted.url, taskDescription: wanted.taskDescription, headers: wanted.headers, method: wanted.method,
        body: wanted.body)
      download.handsOver = true
      task = try hosted.session.downloadTasks(with: [download])[0]
    }
    _ = state.withLock { $0.launchNotified.remove(hosted.session.identifier) }
    return snapshot(task.record)
  }

  /// `answer`'s new upload task of session `identifier`, sending the file at `path`.
  func createUploadTask(_ wanted: SessionRequest, fromFile path: String, in identifier: String, peer: Peer)
    throws(ProtFSError) -> SessionTaskSnapshot
  {
    let hosted = try session(identifier, peer: peer)
    try checkNewTask(wanted, in: hosted, peer: peer)
    let upload = UploadRequest(
      url: wanted.url, method: try UploadMethod.parse(wanted.method),
      headers: wanted.headers,
      taskDescription: wanted.taskDescription)
    let task = try hosted.session.uploadTask(with: upload, fromFile: path, handsOver: true)
    _ = state.withLock { $0.launchNotified.remove(hosted.session.identifier) }
    return snapshot(task.record)
  }

  /// Task `id` of session `identifier`, after the peer check.
  func task(_ id: Int64, in identifier: String, peer: Peer) throws(ProtFSError)
    -> (hosted: HostedSession, task: DownloadTask)
  {
    let hosted = try session(identifier, peer: peer)
    guard let task = hosted.session.task(id: id) else {
      throw ProtFSError(
        .notFound, "The session '\(hosted.session.identifier)' has no task \(id).", remedy: .listTasks)
    }
    return (hosted, task)
  }

  /// `answer`'s resumption of task `id`.
  func resume(_ id: Int64, beginsAt: Double?, in identifier: String, peer: Peer) throws(ProtFSError) {
    let task = try self.task(id, in: identifier, peer: peer).task
    // A date the app gave (`earliestBeginDate`) counts for a task that has not begun yet; one
    // that ran already is resumed as it is.
    if let beginsAt, task.record.state == .suspended, task.record.bytesReceived == 0 {
      try task.setEarliestBeginDate(Date(timeIntervalSince1970: beginsAt))
    }
    // Running again, it is no longer one the system cancelled.
    try store.setCancelledReason(nil, tasks: [id])
    task.resume()
  }

  /// `answer`'s cancellation of task `id`; its resume data when `producingResumeData`.
  func cancel(_ id: Int64, producingResumeData: Bool, in identifier: String, peer: Peer) throws(ProtFSError)
    -> Data?
  {
    let (hosted, task) = try self.task(id, in: identifier, peer: peer)
    guard producingResumeData else {
      task.cancel()
      return nil
    }
    return cancelKeepingPartialFile(task, bundleID: hosted.bundleID).flatMap(Self.appleResumeData)
  }

  /// `answer`'s listing of session `identifier`'s tasks not yet completed to the app.
  func pendingSnapshots(of identifier: String, peer: Peer) throws(ProtFSError) -> [SessionTaskSnapshot] {
    let hosted = try session(identifier, peer: peer)
    let reasons = (try? store.cancelledReasons(session: hosted.session.identifier)) ?? [:]
    return try store.tasks(session: hosted.session.identifier)
      .filter { $0.state.isUnfinished || $0.awaitsDelivery }
      .map { record in
        var listed = snapshot(record, cancelledReason: reasons[record.id])
        // A task whose completion the app has not been given is still running to it: Apple's
        // `.completed` says the delegate gets no more calls, and this one's are still to come.
        // (MZDownloadManager, relaunched, keeps the running and suspended tasks it is listed.)
        if !record.state.isUnfinished {
          listed.state = "running"
          listed.error = nil
          listed.cancelledReason = nil
          listed.resumeData = nil
        }
        return listed
      }
  }

  /// `answer`'s removal of the finished tasks unchanged for `olderThan` seconds (every finished one
  /// when nil) of the sessions `sessions(_:bundleID:peer:)` gives `peer`.
  func prune(olderThan: Double?, session: String?, bundleID: String?, peer: Peer) throws(ProtFSError) -> [Int64] {
    let cutoff = try olderThan.map { seconds throws(ProtFSError) in
      guard seconds.isFinite, seconds >= 0 else {
        throw ProtFSError(.invalidArgument, "The request to the session service has an age (olderThan) below zero.")
      }
      return Date().addingTimeInterval(-seconds)
    }
    return try store.prune(finishedBefore: cutoff, sessions: try sessions(session, bundleID: bundleID, peer: peer))
  }

  /// `answer`'s "the app handled session `session`'s events".
  func eventsHandled(_ session: String, peer: Peer) throws(ProtFSError) {
    // A session the store does not know has nothing queued: the answer needs nothing more.
    guard let bundle = try? bundleOf(session) else { return }
    try authorize(peer, bundleID: bundle, session: session)
    for record in try store.pendingDeliveries(session: session) {
      try store.acknowledge(task: record.id, fileSystem: fileSystem)
    }
    try store.setRelaunchError(nil, session: session)
    // Answered: the next batch of the session may wake or launch the app again.
    _ = state.withLock { $0.launchNotified.remove(session) }
  }
}
