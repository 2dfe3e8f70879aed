import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// How an app opens a background session: what `URLSessionConfiguration.background(withIdentifier:)`
/// carries to the session service.
package struct SessionConfiguration: Sendable, Equatable, Codable {
  /// The session's identifier.
  package var identifier: String
  /// The app it belongs to; nil for the app this process runs as (`PROTFS_APP_BUNDLE`).
  package var bundleID: String?
  /// Connections per host (`httpMaximumConnectionsPerHost`, 6 by default as on iOS).
  package var connectionsPerHost: Int = 6
  /// `timeoutIntervalForRequest`, seconds.
  package var requestTimeout: Double = 60
  /// `timeoutIntervalForResource`, seconds (7 days by default).
  package var resourceTimeout: Double = 7 * 24 * 3600
  /// `isDiscretionary`: kept and shown, it does not delay transfers here.
  package var isDiscretionary: Bool = false
  /// `sessionSendsLaunchEvents`: whether finished tasks relaunch the app.
  package var sendsLaunchEvents: Bool = true
  /// The service's socket; nil for the one `PROTFS_SESSIONS_SOCKET` names.
  package var socketName: String?

  /// Creates a configuration.
  package init(identifier: String, bundleID: String? = nil) {
    self.identifier = identifier
    self.bundleID = bundleID
  }

  /// The connections per host the service accepts (the CLI's `--connections`).
  package static let connectionsRange = 1...64
  /// The timeouts, in seconds, the service accepts for either limit: a millisecond to a year.
  package static let timeoutRange = 0.001...(365 * 86400.0)
  /// The longest session identifier the service accepts, in bytes.
  package static let maximumIdentifierLength = 1024

  /// Throws unless every value is one the service can run: the service believes nothing an app
  /// sends, and a timeout of `1e300` seconds, converted to milliseconds, would trap it.
  package func validate() throws(ProtFSError) {
    if let problem = Self.identifierProblem(identifier) { throw ProtFSError(.invalidArgument, problem) }
    guard Self.connectionsRange.contains(connectionsPerHost) else {
      throw ProtFSError(
        .invalidArgument,
        "The session '\(identifier)' asks for \(connectionsPerHost) connections per host; the session service takes \(Self.connectionsRange.lowerBound) to \(Self.connectionsRange.upperBound)."
      )
    }
    for (name, seconds) in [("request", requestTimeout), ("resource", resourceTimeout)]
    where !Self.timeoutRange.contains(seconds) {
      throw ProtFSError(
        .invalidArgument,
        "The session '\(identifier)' has a \(name) timeout of \(seconds) s; the session service takes 0.001 s to 365 days."
      )
    }
  }

  /// Why `identifier` cannot name a session, nil when it can: 1 to `maximumIdentifierLength`
  /// bytes, none of them a control character (it is shown in listings and error messages).
  package static func identifierProblem(_ identifier: String) -> String? {
    guard
      identifier.isEmpty || identifier.utf8.count > maximumIdentifierLength
        || identifier.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    else { return nil }
    let shown = identifier.unicodeScalars.prefix(80).map { $0.escaped(asASCII: false) }.joined()
    return
      "The session identifier '\(shown)' cannot name a session: give 1 to \(maximumIdentifierLength) bytes without control characters."
  }

  /// The configuration with its limits brought into the ranges the service takes, as
  /// `URLSessionConfiguration` does for what an app sets: a count is clamped, a timeout that is
  /// not a positive number is the default.
  package func clamped() -> SessionConfiguration {
    var result = self
    result.connectionsPerHost = min(
      max(connectionsPerHost, Self.connectionsRange.lowerBound), Self.connectionsRange.upperBound)
    let defaults = SessionConfiguration(identifier: identifier)
    result.requestTimeout = Self.clamp(requestTimeout, default: defaults.requestTimeout)
    result.resourceTimeout = Self.clamp(resourceTimeout, default: defaults.resourceTimeout)
    return result
  }

  private static func clamp(_ seconds: Double, default fallback: Double) -> Double {
    guard seconds.isFinite, seconds > 0 else { return fallback }
    return min(max(seconds, timeoutRange.lowerBound), timeoutRange.upperBound)
  }
}

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
    var request = SessionServiceRequest(.openSession, session: configuration.identifier)
    var configuration = configuration
    if configuration.bundleID == nil { configuration.bundleID = ProcessEnvironment.value(AppEnvironment.bundle) }
    request.configuration = configuration
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
      let reply = try? SessionWire.exchange(SessionServiceRequest(.ping), on: connection, socketName: socketName),
      reply.pid == server.pid
    else { return nil }
    return reply.pid
  }

  private func call(
    _ kind: SessionServiceRequest.Kind, task: Int64? = nil, _ fill: (inout SessionServiceRequest) -> Void = { _ in }
  )
    throws(ProtFSError) -> SessionServiceReply
  {
    var request = SessionServiceRequest(kind, session: identifier, task: task)
    fill(&request)
    return try SessionWire.call(request, socketName: socketName)
  }

  /// A suspended handed-over download task.
  package func createDownloadTask(_ request: SessionRequest, resumeData: Data?) throws(ProtFSError)
    -> SessionTaskSnapshot
  {
    // Refused here too, so that a body too long for the service's socket gets this error, not a
    // connection closed.
    if let body = request.body { try DownloadRequest.checkBodySize(body, url: request.url.absoluteString) }
    let reply = try call(.createDownloadTask) {
      $0.request = request
      $0.resumeData = resumeData
    }
    guard let snapshot = reply.snapshot else { throw ProtFSError(.io, "The session service sent no task.") }
    return snapshot
  }

  /// A suspended upload task; the service reads `path` under the lock rules and snapshots it now.
  package func createUploadTask(_ request: SessionRequest, fromFile path: String) throws(ProtFSError)
    -> SessionTaskSnapshot
  {
    let reply = try call(.createUploadTask) {
      $0.request = request
      $0.path = path
    }
    guard let snapshot = reply.snapshot else { throw ProtFSError(.io, "The session service sent no task.") }
    return snapshot
  }

  /// Starts or continues task `id`, not before `notBefore` when given.
  package func resume(_ id: Int64, notBefore: Date?) throws(ProtFSError) {
    _ = try call(.resume, task: id) { $0.beginsAt = notBefore?.timeIntervalSince1970 }
  }
  /// Pauses task `id`.
  package func suspend(_ id: Int64) throws(ProtFSError) { _ = try call(.suspend, task: id) }
  /// Cancels task `id`, producing resume data when asked.
  package func cancel(_ id: Int64, producingResumeData: Bool) throws(ProtFSError) -> Data? {
    try call(.cancel, task: id) { $0.producingResumeData = producingResumeData }.resumeData
  }
  /// Sets task `id`'s description.
  package func setDescription(_ description: String?, of id: Int64) throws(ProtFSError) {
    _ = try call(.setDescription, task: id) { $0.text = description }
  }
  /// The session's tasks not yet completed to the app.
  package func tasks() throws(ProtFSError) -> [SessionTaskSnapshot] { try call(.tasks).snapshots ?? [] }

  /// Streams the session's events to `handler` on a thread of its own, queued completions first.
  package func subscribe(_ handler: @escaping @Sendable (SessionEvent) -> Void) throws(ProtFSError) {
    let connection = try ControlSocket.connect(socketName, servers: AppUser.trustedServices)
    do {
      _ = try SessionWire.exchange(
        SessionServiceRequest(.subscribe, session: identifier), on: connection, socketName: socketName)
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
  package func markDelivered() throws(ProtFSError) { _ = try call(.markDelivered) }

  private func acknowledge(_ id: Int64, fileOnly: Bool) throws(ProtFSError) {
    var request = SessionServiceRequest(.acknowledge, session: identifier, task: id)
    if fileOnly { request.fileOnly = true }
    let sent = subscription.withLock { connection -> Bool in
      guard let connection else { return false }
      return SessionWire.send(request, on: connection)
    }
    if !sent { _ = try SessionWire.call(request, socketName: socketName) }
  }

  /// The app invalidated the session (`invalidateAndCancel`, `finishTasksAndInvalidate`): the
  /// service cancels its unfinished tasks with `cancelling` and forgets it once none is unfinished
  /// (`SessionServiceRequest.Kind.invalidate`); then the subscription ends.
  package func invalidate(cancelling: Bool) {
    _ = try? call(.invalidate) { $0.cancelling = cancelling }
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

  /// The name of the abstract socket the service of `device` listens on: a hash of its root, so
  /// that any path length fits and two devices never share a name.
  package static func socketName(device: Device) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(device.canonicalRoot.utf8) {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return "protfs-sessions." + String(hash, radix: 16)
  }

  /// The app acknowledged session `session`'s events (`protfs app events-handled`, the completion
  /// handler of `handleEventsForBackgroundURLSession`): the completions it was given are done.
  /// Nothing to do when the service does not run.
  package static func eventsHandled(session: String, bundleID: String, socketName: String) throws(ProtFSError) {
    var request = SessionServiceRequest(.eventsHandled, session: session)
    request.bundleID = bundleID
    // No service, nothing it could have queued: the app's answer needs nothing more.
    do {
      _ = try SessionWire.call(request, socketName: socketName)
    } catch  where error.errno == ENOENT {}
  }

  /// The user force-quit app `bundleID`: its transfers stop (resumable) and it is not relaunched
  /// until its next launch. Nothing to do when the service does not run.
  package static func forceQuit(bundleID: String, socketName: String) throws(ProtFSError) {
    var request = SessionServiceRequest(.forceQuit)
    request.bundleID = bundleID
    do {
      _ = try SessionWire.call(request, socketName: socketName)
    } catch  where error.errno == ENOENT {}
  }

  /// Asks the service at `socketName` to adopt the tasks another process recorded for session
  /// `configuration.identifier` (`download --detach`) and to resume `tasks`.
  package static func adopt(
    _ configuration: SessionConfiguration, destinationDirectory: String?, resuming tasks: [Int64], socketName: String
  ) throws(ProtFSError) {
    var request = SessionServiceRequest(.adopt, session: configuration.identifier)
    request.configuration = configuration
    request.destinationDirectory = destinationDirectory
    request.tasks = tasks
    _ = try SessionWire.call(request, socketName: socketName)
  }

  /// Returns once the service at `socketName` reports every task of `ids` completed, failed or
  /// waiting for unlock (its outcome stored); throws for a task it cannot wait for (unknown, not
  /// the caller's, unfinished and not run by the service) or when the service ends first.
  /// Returns the tasks of `ids` that did not complete (failed, waiting for unlock, or unfinished
  /// when the service stopped).
  @discardableResult
  package static func waitUntilSettled(_ ids: [Int64], socketName: String) throws(ProtFSError) -> [Int64] {
    var notCompleted: [Int64] = []
    // In parts, so that each request stays well within a line's limit: all settled is each part settled.
    for start in stride(from: 0, to: ids.count, by: 4096) {
      var request = SessionServiceRequest(.wait)
      request.tasks = Array(ids[start..<min(start + 4096, ids.count)])
      do {
        notCompleted += try SessionWire.call(request, socketName: socketName).notCompleted ?? []
      } catch  where error.errno == ENOENT && error.path == "@" + socketName {
        throw notRunning(socketName)
      }
    }
    return notCompleted
  }

  /// The task records of the calling app's sessions (root: of `bundleID`'s, or every app's), or of
  /// `session` only, from the service at `socketName`.
  package static func appTasks(session: String?, bundleID: String? = nil, socketName: String) throws(ProtFSError)
    -> [DownloadTaskRecord]
  {
    var request = SessionServiceRequest(.appTasks, session: session)
    request.bundleID = bundleID
    do {
      return try SessionWire.call(request, socketName: socketName).records ?? []
    } catch  where error.errno == ENOENT && error.path == "@" + socketName {
      throw notRunning(socketName)
    }
  }

  /// Asks the service at `socketName` to remove the finished tasks unchanged for `olderThan`
  /// seconds (every finished one when nil) of the caller's app (root: of `bundleID`'s, or of
  /// every app), or of `session` only; returns their ids (`protfs tasks prune`).
  package static func prune(
    olderThan: Double?, session: String?, bundleID: String? = nil, socketName: String
  ) throws(ProtFSError) -> [Int64] {
    var request = SessionServiceRequest(.prune, session: session)
    request.olderThan = olderThan
    request.bundleID = bundleID
    do {
      return try SessionWire.call(request, socketName: socketName).pruned ?? []
    } catch  where error.errno == ENOENT && error.path == "@" + socketName {
      throw notRunning(socketName)
    }
  }

  /// Asks the service at `socketName` to end.
  package static func stop(socketName: String) throws(ProtFSError) {
    _ = try SessionWire.call(SessionServiceRequest(.stop), socketName: socketName)
  }

  /// Asks the service at `socketName` to place finished downloads that waited for unlock.
  package static func wake(socketName: String) throws(ProtFSError) {
    _ = try SessionWire.call(SessionServiceRequest(.wake), socketName: socketName)
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
