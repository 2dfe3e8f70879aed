import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

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
  var isTrustedUser: Bool { uid == 0 || uid == Kernel.geteuid() }
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
