import Foundation
import ProtFSSessions

/// A session's settings, as Foundation's `URLSessionConfiguration`. Every session's downloads and
/// uploads run in the device's session service (docs/semantics.md §9), its data tasks in the app's
/// process; a background one keeps its identifier, so a relaunched app that recreates it gets its
/// tasks and their queued delegate calls.
///
/// `@unchecked Sendable` as Foundation's: it is set up by one thread before a session is made with
/// it, and the session keeps its own copy; it is open, so the compiler cannot check a subclass.
open class URLSessionConfiguration: NSObject, @unchecked Sendable {
  /// The background session's identifier; nil for `default` and `ephemeral`.
  open private(set) var identifier: String?
  /// Connections per host (6, as on iOS).
  open var httpMaximumConnectionsPerHost = 6
  /// The time an attempt may stay idle, seconds (60).
  open var timeoutIntervalForRequest: TimeInterval = 60
  /// The time a task may take in all, seconds (7 days).
  open var timeoutIntervalForResource: TimeInterval = 7 * 24 * 3600
  /// Whether the system may delay transfers (kept and shown, never delays here).
  open var isDiscretionary = false
  /// Whether finished tasks relaunch the app (true, as on iOS).
  open var sessionSendsLaunchEvents = true
  /// Whether tasks may use a cellular network (kept).
  open var allowsCellularAccess = true
  /// Whether tasks may use an expensive network (kept).
  open var allowsExpensiveNetworkAccess = true
  /// Whether tasks may use a constrained network (kept).
  open var allowsConstrainedNetworkAccess = true
  /// Whether tasks wait for connectivity (kept).
  open var waitsForConnectivity = false
  /// Headers added to every request that does not set them.
  open var httpAdditionalHeaders: [AnyHashable: Any]?
  /// The app group whose container a background session shares (kept).
  open var sharedContainerIdentifier: String?
  /// Where the session's tasks find credentials for a 401 the delegate leaves to the default
  /// handling, and keep those it gives (`URLCredentialStorage.shared`; nil: none).
  open var urlCredentialStorage: URLCredentialStorage? = .shared
  /// Where the session keeps cookies and finds those it sends (`HTTPCookieStorage.shared`; nil: none).
  /// The shared storage is reached at the first request, not before: it reads the app's kept
  /// cookies then.
  open var httpCookieStorage: HTTPCookieStorage? {
    get {
      switch cookieStorage {
      case .none: .shared
      case .some(let storage): storage
      }
    }
    set { cookieStorage = .some(newValue) }
  }
  /// nil: the shared storage, not yet reached; `.some(nil)`: none.
  private var cookieStorage: HTTPCookieStorage??
  /// Whether requests send the kept cookies and responses' cookies are kept.
  open var httpShouldSetCookies = true
  /// Which cookies are kept (`.never`: none).
  open var httpCookieAcceptPolicy = HTTPCookie.AcceptPolicy.onlyFromMainDocumentDomain
  /// The requests' cache policy (kept: there is no cache here, every request loads).
  open var requestCachePolicy = URLRequest.CachePolicy.useProtocolCachePolicy
  /// The session's cache (`URLCache.shared`): the session neither reads nor fills it.
  open var urlCache: URLCache? = .shared
  /// The kind of traffic (kept: a hint, as on iOS).
  open var networkServiceType = URLRequest.NetworkServiceType.default
  /// Proxies (kept: there is no proxy here).
  open var connectionProxyDictionary: [AnyHashable: Any]?
  /// Whether requests may be pipelined (kept).
  open var httpShouldUsePipelining = false
  /// Whether sockets stay up longer in the background (kept).
  open var shouldUseExtendedBackgroundIdleMode = false

  /// A configuration with Foundation's defaults.
  public override init() {}

  /// A copy, as Foundation's configurations are copied into their session.
  func copied() -> URLSessionConfiguration {
    let copy = URLSessionConfiguration()
    copy.identifier = identifier
    copy.httpMaximumConnectionsPerHost = httpMaximumConnectionsPerHost
    copy.timeoutIntervalForRequest = timeoutIntervalForRequest
    copy.timeoutIntervalForResource = timeoutIntervalForResource
    copy.isDiscretionary = isDiscretionary
    copy.sessionSendsLaunchEvents = sessionSendsLaunchEvents
    copy.allowsCellularAccess = allowsCellularAccess
    copy.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
    copy.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
    copy.waitsForConnectivity = waitsForConnectivity
    copy.httpAdditionalHeaders = httpAdditionalHeaders
    copy.sharedContainerIdentifier = sharedContainerIdentifier
    copy.urlCredentialStorage = urlCredentialStorage
    copy.cookieStorage = cookieStorage
    copy.httpShouldSetCookies = httpShouldSetCookies
    copy.httpCookieAcceptPolicy = httpCookieAcceptPolicy
    copy.requestCachePolicy = requestCachePolicy
    copy.urlCache = urlCache
    copy.networkServiceType = networkServiceType
    copy.connectionProxyDictionary = connectionProxyDictionary
    copy.httpShouldUsePipelining = httpShouldUsePipelining
    copy.shouldUseExtendedBackgroundIdleMode = shouldUseExtendedBackgroundIdleMode
    return copy
  }

  /// The default configuration: its session's tasks run in the app, as on iOS.
  open class var `default`: URLSessionConfiguration { URLSessionConfiguration() }
  /// As `default`, with cookies, credentials and cache kept in memory by the session alone.
  open class var ephemeral: URLSessionConfiguration {
    let configuration = URLSessionConfiguration()
    configuration.urlCredentialStorage = URLCredentialStorage()
    configuration.httpCookieStorage = HTTPCookieStorage.ephemeral()
    configuration.urlCache = URLCache(memoryCapacity: 512 * 1024, diskCapacity: 0, diskPath: nil)
    return configuration
  }

  /// A background configuration whose session is `identifier`.
  open class func background(withIdentifier identifier: String) -> URLSessionConfiguration {
    let configuration = URLSessionConfiguration()
    configuration.identifier = identifier
    return configuration
  }

  /// Whether this is a background configuration.
  var isBackground: Bool { identifier != nil }

  /// What the session service is told: the limits an app set, brought into the ranges the
  /// service takes (an app that asks for 100 connections per host, or a timeout of zero, gets a
  /// session, as on iOS, which bounds them itself).
  func sessionConfiguration(identifier: String) -> SessionConfiguration {
    var result = SessionConfiguration(identifier: identifier)
    result.connectionsPerHost = httpMaximumConnectionsPerHost
    result.requestTimeout = timeoutIntervalForRequest
    result.resourceTimeout = timeoutIntervalForResource
    result.isDiscretionary = isDiscretionary
    result.sendsLaunchEvents = isBackground && sessionSendsLaunchEvents
    return result.clamped()
  }
}
