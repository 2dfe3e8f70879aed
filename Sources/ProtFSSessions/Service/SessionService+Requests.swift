import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The service's answers to its requests.
extension SessionService {
  /// Answers `connection`'s requests until it closes; a `subscribe` turns it into an event stream
  /// on which later lines are acknowledgements (answered by nothing).
  func serve(_ connection: FileDescriptor, peer: Peer) {
    var subscribed: String?
    var subscriber: SessionSubscriber?
    while let request = nextRequest(on: connection, answering: subscribed == nil) {
      if let session = subscribed {
        if request.kind == .acknowledge, let id = request.task {
          // A subscription gets no replies: a refused acknowledgement changes nothing, and one the
          // store could not take waits in `lateAcknowledgements`.
          try? acknowledge(id, fileOnly: request.fileOnly == true, session: session, peer: peer)
        }
        continue
      }
      var reply = SessionServiceReply()
      do throws(ProtFSError) {
        reply = try answer(request, peer: peer) { ControlSocket.hasHungUp(connection) }
      } catch {
        reply.error = error
      }
      if request.kind == .subscribe, reply.error == nil, let session = request.session {
        // A subscription speaks only to acknowledge: its reads wait as long as it lasts.
        ControlSocket.limitWaits(connection, reads: false)
        SessionWire.send(reply, on: connection)
        subscribed = session
        subscriber = subscribe(session, connection: connection)
        continue
      }
      SessionWire.send(reply, on: connection)
      if request.kind == .stop, reply.error == nil { stop() }
    }
    if let session = subscribed {
      state.withLock { state in
        if state.subscribers[session]?.connection === connection { state.subscribers[session] = nil }
      }
    }
    // Its writer lets go of the connection before the caller closes it.
    subscriber?.finish()
  }

  /// The next request on `connection`; nil at its end, or after a line too long or that is no
  /// request, which gets one answer saying so (unless the connection is a subscription, `answering`
  /// false): a client that sends garbage is not one to go on reading.
  func nextRequest(on connection: FileDescriptor, answering: Bool) -> SessionServiceRequest? {
    let line: String
    switch ControlSocket.nextLine(connection, limit: SessionWire.maximumRequestLine, within: lineTimeout) {
    case .line(let read): line = read
    case .ended: return nil
    case .tooLong:
      // Told once, before the connection ends (the rest of the line is never read).
      let reply = SessionServiceReply(
        error: ProtFSError(
          .invalidArgument,
          "The session service takes request lines of at most \(SessionWire.maximumRequestLine) bytes; this one is longer."
        ))
      if answering { SessionWire.send(reply, on: connection) }
      return nil
    }
    do {
      return try JSONDecoder().decode(SessionServiceRequest.self, from: Data(line.utf8))
    } catch {
      let reply = SessionServiceReply(
        error: ProtFSError(
          .invalidArgument,
          "The session service cannot read the request: \(SessionWire.problem(error)); it takes one JSON object a line."
        ))
      if answering { SessionWire.send(reply, on: connection) }
      return nil
    }
  }

  /// The reply to `request` from `peer`, or the error it gets: every check of who may ask what is
  /// here, before anything is opened or changed (the unit tests call it without a socket). A
  /// request that waits stops waiting once `hungUp` says the peer closed its connection.
  func answer(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool = { false }) throws(ProtFSError)
    -> SessionServiceReply
  {
    switch request.kind {
    case .ping:
      var reply = SessionServiceReply()
      reply.pid = Kernel.getpid()
      return reply
    case .openSession, .adopt: return try answerSessions(request, peer: peer, hungUp: hungUp)
    case .createDownloadTask, .createUploadTask: return try answerNewTask(request, peer: peer, hungUp: hungUp)
    case .resume, .suspend, .cancel, .setDescription, .invalidate, .tasks:
      return try answerTaskChange(request, peer: peer, hungUp: hungUp)
    case .appTasks, .prune, .subscribe, .acknowledge, .eventsHandled, .markDelivered, .forceQuit, .wake, .wait, .stop:
      return try answerService(request, peer: peer, hungUp: hungUp)
    }
  }

  /// `answer`'s opening or adoption of a session.
  func answerSessions(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool) throws(ProtFSError)
    -> SessionServiceReply
  {
    let reply = SessionServiceReply()
    switch request.kind {
    case .openSession, .adopt:
      guard var configuration = request.configuration else { throw Self.missing("configuration") }
      try configuration.validate()
      // The app the store has the session under, if any: what the app says is checked against it.
      let known = try store.sessions()
      let owner = known.first { $0.identifier == configuration.identifier }?.bundleID
      if configuration.bundleID == nil { configuration.bundleID = try appOf(peer)?.bundleID ?? owner }
      guard let bundle = configuration.bundleID else {
        try authorize(peer, bundleID: "(none)")
        throw ProtFSError(.invalidArgument, "The session '\(configuration.identifier)' names no app.")
      }
      try authorize(peer, bundleID: bundle)
      // An app that names its own bundle and another app's session identifier reaches nothing of
      // that session: it is told the identifier is taken, without whose it is.
      if let owner, owner != bundle {
        throw Self.takenIdentifier(configuration.identifier, owner: peer.isTrustedUser ? owner : nil)
      }
      // Each session the service hosts holds a thread and descriptors, and the store reopens it at
      // every start: an app opens a bounded number (reopening one of its own is always allowed).
      // At the limit, the app's sessions that hold nothing any more make room.
      if owner == nil, !peer.isTrustedUser,
        known.count(where: { $0.bundleID == bundle }) >= Self.maximumSessionsPerApp,
        !forgetIdleSession(of: bundle)
      {
        throw ProtFSError(
          .permissionDenied,
          "The app \(bundle) has \(Self.maximumSessionsPerApp) background sessions with unfinished tasks on this device already; reuse one of their identifiers, or invalidate one (invalidateAndCancel).",
          errno: EPERM)
      }
      // An app's session hands its files over in its Downloads directory: it names no directory
      // for the service to write in (`download --detach`, run by root, does).
      if request.destinationDirectory != nil, !peer.isTrustedUser {
        throw ProtFSError(
          .permissionDenied, "An app's session cannot name a destination directory; its files are handed over.",
          errno: EPERM)
      }
      let settings = HostedSessionSettings(
        configuration: configuration, destinationDirectory: request.destinationDirectory)
      let hosted = try host(settings)
      state.withLock { state in
        _ = state.forceQuit.remove(bundle)
        _ = state.launchNotified.remove(configuration.identifier)
      }
      if request.kind == .adopt {
        _ = try hosted.session.adoptUnfinished()
        // The resume requests `download --detach` recorded with its tasks: these, and those of a
        // detach killed before it handed its tasks over, which this adoption claimed too.
        hosted.session.applyPendingRequests()
        for id in request.tasks ?? [] { hosted.session.task(id: id)?.resume() }
      }
    default: break
    }
    return reply
  }

  /// `answer`'s new tasks.
  func answerNewTask(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool) throws(ProtFSError)
    -> SessionServiceReply
  {
    var reply = SessionServiceReply()
    switch request.kind {
    case .createDownloadTask:
      let hosted = try session(request, peer: peer)
      guard let wanted = request.request else { throw Self.missing("request") }
      try checkNewTask(wanted, in: hosted, peer: peer)
      let task: DownloadTask
      if let data = request.resumeData {
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
      reply.snapshot = snapshot(task.record)
    case .createUploadTask:
      let hosted = try session(request, peer: peer)
      guard let wanted = request.request else { throw Self.missing("request") }
      try checkNewTask(wanted, in: hosted, peer: peer)
      guard let path = request.path else { throw Self.missing("path") }
      let upload = UploadRequest(
        url: wanted.url, method: try UploadMethod.parse(wanted.method),
        headers: wanted.headers,
        taskDescription: wanted.taskDescription)
      let task = try hosted.session.uploadTask(with: upload, fromFile: path, handsOver: true)
      _ = state.withLock { $0.launchNotified.remove(hosted.session.identifier) }
      reply.snapshot = snapshot(task.record)
    default: break
    }
    return reply
  }

  /// `answer`'s changes to a task or a session, and its listing.
  func answerTaskChange(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool) throws(ProtFSError)
    -> SessionServiceReply
  {
    var reply = SessionServiceReply()
    switch request.kind {
    case .resume, .suspend, .cancel, .setDescription:
      let hosted = try session(request, peer: peer)
      guard let id = request.task, let task = hosted.session.task(id: id) else {
        throw ProtFSError(
          .notFound, "The session '\(hosted.session.identifier)' has no task \(request.task ?? 0).",
          remedy: .listTasks)
      }
      switch request.kind {
      case .resume:
        // A date the app gave (`earliestBeginDate`) counts for a task that has not begun yet; one
        // that ran already is resumed as it is.
        if let beginsAt = request.beginsAt, task.record.state == .suspended, task.record.bytesReceived == 0 {
          try task.setEarliestBeginDate(Date(timeIntervalSince1970: beginsAt))
        }
        // Running again, it is no longer one the system cancelled.
        try store.setCancelledReason(nil, tasks: [id])
        task.resume()
      case .suspend: task.suspend()
      case .setDescription:
        try Self.checkDescription(request.text)
        task.taskDescription = request.text
      default:
        if request.producingResumeData == true {
          reply.resumeData = cancelKeepingPartialFile(task, bundleID: hosted.bundleID).flatMap(Self.appleResumeData)
        } else {
          task.cancel()
        }
      }
    case .invalidate:
      let hosted = try session(request, peer: peer)
      invalidate(hosted, cancelling: request.cancelling == true, unless: hungUp)
    case .tasks:
      let hosted = try session(request, peer: peer)
      let reasons = (try? store.cancelledReasons(session: hosted.session.identifier)) ?? [:]
      reply.snapshots = try store.tasks(session: hosted.session.identifier)
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
    default: break
    }
    return reply
  }

  /// `answer`'s app-wide and service-wide requests.
  func answerService(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool) throws(ProtFSError)
    -> SessionServiceReply
  {
    var reply = SessionServiceReply()
    switch request.kind {
    case .appTasks:
      // Session by session: another app's records (request bodies included) are never read.
      var records: [DownloadTaskRecord] = []
      for session in try sessions(request, peer: peer) { records += try store.tasks(session: session) }
      reply.records = records.sorted { $0.id < $1.id }
    case .prune:
      let cutoff = try request.olderThan.map { seconds throws(ProtFSError) in
        guard seconds.isFinite, seconds >= 0 else {
          throw ProtFSError(.invalidArgument, "The request to the session service has an age (olderThan) below zero.")
        }
        return Date().addingTimeInterval(-seconds)
      }
      reply.pruned = try store.prune(finishedBefore: cutoff, sessions: try sessions(request, peer: peer))
    case .subscribe:
      _ = try session(request, peer: peer)
    case .acknowledge:
      guard let session = request.session, let id = request.task else { throw Self.missing("session and task") }
      try acknowledge(id, fileOnly: request.fileOnly == true, session: session, peer: peer)
    case .eventsHandled:
      guard let session = request.session else { throw Self.missing("session") }
      // A session the store does not know has nothing queued: the answer needs nothing more.
      guard let bundle = try? bundleOf(session) else { return reply }
      try authorize(peer, bundleID: bundle, session: session)
      for record in try store.pendingDeliveries(session: session) {
        try store.acknowledge(task: record.id, fileSystem: fileSystem)
      }
      try store.setRelaunchError(nil, session: session)
      // Answered: the next batch of the session may wake or launch the app again.
      _ = state.withLock { $0.launchNotified.remove(session) }
    case .markDelivered:
      let hosted = try self.session(request, peer: peer)
      flushDeliveries(hosted.session.identifier)
      state.withLock { $0.subscribers[hosted.session.identifier] }?.send(.queuedEventsDelivered)
    case .forceQuit:
      guard let bundle = request.bundleID else { throw Self.missing("bundleID") }
      try authorize(peer, bundleID: bundle)
      forceQuitApp(bundle)
    case .wake:
      completeWaitingTasks()
    case .wait:
      reply.notCompleted = try waitUntilSettled(request.tasks ?? [], peer: peer, unless: hungUp)
    case .stop:
      guard peer.uid == 0 else {
        throw ProtFSError(.permissionDenied, "Only root stops the session service.", errno: EPERM)
      }
    default: break
    }
    return reply
  }
}
