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
        if case .acknowledge(_, let id, let fileOnly) = request {
          // A subscription gets no replies: a refused acknowledgement changes nothing, and one the
          // store could not take waits in `lateAcknowledgements`.
          try? acknowledge(id, fileOnly: fileOnly, session: session, peer: peer)
        }
        continue
      }
      var reply = SessionServiceReply()
      do throws(ProtFSError) {
        reply = try answer(request, peer: peer) { ControlSocket.hasHungUp(connection) }
      } catch {
        reply.error = error
      }
      if case .subscribe(let session) = request, reply.error == nil {
        // A subscription speaks only to acknowledge: its reads wait as long as it lasts.
        ControlSocket.limitWaits(connection, reads: false)
        SessionWire.send(reply, on: connection)
        subscribed = session
        subscriber = subscribe(session, connection: connection)
        continue
      }
      SessionWire.send(reply, on: connection)
      if request == .stop, reply.error == nil { stop() }
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
    switch SessionWire.request(line) {
    case .success(let request): return request
    case .failure(let error):
      if answering { SessionWire.send(SessionServiceReply(error: error), on: connection) }
      return nil
    }
  }

  /// The reply to `request` from `peer`, or the error it gets: every check of who may ask what is
  /// here, before anything is opened or changed (the unit tests call it without a socket). A
  /// request that waits stops waiting once `hungUp` says the peer closed its connection.
  func answer(_ request: SessionServiceRequest, peer: Peer, hungUp: () -> Bool = { false }) throws(ProtFSError)
    -> SessionServiceReply
  {
    var reply = SessionServiceReply()
    switch request {
    case .ping: reply.pid = Kernel.getpid()
    case .openSession(let configuration, let directory):
      try open(configuration, destinationDirectory: directory, adopting: nil, peer: peer)
    case .adopt(let configuration, let directory, let tasks):
      try open(configuration, destinationDirectory: directory, adopting: tasks, peer: peer)
    case .createDownloadTask(let session, let wanted, let resumeData):
      reply.snapshot = try createDownloadTask(wanted, resumeData: resumeData, in: session, peer: peer)
    case .createUploadTask(let session, let wanted, let path):
      reply.snapshot = try createUploadTask(wanted, fromFile: path, in: session, peer: peer)
    case .resume(let session, let id, let beginsAt): try resume(id, beginsAt: beginsAt, in: session, peer: peer)
    case .suspend(let session, let id): try task(id, in: session, peer: peer).task.suspend()
    case .cancel(let session, let id, let producingResumeData):
      reply.resumeData = try cancel(id, producingResumeData: producingResumeData, in: session, peer: peer)
    case .setDescription(let session, let id, let text):
      let task = try self.task(id, in: session, peer: peer).task
      try Self.checkDescription(text)
      task.taskDescription = text
    case .invalidate(let session, let cancelling):
      invalidate(try self.session(session, peer: peer), cancelling: cancelling, unless: hungUp)
    case .tasks(let session): reply.snapshots = try pendingSnapshots(of: session, peer: peer)
    case .appTasks(let session, let bundleID):
      // Session by session: another app's records (request bodies included) are never read.
      var records: [DownloadTaskRecord] = []
      for listed in try sessions(session, bundleID: bundleID, peer: peer) {
        records += try store.tasks(session: listed)
      }
      reply.records = records.sorted { $0.id < $1.id }
    case .prune(let session, let bundleID, let olderThan):
      reply.pruned = try prune(olderThan: olderThan, session: session, bundleID: bundleID, peer: peer)
    case .subscribe(let session): _ = try self.session(session, peer: peer)
    case .acknowledge(let session, let id, let fileOnly):
      try acknowledge(id, fileOnly: fileOnly, session: session, peer: peer)
    case .eventsHandled(let session): try eventsHandled(session, peer: peer)
    case .markDelivered(let session):
      let hosted = try self.session(session, peer: peer)
      flushDeliveries(hosted.session.identifier)
      state.withLock { $0.subscribers[hosted.session.identifier] }?.send(.queuedEventsDelivered)
    case .forceQuit(let bundle):
      try authorize(peer, bundleID: bundle)
      forceQuitApp(bundle)
    case .wake: completeWaitingTasks()
    case .wait(let tasks): reply.notCompleted = try waitUntilSettled(tasks, peer: peer, unless: hungUp)
    case .stop:
      guard peer.uid == 0 else {
        throw ProtFSError(.permissionDenied, "Only root stops the session service.", errno: EPERM)
      }
    }
    return reply
  }

  /// `answer`'s opening of session `configuration` (`openSession`), or its adoption, resuming
  /// `adopting` (`adopt`).
  func open(
    _ configuration: SessionConfiguration, destinationDirectory: String?, adopting: [Int64]?, peer: Peer
  ) throws(ProtFSError) {
    var configuration = configuration
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
    if destinationDirectory != nil, !peer.isTrustedUser {
      throw ProtFSError(
        .permissionDenied, "An app's session cannot name a destination directory; its files are handed over.",
        errno: EPERM)
    }
    let hosted = try host(
      HostedSessionSettings(configuration: configuration, destinationDirectory: destinationDirectory))
    state.withLock { state in
      _ = state.forceQuit.remove(bundle)
      _ = state.launchNotified.remove(configuration.identifier)
    }
    guard let adopting else { return }
    _ = try hosted.session.adoptUnfinished()
    // The resume requests `download --detach` recorded with its tasks: these, and those of a
    // detach killed before it handed its tasks over, which this adoption claimed too.
    hosted.session.applyPendingRequests()
    for id in adopting { hosted.session.task(id: id)?.resume() }
  }
}
