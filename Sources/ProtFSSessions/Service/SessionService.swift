import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The device's session service (docs/semantics.md §9): one process that owns every background
/// session's transfers, so that they go on while their app is suspended or gone.
///
/// It hosts one `DownloadSession` per service session (marked in the task store with its
/// configuration), claims their tasks through the store's lease, answers JSON lines on an abstract
/// socket, hands finished files to subscribers, and tells apps their events wait through a
/// `SessionAppLauncher`. Binding the socket is the "already running" check.
///
/// Its mutable state is one `State` behind one `Mutex` (docs/architecture.md, "Isolation of
/// long-lived services"); everything else it holds is immutable or Sendable, so it is Sendable
/// without an unchecked promise.
package final class SessionService: Sendable {
  /// Marks session `configuration.identifier` in `store` as one the service runs, with
  /// `configuration` and its `destinationDirectory`, as a handover would: `download --detach` does
  /// so before recording its first task, so that a service started after the command died
  /// before any handover still opens the session and runs the tasks it recorded.
  package static func register(
    _ configuration: SessionConfiguration, destinationDirectory: String?, in store: DownloadStore
  ) throws(ProtFSError) {
    try HostedSessionSettings(configuration: configuration, destinationDirectory: destinationDirectory)
      .register(in: store)
  }

  /// The device.
  package let device: Device
  /// The socket's abstract name.
  package let socketName: String
  /// The quiet time after which a service with no unfinished task and no connection exits.
  package let idleExit: Double
  /// How long a peer has to finish a request line it has begun, in seconds.
  package let lineTimeout: Double
  let launcher: (any SessionAppLauncher)?
  let store: DownloadStore
  let fileSystem: DeviceDownloadFileSystem
  /// Everything about the service that changes, behind `state`: taken for no longer than it takes
  /// to read or change these fields, never across a socket write, a store transaction or a call
  /// into an app.
  struct State {
    /// The sessions the service runs, by identifier.
    var hosted: [String: HostedSession] = [:]
    /// The subscribed event stream of each session, by identifier.
    var subscribers: [String: SessionSubscriber] = [:]
    /// Open connections.
    var connections = 0
    /// Open connections of each app, by bundle id.
    var connectionsByApp: [String: Int] = [:]
    /// The last time a connection came or went, or a task was unfinished.
    var lastActivity = Date()
    /// Set by `stop()`.
    var stopped = false
    /// The apps force-quit since they last opened a session, by bundle id.
    var forceQuit: Set<String> = []
    /// The sessions whose app was told its events wait and has not answered yet.
    var launchNotified: Set<String> = []
    /// Acknowledgements the store could not record when they came, by task.
    var lateAcknowledgements: [Int64: LateAcknowledgement] = [:]
    /// The listening socket, once bound.
    var listener: FileDescriptor?
  }

  /// The service's mutable state.
  let state = Mutex(State())

  /// A service for `device`; `run()` starts it.
  package init(
    device: Device, launcher: (any SessionAppLauncher)?, idleExit: Double = 30,
    lineTimeout: Double = ControlSocket.lineTimeout
  ) throws(ProtFSError) {
    try device.requireInitialized()
    self.device = device
    self.launcher = launcher
    self.idleExit = idleExit
    self.lineTimeout = lineTimeout
    socketName = SessionServiceClient.socketName(device: device)
    store = try DownloadStore(path: device.downloadStorePath)
    fileSystem = DeviceDownloadFileSystem(device: device)
  }

  /// Binds the socket (throwing `.alreadyExists` when another service has it), reopens the service
  /// sessions of the store (their unfinished tasks resume), then answers connections until `stop()`
  /// or the idle timeout. `ready` is called once the socket accepts connections.
  package func run(ready: () -> Void = {}) throws(ProtFSError) {
    guard
      let socket = try ControlSocket.listenAsService(
        socketName, settling: 2, probe: SessionWire.line(SessionServiceRequest.ping),
        trusting: AppUser.trustedServices, subject: "The session service of '\(device.root)' cannot listen",
        service: "service", retry: "start the service again")
    else {
      throw ProtFSError(
        .alreadyExists, "The session service of '\(device.root)' already runs.", path: "@" + socketName,
        remedy: .restartSessionService)
    }
    state.withLock { $0.listener = socket }
    // Loaded before anything is transferred or accepted, so that the first download does not
    // pay for it (a command that only records tasks never loads it).
    TransferEngine.loadLibcurl()
    restore()
    ready()
    startIdleWatch()
    while let (connection, peer) = ControlSocket.accept(socket) {
      if state.withLock({ $0.stopped }) {
        connection.close()
        break
      }
      // Checked before the peer gets a thread or a buffer: a user the service serves nothing is
      // told so and let go at once, and the app user's connections are capped.
      let app: String?
      switch admit(peer) {
      case .success(let admitted): app = admitted
      case .failure(let refusal):
        ControlSocket.refuse(connection, line: SessionWire.line(SessionServiceReply(error: refusal)))
        continue
      }
      let thread = Thread { [self] in
        ControlSocket.limitWaits(connection)
        serve(connection, peer: peer)
        connection.close()
        state.withLock { state in
          state.connections -= 1
          if let app {
            state.connectionsByApp[app, default: 1] -= 1
            if state.connectionsByApp[app] == 0 { state.connectionsByApp[app] = nil }
          }
          state.lastActivity = Date()
        }
      }
      thread.name = "protfs.sessions.connection"
      thread.start()
    }
    shutdown()
  }

  /// The most connections one app may hold open at once (its sessions, their subscriptions and
  /// its helper commands together); root and the service's own user are not counted.
  package static let connectionsPerApp = 64

  /// Counts `peer`'s connection in, giving the app it is counted under (nil for root and the
  /// service's own user, who may always talk to it), or says why it is refused: a process of the
  /// app user is served only while it runs as an app, each app up to `connectionsPerApp`
  /// connections; anyone else not at all. A process of the app user outside every app (which
  /// every request would refuse anyway) is let go at once, so that it cannot hold the slots apps
  /// need.
  private func admit(_ peer: PeerCredentials) -> Result<String?, ProtFSError> {
    var app: String?
    if !peer.isTrustedUser {
      guard peer.uid == AppUser.standard.uid else {
        return .failure(
          ProtFSError(
            .permissionDenied,
            "User \(peer.uid) may not use the session service of '\(device.root)': only root and its apps may.",
            errno: EPERM))
      }
      guard let bundle = (try? appOf(peer))?.bundleID else {
        return .failure(
          ProtFSError(
            .permissionDenied,
            "Process \(peer.pid) (uid \(peer.uid)) is not running as an app; only root or the app a session belongs to may use the session service.",
            errno: EPERM, remedy: .useSessionFromItsApp))
      }
      app = bundle
    }
    return state.withLock { state -> Result<String?, ProtFSError> in
      if let app {
        guard state.connectionsByApp[app, default: 0] < Self.connectionsPerApp else {
          return .failure(
            ProtFSError(
              .permissionDenied,
              "The app \(app) holds \(Self.connectionsPerApp) connections to the session service already; close one first.",
              errno: EPERM))
        }
        state.connectionsByApp[app, default: 0] += 1
      }
      state.connections += 1
      state.lastActivity = Date()
      return .success(app)
    }
  }

  /// Ends the service: no new connection is taken, transfers stop (their tasks stay in the store
  /// for the next start).
  package func stop() {
    let socket = state.withLock { state -> FileDescriptor? in
      state.stopped = true
      return state.listener
    }
    if let socket { ControlSocket.shutDown(socket) }
  }

  /// Moves finished downloads that waited for unlock into place (the device unlocked).
  package func completeWaitingTasks() {
    for hosted in state.withLock({ Array($0.hosted.values) }) { hosted.session.completeWaitingTasks() }
  }

  private func shutdown() {
    let all = state.withLock { state -> [HostedSession] in
      defer { state.hosted.removeAll() }
      return Array(state.hosted.values)
    }
    for hosted in all {
      hosted.session.invalidate()
    }
    let subscribed = state.withLock { Array($0.subscribers.values) }
    for subscriber in subscribed { ControlSocket.shutDown(subscriber.connection) }
    state.withLock { state in if let listener = state.listener { listener.close() } }
  }

  /// Reports on the service's standard error what it could not do but carries on without.
  func report(_ problem: String) {
    FileHandle.standardError.write(Data("protfs sessions: \(problem)\n".utf8))
  }

  /// Reopens every service session of the store; one that cannot be opened is reported and skipped.
  private func restore() {
    guard let sessions = try? store.serviceSessions() else { return }
    for (identifier, _, json) in sessions {
      let settings: HostedSessionSettings
      switch HostedSessionSettings.decode(json, session: identifier) {
      case .success(let decoded): settings = decoded
      case .failure(let problem):
        // `protfs sessions` shows the same problem, read from the store.
        report("cannot reopen '\(identifier)': \(problem.message)")
        continue
      }
      do {
        _ = try host(settings)
      } catch {
        report("cannot reopen '\(identifier)': \(error.message)")
      }
    }
    for identifier in state.withLock({ Array($0.hosted.keys) }) { checkRelaunch(identifier) }
  }

  /// Why the service cannot reopen session `identifier`, whose stored configuration is `json` (nil
  /// when it can): the text `protfs sessions` shows for a damaged store row.
  package static func storedConfigurationProblem(_ json: String, session identifier: String) -> String? {
    if case .failure(let problem) = HostedSessionSettings.decode(json, session: identifier) { return problem.message }
    return nil
  }

  /// Exits the service after `idleExit` seconds with no connection and no unfinished task.
  private func startIdleWatch() {
    let thread = Thread { [self] in
      let step = max(0.05, min(1, idleExit / 4))
      while true {
        Thread.sleep(forTimeInterval: step)
        let (done, quiet) = state.withLock { state -> (Bool, Bool) in
          if state.stopped { return (true, false) }
          // What the store could not take yet would be lost with the process.
          let busy =
            state.connections > 0 || !state.lateAcknowledgements.isEmpty
            || state.hosted.values.contains { $0.hasUnfinishedTasks || !$0.session.unsavedSettlements().isEmpty }
          if busy { state.lastActivity = Date() }
          return (false, !busy && Date().timeIntervalSince(state.lastActivity) >= idleExit)
        }
        if done { return }
        recordLateAcknowledgements()
        wakeSuspendedSubscribers()
        if quiet {
          stop()
          return
        }
      }
    }
    thread.name = "protfs.sessions.idle"
    thread.start()
  }
}
