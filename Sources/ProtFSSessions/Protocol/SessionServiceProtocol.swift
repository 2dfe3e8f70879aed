import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

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

  /// The request `line` is, or the error the service answers it with: a request without a value
  /// its kind needs is refused as the service refused it when it read it ("has no MEMBER"), any
  /// other line that is no request with what is wrong in a few words.
  static func request(_ line: String) -> Result<SessionServiceRequest, ProtFSError> {
    do {
      return .success(try JSONDecoder().decode(SessionServiceRequest.self, from: Data(line.utf8)))
    } catch let error as ProtFSError {
      return .failure(error)
    } catch {
      return .failure(
        ProtFSError(
          .invalidArgument,
          "The session service cannot read the request: \(problem(error)); it takes one JSON object a line."))
    }
  }

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
