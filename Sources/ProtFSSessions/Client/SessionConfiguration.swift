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
