import Foundation
import ProtFS
import ProtFSSystem

/// Sends requests to a running app's supervisor.
public enum AppClient {
  /// Sends `request` to the supervisor listening on `@socketName`; throws `.notFound` when none does.
  public static func send(_ request: AppRequest, to socketName: String) throws(ProtFSError) -> AppReply {
    try begin(request, to: socketName).reply()
  }

  /// Sends `request` and returns without waiting for the reply, which `Pending.reply()` reads: the
  /// caller goes on meanwhile (the app's launch runs while its supervisor starts watching it).
  /// Throws `.notFound` when no supervisor listens, `.io` when the request cannot be written.
  public static func begin(_ request: AppRequest, to socketName: String) throws(ProtFSError) -> Pending {
    let connection = try ControlSocket.connect(socketName, servers: AppUser.trustedServices)
    guard let data = try? JSONEncoder().encode(request),
      ControlSocket.writeLine(connection, String(decoding: data, as: UTF8.self))
    else {
      connection.close()
      throw Pending.unanswered(socketName)
    }
    return Pending(connection: connection, socketName: socketName)
  }

  /// A request sent whose reply was not read yet.
  public final class Pending {
    private let connection: FileDescriptor
    private let socketName: String

    fileprivate init(connection: FileDescriptor, socketName: String) {
      self.connection = connection
      self.socketName = socketName
    }

    deinit { connection.close() }

    /// Waits for the reply (the supervisor has carried the request out once it answers).
    public func reply() throws(ProtFSError) -> AppReply {
      guard let line = ControlSocket.readLine(connection),
        let reply = try? JSONDecoder().decode(AppReply.self, from: Data(line.utf8))
      else { throw Self.unanswered(socketName) }
      return reply
    }

    fileprivate static func unanswered(_ socketName: String) -> ProtFSError {
      ProtFSError(.io, "The app's supervisor at '@\(socketName)' did not answer.", path: "@" + socketName)
    }
  }
}
