import Foundation
import Synchronization

// Foundation's names of the ways a server asks for credentials (`URLProtectionSpace`'s
// `authenticationMethod`). Of these, a task run in the app meets HTTP Basic and Digest.

/// Any method (a protection space that names none).
public let NSURLAuthenticationMethodDefault = "NSURLAuthenticationMethodDefault"
/// HTTP Basic: a user and password in the clear.
public let NSURLAuthenticationMethodHTTPBasic = "NSURLAuthenticationMethodHTTPBasic"
/// HTTP Digest: a user and a hash of the password.
public let NSURLAuthenticationMethodHTTPDigest = "NSURLAuthenticationMethodHTTPDigest"
/// A form of the page's own (never asked by the session).
public let NSURLAuthenticationMethodHTMLForm = "NSURLAuthenticationMethodHTMLForm"
/// NTLM (not met here).
public let NSURLAuthenticationMethodNTLM = "NSURLAuthenticationMethodNTLM"
/// Kerberos or NTLM through Negotiate (not met here).
public let NSURLAuthenticationMethodNegotiate = "NSURLAuthenticationMethodNegotiate"
/// A client certificate (not met here).
public let NSURLAuthenticationMethodClientCertificate = "NSURLAuthenticationMethodClientCertificate"
/// The server's certificate chain, to be trusted (not met here: libcurl checks it).
public let NSURLAuthenticationMethodServerTrust = "NSURLAuthenticationMethodServerTrust"

/// Where credentials apply, as Foundation's `URLProtectionSpace`: a server (host, port, protocol),
/// its realm, and how it authenticates.
public final class URLProtectionSpace: NSObject, Sendable {
  /// The server's host.
  public let host: String
  /// Its port.
  public let port: Int
  /// `http` or `https`.
  public let `protocol`: String?
  /// The realm the server named, if any.
  public let realm: String?
  /// One of the `NSURLAuthenticationMethod…` constants.
  public let authenticationMethod: String

  /// A protection space of a server.
  public init(host: String, port: Int, protocol: String?, realm: String?, authenticationMethod: String?) {
    self.host = host
    self.port = port
    self.protocol = `protocol`
    self.realm = realm
    self.authenticationMethod = authenticationMethod ?? NSURLAuthenticationMethodDefault
  }

  /// Whether a password sent here is safe on the wire: over https, or by Digest.
  public var receivesCredentialSecurely: Bool {
    `protocol`?.lowercased() == "https" || authenticationMethod == NSURLAuthenticationMethodHTTPDigest
  }

  public override func isEqual(_ object: Any?) -> Bool {
    guard let other = object as? URLProtectionSpace else { return false }
    return host.lowercased() == other.host.lowercased() && port == other.port
      && `protocol`?.lowercased() == other.protocol?.lowercased() && realm == other.realm
      && authenticationMethod == other.authenticationMethod
  }

  public override var hash: Int {
    var hasher = Hasher()
    hasher.combine(host.lowercased())
    hasher.combine(port)
    hasher.combine(`protocol`?.lowercased())
    hasher.combine(realm)
    hasher.combine(authenticationMethod)
    return hasher.finalize()
  }
}

/// A user name and password, as Foundation's `URLCredential`.
public final class URLCredential: NSObject, Sendable {
  /// How long a credential is kept in `URLCredentialStorage` once used.
  public enum Persistence: UInt, Sendable {
    /// Not kept.
    case none = 0
    /// Kept while the app runs.
    case forSession = 1
    /// Kept (on iOS in the keychain; here while the app runs).
    case permanent = 2
    /// Kept and synchronised (on iOS through iCloud; here while the app runs).
    case synchronizable = 3
  }

  /// The user name.
  public let user: String?
  /// The password.
  public let password: String?
  /// How long it is kept.
  public let persistence: Persistence

  /// A credential of `user` and `password`.
  public init(user: String, password: String, persistence: Persistence) {
    self.user = user
    self.password = password
    self.persistence = persistence
  }

  /// Whether it has a password.
  public var hasPassword: Bool { password != nil }

  public override func isEqual(_ object: Any?) -> Bool {
    guard let other = object as? URLCredential else { return false }
    return user == other.user && password == other.password
  }

  public override var hash: Int { user?.hashValue ?? 0 }
}

/// A server's demand for credentials, as Foundation's `URLAuthenticationChallenge`.
public final class URLAuthenticationChallenge: NSObject, Sendable {
  /// Where the credentials are asked for.
  public let protectionSpace: URLProtectionSpace
  /// The credential tried last (refused), or the one the storage holds for the space.
  public let proposedCredential: URLCredential?
  /// How many credentials the server refused before, for this task.
  public let previousFailureCount: Int
  /// The response that asked (the 401).
  public let failureResponse: URLResponse?
  /// The error that asked, if any (none for a 401).
  public let error: (any Error)?

  /// A challenge for `space`.
  public init(
    protectionSpace space: URLProtectionSpace, proposedCredential: URLCredential?, previousFailureCount: Int,
    failureResponse: URLResponse?, error: (any Error)?
  ) {
    protectionSpace = space
    self.proposedCredential = proposedCredential
    self.previousFailureCount = previousFailureCount
    self.failureResponse = failureResponse
    self.error = error
  }
}

extension URLSession {
  /// How the delegate answers `willBeginDelayedRequest` (which is never asked here).
  public enum DelayedRequestDisposition: Int, Sendable {
    /// Begin with the request as it is.
    case continueLoading = 0
    /// Begin with the request given.
    case useNewRequest = 1
    /// Cancel the task.
    case cancel = 2
  }

  /// How the delegate answers an authentication challenge.
  public enum AuthChallengeDisposition: Int, Sendable {
    /// Use the credential given (none: go on without one, the 401 is the answer).
    case useCredential = 0
    /// As if the delegate had no method for it: a credential the storage holds for the space,
    /// else the 401 is the answer.
    case performDefaultHandling = 1
    /// Cancel the task (`NSURLErrorCancelled`).
    case cancelAuthenticationChallenge = 2
    /// Not this way: here, the 401 is the answer.
    case rejectProtectionSpace = 3
  }
}

/// The credentials the app's sessions use, by protection space, as Foundation's
/// `URLCredentialStorage`. Kept in the app's memory: on iOS a permanent credential lives in the
/// keychain across launches; here it lasts as long as the app runs.
public final class URLCredentialStorage: NSObject, Sendable {
  /// The storage sessions use by default.
  public static let shared = URLCredentialStorage()

  private struct Entry: Sendable {
    var credentials: [String: URLCredential] = [:]
    var defaultUser: String?
  }
  private let entries = Mutex<[URLProtectionSpace: Entry]>([:])

  public override init() {}

  /// Every credential, by space and then by user.
  public var allCredentials: [URLProtectionSpace: [String: URLCredential]] {
    entries.withLock { $0.mapValues(\.credentials) }
  }

  /// The credentials for `space`, by user.
  public func credentials(for space: URLProtectionSpace) -> [String: URLCredential]? {
    entries.withLock { $0[space]?.credentials }
  }

  /// Keeps `credential` for `space` (nothing for a credential of persistence `.none`).
  public func set(_ credential: URLCredential, for space: URLProtectionSpace) {
    guard credential.persistence != .none, let user = credential.user else { return }
    entries.withLock { $0[space, default: Entry()].credentials[user] = credential }
  }

  /// Keeps `credential` for `space` and makes it the one used there by default.
  public func setDefaultCredential(_ credential: URLCredential, for space: URLProtectionSpace) {
    set(credential, for: space)
    guard credential.persistence != .none else { return }
    entries.withLock { $0[space]?.defaultUser = credential.user }
  }

  /// The credential used for `space` by default: the one set so, or the only one.
  public func defaultCredential(for space: URLProtectionSpace) -> URLCredential? {
    entries.withLock { entries in
      guard let entry = entries[space] else { return nil }
      if let user = entry.defaultUser, let credential = entry.credentials[user] { return credential }
      return entry.credentials.count == 1 ? entry.credentials.values.first : nil
    }
  }

  /// Forgets `credential` for `space`.
  public func remove(_ credential: URLCredential, for space: URLProtectionSpace) {
    guard let user = credential.user else { return }
    entries.withLock { entries in
      entries[space]?.credentials[user] = nil
      if entries[space]?.defaultUser == user { entries[space]?.defaultUser = nil }
    }
  }
}
