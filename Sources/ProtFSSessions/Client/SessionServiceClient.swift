import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The session service's client: a `SessionBackend` whose transfers run in the service.
///
/// Every request is one connection, except the subscription, which stays open and carries the
/// acknowledgements back.
package final class SessionServiceClient: SessionBackend, Sendable {
  /// The session's identifier.
  package let identifier: String
  /// The service's socket.
  package let socketName: String
  private let subscription = Mutex<FileDescriptor?>(nil)

  private init(identifier: String, socketName: String) {
    self.identifier = identifier
    self.socketName = socketName
  }

  /// The environment variable naming the service's socket inside apps.
  package static let socketEnvironment = AppEnvironment.sessionsSocket

  /// Connects to the service and opens the session `configuration.identifier`.
  ///
  /// The socket is `configuration.socketName`, else `PROTFS_SESSIONS_SOCKET`. When nothing listens
  /// there and this process runs inside an app (`PROTFS_APP_SOCKET`), the app's supervisor is asked
  /// to start the service; a root caller starts it with the CLI's `SessionServiceStarter` first.
  package static func open(_ configuration: SessionConfiguration) throws(ProtFSError) -> SessionServiceClient {
    guard let socketName = configuration.socketName ?? ProcessEnvironment.value(socketEnvironment) else {
      throw ProtFSError(
        .notFound, "No session service is known to this process (\(socketEnvironment) is not set).",
        remedy: .advice("run the program as an app, or give the configuration its socketName"))
    }
    var configuration = configuration
    if configuration.bundleID == nil { configuration.bundleID = ProcessEnvironment.value(AppEnvironment.bundle) }
    let request = SessionServiceRequest.openSession(configuration)
    do {
      _ = try SessionWire.call(request, socketName: socketName)
    } catch  where error.errno == ENOENT {
      guard let supervisor = ProcessEnvironment.value(AppEnvironment.socket) else { throw notRunning(socketName) }
      try askSupervisorToStart(supervisor: supervisor, socketName: socketName)
      _ = try SessionWire.call(request, socketName: socketName)
    }
    return SessionServiceClient(identifier: configuration.identifier, socketName: socketName)
  }

  /// A client of the existing session `identifier` at `socketName`, without opening it (the
  /// service checks the session and the caller at each request): `protfs tasks events`.
  package static func attach(identifier: String, socketName: String) -> SessionServiceClient {
    SessionServiceClient(identifier: identifier, socketName: socketName)
  }

  /// The error for a service that does not run.
  static func notRunning(_ socketName: String) -> ProtFSError {
    ProtFSError(
      .notFound, "The session service at '@\(socketName)' does not run.", path: "@" + socketName, errno: ENOENT,
      remedy: .startSessionService)
  }

  /// Asks the app's supervisor to start the service, then waits (up to 10 s) until it answers.
  private static func askSupervisorToStart(supervisor: String, socketName: String) throws(ProtFSError) {
    let name = supervisor.hasPrefix("@") ? String(supervisor.dropFirst()) : supervisor
    let reply = try AppClient.send(.startSessionService, to: name)
    if let refusal = reply.error {
      throw ProtFSError(
        .io, "The app's supervisor did not start the session service: \(refusal.message)", path: "@" + socketName,
        remedy: .startSessionService)
    }
    try waitUntilListening(socketName, timeout: 10)
  }

  /// Waits until the service at `socketName` answers a ping, polling with a growing pause (an
  /// abstract socket gives no signal of its binding), for at most `timeout` seconds.
  package static func waitUntilListening(_ socketName: String, timeout: Double) throws(ProtFSError) {
    let deadline = Date().addingTimeInterval(timeout)
    var pause = 0.005
    while true {
      if ping(socketName: socketName) != nil { return }
      if let squatter = untrustedHolder(of: socketName) { throw squatter }
      guard Date() < deadline else { throw notRunning(socketName) }
      Thread.sleep(forTimeInterval: pause)
      pause = min(pause * 2, 0.2)
    }
  }

  /// The error for a process that is not a protfs service holding `socketName`, if one does:
  /// anyone may bind an abstract name first, and clients believe no answer of such a process.
  package static func untrustedHolder(of socketName: String) -> ProtFSError? {
    guard let holder = ControlSocket.untrustedHolder(of: socketName, trusting: AppUser.trustedServices) else {
      return nil
    }
    return ProtFSError(
      .permissionDenied,
      "The session service's socket '@\(socketName)' is held by process \(holder.pid) of user \(holder.uid), which is not a protfs service; protfs does not talk to it.",
      path: "@" + socketName, errno: EPERM, remedy: .advice("end process \(holder.pid), then start the service again"))
  }

  /// The pid of the service at `socketName`, nil when none answers.
  ///
  /// The answer counts only from a service of a user clients believe, and only when the pid it
  /// claims is the one the kernel gives for the process that answered.
  package static func ping(socketName: String) -> Int32? {
    guard let connection = try? ControlSocket.connect(socketName, servers: AppUser.trustedServices) else { return nil }
    defer { connection.close() }
    guard let server = PeerCredentials(of: connection),
      let reply = try? SessionWire.exchange(.ping, on: connection, socketName: socketName),
      reply.pid == server.pid
    else { return nil }
    return reply.pid
  }

  private func call(_ request: SessionServiceRequest) throws(ProtFSError) -> SessionServiceReply {
    try SessionWire.call(request, socketName: socketName)
  }

  /// A suspended handed-over download task.
  package func createDownloadTask(_ request: SessionRequest, resumeData: Data?) throws(ProtFSError)
    -> SessionTaskSnapshot
  {
    // Refused here too, so that a body too long for the service's socket gets this error, not a
    // connection closed.
    if let body = request.body { try DownloadRequest.checkBodySize(body, url: request.url.absoluteString) }
    let reply = try call(.createDownloadTask(session: identifier, request, resumeData: resumeData))
    guard let snapshot = reply.snapshot else { throw ProtFSError(.io, "The session service sent no task.") }
    return snapshot
  }

  /// A suspended upload task; the service reads `path` under the lock rules and snapshots it now.
  package func createUploadTask(_ request: SessionRequest, fromFile path: String) throws(ProtFSError)
    -> SessionTaskSnapshot
  {
    let reply = try call(.createUploadTask(session: identifier, request, path: path))
    guard let snapshot = reply.snapshot else { throw ProtFSError(.io, "The session service sent no task.") }
    return snapshot
  }

  /// Starts or continues task `id`, not before `notBefore` when given.
  package func resume(_ id: Int64, notBefore: Date?) throws(ProtFSError) {
    _ = try call(.resume(session: identifier, task: id, beginsAt: notBefore?.timeIntervalSince1970))
  }
  /// Pauses task `id`.
  package func suspend(_ id: Int64) throws(ProtFSError) { _ = try call(.suspend(session: identifier, task: id)) }
  /// Cancels task `id`, producing resume data when asked.
  package func cancel(_ id: Int64, producingResumeData: Bool) throws(ProtFSError) -> Data? {
    try call(.cancel(session: identifier, task: id, producingResumeData: producingResumeData)).resumeData
  }
  /// Sets task `id`'s description.
  package func setDescription(_ description: String?, of id: Int64) throws(ProtFSError) {
    _ = try call(.setDescription(session: identifier, task: id, text: description))
  }
  /// The session's tasks not yet completed to the app.
  package func tasks() throws(ProtFSError) -> [SessionTaskSnapshot] {
    try call(.tasks(session: identifier)).snapshots ?? []
  }

  /// Streams the session's events to `handler` on a thread of its own, queued completions first.
  package func subscribe(_ handler: @escaping @Sendable (SessionEvent) -> Void) throws(ProtFSError) {
    let connection = try ControlSocket.connect(socketName, servers: AppUser.trustedServices)
    do {
      _ = try SessionWire.exchange(
        .subscribe(session: identifier), on: connection, socketName: socketName)
    } catch {
      connection.close()
      throw error
    }
    let previous = subscription.withLock { current -> FileDescriptor? in
      defer { current = connection }
      return current
    }
    if let previous { ControlSocket.shutDown(previous) }
    let thread = Thread {
      while let event = SessionWire.receive(SessionEvent.self, on: connection) { handler(event) }
    }
    thread.name = "protfs.sessions.subscription"
    thread.start()
  }

  /// Task `id`'s completion is done with (on the subscription when there is one).
  package func acknowledge(_ id: Int64) throws(ProtFSError) { try acknowledge(id, fileOnly: false) }

  /// Task `id`'s finished file is done with; its completion is still to come.
  package func acknowledgeFile(_ id: Int64) throws(ProtFSError) { try acknowledge(id, fileOnly: true) }

  /// Asks the service to mark the end of the deliveries waiting for the subscription.
  package func markDelivered() throws(ProtFSError) { _ = try call(.markDelivered(session: identifier)) }

  private func acknowledge(_ id: Int64, fileOnly: Bool) throws(ProtFSError) {
    let request = SessionServiceRequest.acknowledge(session: identifier, task: id, fileOnly: fileOnly)
    let sent = subscription.withLock { connection -> Bool in
      guard let connection else { return false }
      return SessionWire.send(request, on: connection)
    }
    if !sent { _ = try SessionWire.call(request, socketName: socketName) }
  }

  /// The app invalidated the session (`invalidateAndCancel`, `finishTasksAndInvalidate`): the
  /// service cancels its unfinished tasks with `cancelling` and forgets it once none is unfinished
  /// (`SessionServiceRequest.invalidate`); then the subscription ends.
  package func invalidate(cancelling: Bool) {
    _ = try? call(.invalidate(session: identifier, cancelling: cancelling))
    detach()
  }

  /// Ends the subscription: this object is done with the session, whose transfers go on in the
  /// service (a shell app's `download --detach`, `tasks events`).
  package func detach() {
    let connection = subscription.withLock { current -> FileDescriptor? in
      defer { current = nil }
      return current
    }
    if let connection { ControlSocket.shutDown(connection) }
  }
}

/// Tells the app a session's events wait (docs/semantics.md §9), for the service: ProtFSCLI
/// implements it with `protfs app`'s supervisor (post `handleEventsForBackgroundURLSession` to a
/// running app, or launch it in the background with the command it was last launched with).
package protocol SessionAppLauncher: Sendable {
  /// Delivers "session `session`'s events wait" to app `bundleID`, launching it when it is not
  /// running. Throws when it cannot: the user force-quit it, it was never launched, the launch failed.
  func deliverEvents(of session: String, to bundleID: String) throws(ProtFSError)
  /// Whether the user force-quit app `bundleID` (its transfers stop until its next launch).
  func isForceQuit(_ bundleID: String) -> Bool
  /// Whether app `bundleID` is suspended: its sessions' subscriptions are open, but it reads none
  /// of them until the system wakes it.
  func isSuspended(_ bundleID: String) -> Bool
}

extension SessionAppLauncher {
  /// No app is ever suspended (a launcher that knows of no supervisor).
  package func isSuspended(_ bundleID: String) -> Bool { false }
}
