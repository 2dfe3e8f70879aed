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
        socketName, settling: 2, probe: SessionWire.line(SessionServiceRequest(.ping)),
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

/// An app's acknowledgement of a task's delivery that waits for the store.
struct LateAcknowledgement: Equatable {
  /// The task's session.
  var session: String
  /// Whether only the finished file was acknowledged (`didFinishDownloadingTo` returned).
  var fileOnly: Bool
}

/// The process at the other end of a connection.
typealias Peer = PeerCredentials

extension PeerCredentials {
  /// Whether the peer is root or the service's own user, whom the service serves in full.
  var isTrustedUser: Bool { uid == 0 || uid == geteuid() }
}

/// What the store keeps of a service session: the app's configuration and, for sessions of
/// `download --detach`, the directory its tasks were made for.
struct HostedSessionSettings: Codable, Sendable {
  /// The configuration, its bundle id filled in.
  var configuration: SessionConfiguration
  /// The session's destination directory (absolute), nil for handed-over tasks only.
  var destinationDirectory: String?

  /// Marks the session as the service's in `store`, with these settings, so that a service that
  /// starts opens it (and runs its tasks) whether or not it was ever asked to.
  func register(in store: DownloadStore) throws(ProtFSError) {
    let json = String(decoding: (try? JSONEncoder().encode(self)) ?? Data(), as: UTF8.self)
    try store.registerServiceSession(
      identifier: configuration.identifier, bundleID: configuration.bundleID ?? "", configuration: json)
  }

  /// The settings session `identifier`'s store row keeps as `json`, or why they cannot be read.
  static func decode(_ json: String, session identifier: String) -> Result<HostedSessionSettings, ProtFSError> {
    do {
      return .success(try JSONDecoder().decode(HostedSessionSettings.self, from: Data(json.utf8)))
    } catch {
      let shown = json.count > 60 ? String(json.prefix(60)) + "…" : json
      return .failure(
        ProtFSError(
          .io,
          "The configuration of the session '\(identifier)' in the task store is unreadable (\(Self.reason(error))): '\(shown)'. Its tasks wait until its app opens the session again."
        ))
    }
  }

  /// A decoding error in a few words.
  private static func reason(_ error: any Error) -> String {
    switch error as? DecodingError {
    case .dataCorrupted: return "not JSON"
    case .keyNotFound(let key, _): return "no '\(key.stringValue)'"
    case .typeMismatch(_, let context), .valueNotFound(_, let context):
      return "a wrong value at '\(context.codingPath.map(\.stringValue).joined(separator: "."))'"
    default: return FailureReason.of(error)
    }
  }
}

/// A session the service hosts.
final class HostedSession: Sendable {
  /// The transfers.
  let session: DownloadSession
  /// How it was opened.
  let settings: HostedSessionSettings
  /// Its app.
  let bundleID: String

  init(session: DownloadSession, settings: HostedSessionSettings, bundleID: String) {
    self.session = session
    self.settings = settings
    self.bundleID = bundleID
  }

  /// Whether a task of the session still has work to do.
  var hasUnfinishedTasks: Bool { session.hasUnfinishedTasks }
}

/// The connection that streams a session's events to its app, written by a thread of its own.
///
/// No one who produces an event waits for the app: `send` queues it and returns. A suspended app
/// reads nothing, so its writer waits (as long as the connection lasts) while progress goes on
/// arriving; progress is merged in the queue, one entry a task with the bytes added up, so what
/// waits for a frozen app is at most one progress entry and one completion a task. Completions
/// are never dropped or merged: they go out in the order they came, after the task's progress.
///
/// `@unchecked Sendable`: `sent` is touched only inside the service's `state.withLock`; the queue
/// and its state by `condition`; `connection` is written only by the writer thread, and closed by
/// the service only after `finish()` returned.
final class SessionSubscriber: @unchecked Sendable {
  /// The connection.
  let connection: FileDescriptor
  /// Tasks whose completion this subscriber was sent (each at most once).
  var sent: Set<Int64> = []
  /// Tasks whose response this subscriber was sent with their first progress (each at most once).
  var responded: Set<Int64> = []
  private let condition = NSCondition()
  /// Queued events; those before `start` went out.
  private var queue: [SessionEvent] = []
  private var start = 0
  /// How many sent events were removed from the front of `queue`: an entry's number is this plus
  /// its index.
  private var removed = 0
  /// The number of each task's progress entry still queued, into which newer progress merges.
  private var progressEntry: [Int64: Int] = [:]
  /// Set by `finish()` or a failed write: nothing more is queued or written.
  private var ended = false
  private let writerDone = DispatchSemaphore(value: 0)

  init(connection: FileDescriptor) {
    self.connection = connection
    let thread = Thread { [self] in
      write()
      writerDone.signal()
    }
    thread.name = "protfs-subscriber"
    thread.start()
  }

  /// Queues `event` for the app; returns at once.
  func send(_ event: SessionEvent) {
    condition.withLock {
      guard !ended else { return }
      if let task = Self.progressTask(event) {
        if let number = progressEntry[task], let merged = Self.merge(queue[number - removed], event) {
          queue[number - removed] = merged
          return
        }
        progressEntry[task] = removed + queue.count
      }
      queue.append(event)
      condition.signal()
    }
  }

  /// Ends the writer (what is still queued is dropped: the app's next subscription gets its
  /// completions from the store) and waits until it no longer touches the connection.
  func finish() {
    condition.withLock {
      ended = true
      condition.signal()
    }
    ControlSocket.shutDown(connection)
    writerDone.wait()
  }

  /// The writer: the queue's events in order, each written whole; a write that waits out the
  /// socket's send limit (a frozen app) waits again, until the subscription ends.
  private func write() {
    while let event = next() {
      guard writeWhole(SessionWire.line(event)) else {
        condition.withLock { ended = true }
        ControlSocket.shutDown(connection)
        return
      }
    }
  }

  /// The next event to write, nil once the subscription ended.
  private func next() -> SessionEvent? {
    condition.withLock {
      while start == queue.count && !ended { condition.wait() }
      guard !ended else { return nil }
      let event = queue[start]
      if let task = Self.progressTask(event), progressEntry[task] == removed + start { progressEntry[task] = nil }
      start += 1
      if start >= 256 && start * 2 >= queue.count {
        queue.removeFirst(start)
        removed += start
        start = 0
      }
      return event
    }
  }

  /// Writes `line` and its newline; false when the connection failed or the subscription ended.
  /// A write that waited out the send limit with the app reading nothing (it is frozen) waits
  /// again, unless the subscription ended meanwhile.
  private func writeWhole(_ line: String) -> Bool {
    ControlSocket.writeAll(Array(line.utf8) + [0x0A], on: connection) { !condition.withLock { ended } }
  }

  /// The task of a progress event, nil for any other.
  private static func progressTask(_ event: SessionEvent) -> Int64? {
    switch event {
    case .wroteData(let task, _, _, _), .sentBodyData(let task, _, _, _): task
    default: nil
    }
  }

  /// `earlier` and `later`, progress of one task, as one event: the bytes of both, the totals of
  /// `later`; nil when they are not of one kind.
  private static func merge(_ earlier: SessionEvent, _ later: SessionEvent) -> SessionEvent? {
    switch (earlier, later) {
    case (.wroteData(let task, let a, _, _), .wroteData(_, let b, let total, let expected)):
      .wroteData(task: task, bytesWritten: a + b, totalBytesWritten: total, totalBytesExpectedToWrite: expected)
    case (.sentBodyData(let task, let a, _, _), .sentBodyData(_, let b, let total, let expected)):
      .sentBodyData(task: task, bytesSent: a + b, totalBytesSent: total, totalBytesExpectedToSend: expected)
    default: nil
    }
  }
}
