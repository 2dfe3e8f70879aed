import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// What the service takes from an app: its limits, and the checks of a new task against them.
extension SessionService {
  /// Throws unless the service may fetch `url` for `peer`. The service runs as root, and libcurl
  /// reads a `file:` URL with the service's rights: fetched for an app, it would copy whatever root
  /// can read into the app's container. An app's session takes http and https only, as an iOS
  /// background session does; root (`download --detach`) may name a file.
  static func checkFetchable(_ url: URL, for peer: Peer) throws(ProtFSError) {
    let scheme = url.scheme?.lowercased() ?? ""
    if scheme == "http" || scheme == "https" {
      guard let host = url.host, !host.isEmpty else {
        throw ProtFSError(
          .invalidArgument, "The URL '\(url.absoluteString)' names no host.",
          remedy: .advice("give an http or https URL with a host"))
      }
      return
    }
    if scheme == "file" && peer.isTrustedUser { return }
    throw ProtFSError(
      .permissionDenied,
      "A background session downloads only http and https URLs, not '\(url.absoluteString)'.", errno: EPERM,
      remedy: .advice("give an http or https URL"))
  }

  /// The most sessions one app may have on the device.
  package static let maximumSessionsPerApp = 32

  /// The most unfinished tasks one app may have in all its sessions: each is kept in the store
  /// (root's, shared by every app) and listed whole by `tasks`.
  package static let maximumUnfinishedTasksPerApp = 10_000
  /// The longest task description kept, in bytes.
  package static let maximumDescriptionLength = 4096
  /// The longest URL a task may have, in bytes.
  package static let maximumURLLength = 16 << 10
  /// The most bytes a task's header names and values may have together.
  package static let maximumHeaderBytes = 64 << 10

  /// Throws unless `request` may become a new task of `hosted` for `peer`: its description,
  /// URL and headers within their limits, and (for an app) its app below its task limit.
  func checkNewTask(_ request: SessionRequest, in hosted: HostedSession, peer: Peer) throws(ProtFSError) {
    try Self.checkDescription(request.taskDescription)
    let url = request.url.absoluteString
    guard url.utf8.count <= Self.maximumURLLength else {
      throw ProtFSError(
        .invalidArgument, "The URL '\(url.prefix(80))…' is longer than \(Self.maximumURLLength) bytes.")
    }
    guard request.headers.reduce(0, { $0 + $1.name.utf8.count + $1.value.utf8.count }) <= Self.maximumHeaderBytes
    else {
      throw ProtFSError(.invalidArgument, "The request's headers are longer than \(Self.maximumHeaderBytes) bytes.")
    }
    guard !peer.isTrustedUser else { return }
    let sessions = try store.sessions().filter { $0.bundleID == hosted.bundleID }.map(\.identifier)
    guard try store.unfinishedTaskCount(sessions: sessions) < Self.maximumUnfinishedTasksPerApp else {
      throw ProtFSError(
        .permissionDenied,
        "The app \(hosted.bundleID) has \(Self.maximumUnfinishedTasksPerApp) unfinished background tasks already; cancel some or wait for them.",
        errno: EPERM)
    }
  }

  /// Throws for a task description longer than `maximumDescriptionLength` bytes.
  static func checkDescription(_ text: String?) throws(ProtFSError) {
    guard let text, text.utf8.count > maximumDescriptionLength else { return }
    throw ProtFSError(
      .invalidArgument,
      "The task description is \(text.utf8.count) bytes long; the session service keeps at most \(maximumDescriptionLength)."
    )
  }
}
