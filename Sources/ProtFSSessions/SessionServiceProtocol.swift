import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

/// One request to the session service: a JSON line on its socket (docs/semantics.md §9).
package struct SessionServiceRequest: Sendable, Codable, Equatable {
  /// What is asked.
  package enum Kind: String, Sendable, Codable {
    /// Is the service there? (the reply carries its pid)
    case ping
    /// Opens (registers) the session `configuration` as a service session.
    case openSession
    /// Adopts the session's tasks recorded in the store by another process (`download --detach`)
    /// and resumes `tasks`.
    case adopt
    /// Creates a handed-over download task for `request` (or `resumeData`).
    case createDownloadTask
    /// Creates an upload task sending the file at `path` with `request`'s method and headers.
    case createUploadTask
    /// Resumes, suspends or cancels task `task`, or sets its description.
    case resume, suspend, cancel, setDescription
    /// The session's tasks not yet completed to the app.
    case tasks
    /// Every task of the peer's app's sessions (root: of `bundleID`'s, or of every app), or of
    /// `session` only, as the task store keeps them (`protfs tasks` inside an app).
    case appTasks
    /// Removes the finished tasks of the peer's app's sessions (root: of `bundleID`'s, or of every
    /// app), or of `session` only, that have not changed for `olderThan` seconds (every finished
    /// one without it): `protfs tasks prune`.
    case prune
    /// Turns the connection into a stream of `SessionEvent` lines.
    case subscribe
    /// The app is done with session `session` (`invalidateAndCancel`, `finishTasksAndInvalidate`):
    /// with `cancelling`, its unfinished tasks are cancelled; once none is unfinished, the service
    /// forgets the session (it stops running it and its records leave the store), so that its
    /// identifier names a new session and it no longer counts among the app's.
    case invalidate
    /// The app is done with task `task`'s completion.
    case acknowledge
    /// The app handled session `session`'s events (`protfs app events-handled`).
    case eventsHandled
    /// Sends `queuedEventsDelivered` to session `session`'s subscriber once every delivery the
    /// service holds for it is written there: an app woken from suspension for its events asks,
    /// so that `urlSessionDidFinishEvents` follows the calls that were waiting.
    case markDelivered
    /// The user force-quit app `bundleID`.
    case forceQuit
    /// Moves finished downloads waiting for unlock into place now.
    case wake
    /// Answers once every task of `tasks` is completed, failed or waiting for unlock (`protfs tasks
    /// wait`); refused for a task that is unfinished and not run by the service.
    case wait
    /// Ends the service.
    case stop
  }

  /// What is asked.
  package var kind: Kind
  /// The session it is about.
  package var session: String?
  /// The session's configuration (`openSession`, `adopt`).
  package var configuration: SessionConfiguration?
  /// The destination directory of a session's placed (not handed-over) tasks, for `adopt`.
  package var destinationDirectory: String?
  /// The request of a new task.
  package var request: SessionRequest?
  /// Resume data to continue (`createDownloadTask`).
  package var resumeData: Data?
  /// The file an upload sends (`createUploadTask`), as the app names it.
  package var path: String?
  /// The task it is about.
  package var task: Int64?
  /// Tasks to resume (`adopt`) or to wait for (`wait`).
  package var tasks: [Int64]?
  /// A description (`setDescription`).
  package var text: String?
  /// Whether a cancel produces resume data.
  package var producingResumeData: Bool?
  /// With `invalidate`: the session's unfinished tasks are cancelled first.
  package var cancelling: Bool?
  /// With `acknowledge`: only the finished file is done with (`didFinishDownloadingTo` returned).
  package var fileOnly: Bool?
  /// The app (`forceQuit`, `eventsHandled`).
  package var bundleID: String?
  /// How many seconds a finished task must have gone unchanged to be pruned (`prune`).
  package var olderThan: Double?
  /// With `resume` of a task not yet begun: it begins no earlier than this, in seconds since 1970
  /// (`earliestBeginDate`).
  package var beginsAt: Double?

  /// Creates a request of `kind`.
  package init(_ kind: Kind, session: String? = nil, task: Int64? = nil) {
    self.kind = kind
    self.session = session
    self.task = task
  }
}

/// The service's answer to one request.
package struct SessionServiceReply: Sendable, Codable, Equatable {
  /// The failure, nil on success.
  package var error: ProtFSError?
  /// The service's pid (`ping`).
  package var pid: Int32?
  /// A task (`createDownloadTask`).
  package var snapshot: SessionTaskSnapshot?
  /// Tasks (`tasks`).
  package var snapshots: [SessionTaskSnapshot]?
  /// Task records (`appTasks`), in their JSON form (no request headers or body).
  package var records: [DownloadTaskRecord]?
  /// The tasks removed (`prune`).
  package var pruned: [Int64]?
  /// Resume data (`cancel` producing it).
  package var resumeData: Data?
  /// The tasks waited for that did not complete (`wait`): failed, waiting for unlock, or left
  /// unfinished by a service that stopped.
  package var notCompleted: [Int64]?

  /// A reply.
  package init(error: ProtFSError? = nil) { self.error = error }
}

/// JSON lines on a connection, both ways.
enum SessionWire {
  /// The longest request line the service reads (2 MiB): room for a download's body of
  /// `DownloadRequest.maximumBodySize` in base64, with its headers.
  static let maximumRequestLine = 2 << 20
  /// The longest reply line a client reads (64 MiB): a listing of many tasks. Clients talk only to
  /// a service whose user they believe.
  static let maximumReplyLine = 64 << 20

  /// `value` as a JSON line's text (without the newline).
  static func line<T: Encodable>(_ value: T) -> String {
    String(decoding: (try? JSONEncoder().encode(value)) ?? Data("{}".utf8), as: UTF8.self)
  }

  /// Writes `value` as one line.
  @discardableResult
  static func send<T: Encodable>(_ value: T, on connection: FileDescriptor) -> Bool {
    guard let data = try? JSONEncoder().encode(value) else { return false }
    return ControlSocket.writeAll(Array(data) + [0x0A], on: connection)
  }

  /// A decoding error in a few words, for a reply (never the line itself, which may be huge).
  static func problem(_ error: any Error) -> String { WireDecoding.problem(error) }

  /// Reads one line as `T`; nil at the end of the connection or for a line that is not one.
  static func receive<T: Decodable>(
    _ type: T.Type, on connection: FileDescriptor, limit: Int = ControlSocket.maximumLine
  ) -> T? {
    guard let line = ControlSocket.readLine(connection, limit: limit) else { return nil }
    return try? JSONDecoder().decode(T.self, from: Data(line.utf8))
  }

  /// Sends `request` on a new connection to `@socketName` and returns the reply's content, throwing
  /// its error.
  static func call(_ request: SessionServiceRequest, socketName: String) throws(ProtFSError) -> SessionServiceReply {
    let connection = try ControlSocket.connect(socketName, servers: AppUser.trustedServices)
    defer { connection.close() }
    return try exchange(request, on: connection, socketName: socketName)
  }

  /// Sends `request` on `connection` and reads its reply.
  static func exchange(_ request: SessionServiceRequest, on connection: FileDescriptor, socketName: String)
    throws(ProtFSError) -> SessionServiceReply
  {
    // A service that turns the peer away answers before it reads anything and closes the
    // connection, so the send may fail with the refusal there to read.
    let sent = send(request, on: connection)
    guard let reply = receive(SessionServiceReply.self, on: connection, limit: maximumReplyLine),
      sent || reply.error != nil
    else {
      throw ProtFSError(
        .io, "The session service at '@\(socketName)' did not answer.", path: "@" + socketName,
        remedy: .restartSessionService)
    }
    if let error = reply.error { throw error }
    return reply
  }
}
