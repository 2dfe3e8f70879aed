import Foundation
import ProtFS
import ProtFSSystem

/// How an app opens a background session: what `URLSessionConfiguration.background(withIdentifier:)`
/// carries to the session service.
public struct SessionConfiguration: Sendable, Equatable, Codable {
  /// The session's identifier.
  public var identifier: String
  /// The app it belongs to; nil for the app this process runs as (`PROTFS_APP_BUNDLE`).
  public var bundleID: String?
  /// Connections per host (`httpMaximumConnectionsPerHost`, 6 by default as on iOS).
  public var connectionsPerHost: Int = 6
  /// `timeoutIntervalForRequest`, seconds.
  public var requestTimeout: Double = 60
  /// `timeoutIntervalForResource`, seconds (7 days by default).
  public var resourceTimeout: Double = 7 * 24 * 3600
  /// `isDiscretionary`: kept and shown, it does not delay transfers here.
  public var isDiscretionary: Bool = false
  /// `sessionSendsLaunchEvents`: whether finished tasks relaunch the app.
  public var sendsLaunchEvents: Bool = true
  /// The service's socket; nil for the one `PROTFS_SESSIONS_SOCKET` names.
  public var socketName: String?

  /// Creates a configuration.
  public init(identifier: String, bundleID: String? = nil) {
    self.identifier = identifier
    self.bundleID = bundleID
  }
}

/// The session service's client: a `SessionBackend` whose transfers run in the service.
///
/// STUB: the service's author replaces this body; ProtFSKit codes against the signatures only.
public final class SessionServiceClient: SessionBackend, Sendable {
  /// The session's identifier.
  public let identifier: String

  private init(identifier: String) { self.identifier = identifier }

  /// Connects to the service and opens the session `configuration.identifier`.
  public static func open(_ configuration: SessionConfiguration) throws(ProtFSError) -> SessionServiceClient {
    throw ProtFSError(.invalidArgument, "The session service is not built yet.")
  }

  public func createDownloadTask(_ request: SessionRequest, resumeData: Data?) throws(ProtFSError)
    -> SessionTaskSnapshot
  { throw ProtFSError(.invalidArgument, "stub") }
  public func createUploadTask(_ request: SessionRequest, fromFile path: String) throws(ProtFSError)
    -> SessionTaskSnapshot
  { throw ProtFSError(.invalidArgument, "stub") }
  public func resume(_ id: Int64) throws(ProtFSError) {}
  public func suspend(_ id: Int64) throws(ProtFSError) {}
  public func cancel(_ id: Int64, producingResumeData: Bool) throws(ProtFSError) -> Data? { nil }
  public func setDescription(_ description: String?, of id: Int64) throws(ProtFSError) {}
  public func tasks() throws(ProtFSError) -> [SessionTaskSnapshot] { [] }
  public func subscribe(_ handler: @escaping @Sendable (SessionEvent) -> Void) throws(ProtFSError) {}
  public func acknowledge(_ id: Int64) throws(ProtFSError) {}
  public func invalidate(cancelling: Bool) {}

  /// The name of the abstract socket the service of `device` listens on.
  public static func socketName(device: Device) -> String { "protfs-sessions-stub" }

  /// The app acknowledged session `session`'s events (`protfs app events-handled`, the completion
  /// handler of `handleEventsForBackgroundURLSession`): the completions it was given are done.
  public static func eventsHandled(session: String, bundleID: String, socketName: String) throws(ProtFSError) {}

  /// The user force-quit app `bundleID`: its transfers stop (resumable) and it is not relaunched
  /// until its next launch.
  public static func forceQuit(bundleID: String, socketName: String) throws(ProtFSError) {}
}

/// Tells the app a session's events wait (docs/semantics.md §9), for the service: ProtFSCLI
/// implements it with `protfs app`'s supervisor (post `handleEventsForBackgroundURLSession` to a
/// running app, or launch it in the background with the command it was last launched with).
public protocol SessionAppLauncher: Sendable {
  /// Delivers "session `session`'s events wait" to app `bundleID`, launching it when it is not
  /// running. Throws when it cannot: the user force-quit it, it was never launched, the launch failed.
  func deliverEvents(of session: String, to bundleID: String) throws(ProtFSError)
  /// Whether the user force-quit app `bundleID` (its transfers stop until its next launch).
  func isForceQuit(_ bundleID: String) -> Bool
}
