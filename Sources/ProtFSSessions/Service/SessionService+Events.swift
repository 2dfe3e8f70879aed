import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

/// Events, deliveries, relaunches, force-quit and the peer check.
extension SessionService {
  /// Forwards a hosted session's progress to its subscriber: a download's response first, the
  /// first time the subscriber hears of the task's bytes, so that the app's task has its
  /// `response` before its first `didWriteData`, as on iOS.
  func progress(of identifier: String, task id: Int64, written: Int64, total: Int64, expected: Int64) {
    // One lock per progress: the session is looked up only the first time.
    let found = state.withLock { state -> (SessionSubscriber, HostedSession?)? in
      guard let subscriber = state.subscribers[identifier] else { return nil }
      return (subscriber, subscriber.responded.insert(id).inserted ? state.hosted[identifier] : nil)
    }
    guard let (subscriber, firstOf) = found else { return }
    if let record = firstOf?.session.task(id: id)?.record, let response = record.response {
      subscriber.send(
        .receivedResponse(task: id, url: record.url, statusCode: response.status, headers: response.headers))
    }
    subscriber.send(
      .wroteData(task: id, bytesWritten: written, totalBytesWritten: total, totalBytesExpectedToWrite: expected))
  }

  /// Forwards a hosted session's upload progress to its subscriber.
  func sent(of identifier: String, task id: Int64, sent: Int64, total: Int64, expected: Int64) {
    guard let subscriber = state.withLock({ $0.subscribers[identifier] }) else { return }
    subscriber.send(
      .sentBodyData(task: id, bytesSent: sent, totalBytesSent: total, totalBytesExpectedToSend: expected))
  }

  /// Task `id` of a hosted session completed or failed: its delivery goes out, and the app may
  /// be told. (The subscriber got every earlier one when it subscribed or as they came.)
  func completed(in identifier: String, task id: Int64) {
    flushDeliveries(identifier, only: [id])
    checkRelaunch(identifier)
  }

  /// Makes `connection` session `identifier`'s subscriber (replacing an earlier one) and sends it
  /// the completions queued for the app, then `queuedEventsDelivered`.
  func subscribe(_ identifier: String, connection: FileDescriptor) -> SessionSubscriber {
    let subscriber = SessionSubscriber(connection: connection)
    let previous = state.withLock { state -> SessionSubscriber? in
      defer { state.subscribers[identifier] = subscriber }
      return state.subscribers[identifier]
    }
    if let previous { ControlSocket.shutDown(previous.connection) }
    flushDeliveries(identifier)
    subscriber.send(.queuedEventsDelivered)
    return subscriber
  }

  /// Sends session `identifier`'s subscriber every pending delivery it was not sent yet (of the
  /// tasks `ids` only, when given: reading every task of a session with thousands after each
  /// completion made them quadratic): a finished file's location (`didFinishDownloadingTo`),
  /// then the completion.
  ///
  /// Tasks that settled while the store could not record it (a full disk) come from the hosted
  /// session's memory: the app hears how they ended although the store does not show it yet.
  func flushDeliveries(_ identifier: String, only ids: [Int64]? = nil) {
    guard
      let (subscriber, hosted) = state.withLock({ state -> (SessionSubscriber, HostedSession?)? in
        state.subscribers[identifier].map { ($0, state.hosted[identifier]) }
      })
    else { return }
    let unsaved = hosted?.session.unsavedSettlements(ids).filter(\.awaitsDelivery) ?? []
    let found: [DownloadTaskRecord]?
    if let ids {
      found = (try? store.tasks(ids: ids))?.values.filter {
        $0.sessionIdentifier == identifier && $0.awaitsDelivery
      }
    } else {
      found = try? store.pendingDeliveries(session: identifier)
    }
    let unsavedIDs = Set(unsaved.map(\.id))
    let pending = ((found ?? []).filter { !unsavedIDs.contains($0.id) } + unsaved).sorted { $0.id < $1.id }
    let reasons = pending.isEmpty ? [:] : (try? store.cancelledReasons(session: identifier)) ?? [:]
    for record in pending {
      let fresh = state.withLock { _ in subscriber.sent.insert(record.id).inserted }
      guard fresh else { continue }
      if let upload = record.upload {
        // The server's answer (`dataTask(_:didReceive:)`), before the completion.
        let body = unsavedIDs.contains(record.id) ? record.responseBody : try? store.responseBody(of: record.id)
        if let body, !body.isEmpty {
          subscriber.send(.receivedData(task: record.id, statusCode: upload.responseStatus ?? 0, body: body))
        }
      } else if let location = record.handedOverPath {
        // Its response first, so that the app reads its status in `didFinishDownloadingTo`.
        if let response = record.response {
          subscriber.send(
            .receivedResponse(
              task: record.id, url: record.url, statusCode: response.status, headers: response.headers))
        }
        subscriber.send(.finishedDownloading(task: record.id, location: location))
      }
      let snapshot = snapshot(record, cancelledReason: reasons[record.id])
      subscriber.send(.completed(task: record.id, snapshot: snapshot, error: snapshot.error))
    }
  }

  /// Task `id` of session `identifier`'s completion is done with; with `fileOnly`, only its
  /// finished file (`didFinishDownloadingTo` returned; the completion is still to come).
  ///
  /// An acknowledgement the store cannot record now (the task's end is not in the store yet, or a
  /// full disk refuses the write) is kept and recorded by `recordLateAcknowledgements()`: the app
  /// said it, and a delivery it acknowledged is never sent again.
  func acknowledge(_ id: Int64, fileOnly: Bool = false, session identifier: String, peer: Peer) throws(ProtFSError) {
    try authorize(peer, bundleID: try bundleOf(identifier), session: identifier)
    guard let record = try store.task(id: id), record.sessionIdentifier == identifier else {
      throw ProtFSError(
        .notFound, "The session '\(identifier)' has no task \(id).", remedy: .listTasks)
    }
    let hosted = state.withLock { $0.hosted[identifier] }
    // One the store cannot take now waits in `lateAcknowledgements`, taken on every idle tick.
    if hosted?.session.unsavedSettlements([id]).isEmpty == false
      || (try? store.acknowledge(task: id, fileOnly: fileOnly, fileSystem: fileSystem)) == nil
    {
      state.withLock { state in
        // A full acknowledgement covers the file's.
        let earlier = state.lateAcknowledgements[id]
        state.lateAcknowledgements[id] = LateAcknowledgement(
          session: identifier, fileOnly: fileOnly && earlier?.fileOnly != false)
      }
    }
  }

  /// Records the acknowledgements the store could not take when they came, once it can (the
  /// idle watch calls this on every tick).
  func recordLateAcknowledgements() {
    let waiting = state.withLock { $0.lateAcknowledgements }
    for (id, late) in waiting.sorted(by: { $0.key < $1.key }) {
      let hosted = state.withLock { $0.hosted[late.session] }
      guard hosted?.session.unsavedSettlements([id]).isEmpty != false else { continue }
      // Still not taken: it waits for the next tick.
      guard (try? store.acknowledge(task: id, fileOnly: late.fileOnly, fileSystem: fileSystem)) != nil else { return }
      state.withLock { state in
        if state.lateAcknowledgements[id] == late { state.lateAcknowledgements[id] = nil }
      }
    }
  }

  /// Tells session `identifier`'s app its events wait, when its tasks are all finished, some
  /// completions wait for it, it wants launch events, and nobody subscribes or the subscriber is a
  /// suspended app (which its supervisor then resumes in the background, as iOS wakes a
  /// suspended app). A failure is recorded for `protfs sessions`; the next completion or start
  /// tries again.
  func checkRelaunch(_ identifier: String) {
    guard let launcher else { return }
    let found = state.withLock { state -> (HostedSession, Bool, Bool)? in
      guard let hosted = state.hosted[identifier] else { return nil }
      let blocked = state.launchNotified.contains(identifier) || state.forceQuit.contains(hosted.bundleID)
      return (hosted, blocked, state.subscribers[identifier] != nil)
    }
    guard let (hosted, blocked, subscribed) = found, !blocked, hosted.settings.configuration.sendsLaunchEvents,
      !subscribed || launcher.isSuspended(hosted.bundleID), !launcher.isForceQuit(hosted.bundleID)
    else { return }
    // Asked after every completion: while the session still runs tasks, the store (every task of
    // the session, read whole) is not read at all.
    guard !hosted.hasUnfinishedTasks else { return }
    guard let records = try? store.tasks(session: identifier), !records.contains(where: { $0.state.isUnfinished }),
      records.contains(where: \.awaitsDelivery)
    else { return }
    // Claimed before the call: the completions of one batch make one launch.
    let first = state.withLock { $0.launchNotified.insert(identifier).inserted }
    guard first else { return }
    do {
      try launcher.deliverEvents(of: identifier, to: hosted.bundleID)
      recordRelaunchError(nil, session: identifier)
    } catch {
      _ = state.withLock { $0.launchNotified.remove(identifier) }
      recordRelaunchError(error.message, session: identifier)
    }
  }

  /// Keeps why session `identifier`'s app could not be relaunched (nil: it was), for `protfs
  /// sessions` to show; a store that cannot take it is reported.
  private func recordRelaunchError(_ message: String?, session identifier: String) {
    do {
      try store.setRelaunchError(message, session: identifier)
    } catch {
      report("cannot record the relaunch of '\(identifier)': \(error.message)")
    }
  }

  /// Wakes the suspended apps whose subscribed sessions have deliveries waiting (the idle watch
  /// calls this on every tick): a batch that completed while the app was still running in the
  /// background, and was suspended before it read it, is not left unread until the user returns.
  /// `checkRelaunch` decides: a subscribed session counts only when its app is suspended, which
  /// it asks before it reads the store.
  func wakeSuspendedSubscribers() {
    for identifier in state.withLock({ Array($0.subscribers.keys) }) { checkRelaunch(identifier) }
  }

  /// The user force-quit `bundleID`: its running and suspended transfers are cancelled producing
  /// resume data (their temp files kept, resumable) and it is not relaunched until it opens a
  /// session again. Each such task records `userForceQuitApplication` first, so its completion,
  /// delivered when the app opens the session again, carries the reason and the resume data.
  ///
  /// The app's subscriptions end first: the process being killed (it may run a few moments more,
  /// until the grace after `willTerminate`) gets none of these completions, as on iOS, where the
  /// app learns of the cancellation only when it is launched again.
  func forceQuitApp(_ bundleID: String) {
    let (sessions, ended) = state.withLock { state -> ([HostedSession], [SessionSubscriber]) in
      state.forceQuit.insert(bundleID)
      let sessions = state.hosted.values.filter { $0.bundleID == bundleID }
      let ended = sessions.compactMap { state.subscribers.removeValue(forKey: $0.session.identifier) }
      return (sessions, ended)
    }
    for subscriber in ended { ControlSocket.shutDown(subscriber.connection) }
    for hosted in sessions {
      let stopping = hosted.session.allTasks.filter { $0.state == .running || $0.state == .suspended }
      do {
        try store.setCancelledReason(
          BackgroundTaskCancelledReason.userForceQuitApplication.rawValue, tasks: stopping.map(\.id))
      } catch {
        report("cannot record the force-quit of \(bundleID) with its tasks: \(error.message)")
      }
      for task in stopping { _ = cancelKeepingPartialFile(task, bundleID: hosted.bundleID) }
    }
  }

  /// Refuses a peer that may not touch `bundleID`'s sessions: root may; another user only from a
  /// running app of that bundle (the app's process or one of its descendants). Another app asking
  /// for session `session` (or task `task`) is told there is no such session (or task), as for one
  /// that does not exist: the refusal would tell it the session exists and whose it is.
  func authorize(_ peer: Peer, bundleID: String, session: String? = nil, task: Int64? = nil) throws(ProtFSError) {
    if peer.isTrustedUser { return }
    // The peer's pid is read in /proc only while it is still the process that connected.
    let app = try appOf(peer)
    guard let app, app.bundleID == bundleID, peer.isStillConnectedProcess else {
      if app != nil, let session { throw Self.unknownSession(session) }
      if app != nil, let task {
        throw ProtFSError(.notFound, "There is no task \(task) on the device '\(device.root)'.", remedy: .listTasks)
      }
      throw ProtFSError(
        .permissionDenied,
        "Process \(peer.pid) (uid \(peer.uid)) is not running as app \(bundleID); only root or the app may use its sessions.",
        errno: EPERM, remedy: .useSessionFromItsApp)
    }
  }

  /// The running app of which `peer` is a process: a descendant of the app's live supervisor
  /// (every process below `protfs app launch` is the app's; the supervisor itself is root's). The
  /// supervisor is known by its pid and start time, recorded before the app starts, so the app's
  /// first request finds its record, and a record whose supervisor is gone (or whose pid another
  /// process now has) names nobody.
  func appOf(_ peer: Peer) throws(ProtFSError) -> AppRecord? {
    let running = try AppStore(device: device).records().filter(\.isSupervised)
    guard !running.isEmpty else { return nil }
    var pid = peer.pid
    for _ in 0..<64 where pid > 1 {
      guard let parent = ProcessIdentity.parent(of: pid) else { return nil }
      if let app = running.first(where: { $0.supervisorPID == parent }) { return app }
      pid = parent
    }
    return nil
  }
}

/// A hosted session's delegate: hands its calls to the service.
///
/// `@unchecked Sendable`: `service` is weak only so as not to keep the service alive; it is set in
/// the initialiser and never written again, and `identifier` is immutable.
final class ServiceSessionDelegate: DownloadSessionDelegate, @unchecked Sendable {
  /// Weak: the service owns the session, which owns this delegate.
  weak var service: SessionService?
  /// The session.
  let identifier: String

  init(service: SessionService, identifier: String) {
    self.service = service
    self.identifier = identifier
  }

  func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
    totalBytesExpectedToWrite: Int64
  ) {
    service?.progress(
      of: identifier, task: task.id, written: bytesWritten, total: totalBytesWritten,
      expected: totalBytesExpectedToWrite)
  }

  func downloadSession(
    _ session: DownloadSession, task: DownloadTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {
    service?.sent(
      of: identifier, task: task.id, sent: bytesSent, total: totalBytesSent, expected: totalBytesExpectedToSend)
  }

  func downloadSession(_ session: DownloadSession, task: DownloadTask, didCompleteWithError error: ProtFSError?) {
    service?.completed(in: identifier, task: task.id)
  }

  /// False: the service hands files over through the store, never in `didFinishDownloadingTo`.
  var receivesFinishedDownloads: Bool { false }
}
