import Foundation
import ProtFSApp
import ProtFSSystem
import Synchronization

/// A cookie's attribute, as Foundation's `HTTPCookiePropertyKey`.
public struct HTTPCookiePropertyKey: RawRepresentable, Hashable, Sendable {
  /// The key's name.
  public var rawValue: String
  /// Wraps a name.
  public init(rawValue: String) { self.rawValue = rawValue }
  /// Wraps a name.
  public init(_ rawValue: String) { self.rawValue = rawValue }

  /// The cookie's name.
  public static let name = HTTPCookiePropertyKey("Name")
  /// Its value.
  public static let value = HTTPCookiePropertyKey("Value")
  /// Its domain (a leading dot: its subdomains too).
  public static let domain = HTTPCookiePropertyKey("Domain")
  /// Its path.
  public static let path = HTTPCookiePropertyKey("Path")
  /// When it expires (a `Date`).
  public static let expires = HTTPCookiePropertyKey("Expires")
  /// Its lifetime in seconds from now (a string or number).
  public static let maximumAge = HTTPCookiePropertyKey("Max-Age")
  /// Whether it goes over https only ("TRUE").
  public static let secure = HTTPCookiePropertyKey("Secure")
  /// Whether it ends with the session ("TRUE").
  public static let discard = HTTPCookiePropertyKey("Discard")
  /// The URL that set it.
  public static let originURL = HTTPCookiePropertyKey("OriginURL")
  /// Its version ("0" or "1").
  public static let version = HTTPCookiePropertyKey("Version")
  /// Its comment.
  public static let comment = HTTPCookiePropertyKey("Comment")
  /// Its `SameSite` policy.
  public static let sameSitePolicy = HTTPCookiePropertyKey("SameSite")
  /// Whether scripts may not read it (Foundation's key for `HttpOnly`).
  static let httpOnly = HTTPCookiePropertyKey("HttpOnly")
}

/// A cookie, as Foundation's `HTTPCookie` (RFC 6265): what a `Set-Cookie` field sets and a
/// `Cookie` field sends back to the server whose domain and path it matches.
public final class HTTPCookie: NSObject, @unchecked Sendable {
  // @unchecked: immutable after init; `properties` is built from those values on demand.
  /// Which cookies a storage keeps.
  public enum AcceptPolicy: UInt, Sendable {
    /// Every cookie.
    case always = 0
    /// None.
    case never = 1
    /// Those of the main document's domain (here: every cookie of a request without one).
    case onlyFromMainDocumentDomain = 2
  }

  /// Its name.
  public let name: String
  /// Its value.
  public let value: String
  /// Its domain: a host for a host-only cookie, or `.example.com` for that domain and its subdomains.
  public let domain: String
  /// Its path.
  public let path: String
  /// When it expires; nil for a session cookie.
  public let expiresDate: Date?
  /// Whether it goes over https only.
  public let isSecure: Bool
  /// Whether scripts may not read it.
  public let isHTTPOnly: Bool
  /// Its version (0: Netscape's).
  public let version: Int
  /// Its `SameSite` policy, if any.
  public let sameSitePolicy: String?
  /// When it was made, to order and remove by age.
  let created: Date

  /// Whether it ends with the session (it has no expiry date).
  public var isSessionOnly: Bool { expiresDate == nil }

  /// A cookie of `properties` (name, value, domain or origin URL, path); nil without them, as
  /// Foundation's.
  public init?(properties: [HTTPCookiePropertyKey: Any]) {
    func text(_ key: HTTPCookiePropertyKey) -> String? {
      (properties[key] as? String) ?? (properties[key] as? URL)?.absoluteString
        ?? (properties[key] as? NSNumber)?.stringValue
    }
    let origin = (properties[.originURL] as? URL) ?? text(.originURL).flatMap(URL.init(string:))
    guard let name = text(.name), !name.isEmpty, let value = text(.value),
      let domain = text(.domain)?.lowercased() ?? origin?.host?.lowercased(), !domain.isEmpty
    else { return nil }
    self.name = name
    self.value = value
    self.domain = domain
    path = text(.path).flatMap { $0.hasPrefix("/") ? $0 : nil } ?? "/"
    created = Date()
    if let age = text(.maximumAge).flatMap(Double.init) {
      expiresDate = Date(timeIntervalSinceNow: age)
    } else if let date = properties[.expires] as? Date {
      expiresDate = date
    } else {
      expiresDate = text(.expires).flatMap(Self.date)
    }
    isSecure = Self.flag(properties[.secure])
    isHTTPOnly = Self.flag(properties[.httpOnly])
    version = text(.version).flatMap(Int.init) ?? 0
    sameSitePolicy = text(.sameSitePolicy)
  }

  /// Its properties, as `init(properties:)` takes them.
  public var properties: [HTTPCookiePropertyKey: Any]? {
    var properties: [HTTPCookiePropertyKey: Any] = [
      .name: name, .value: value, .domain: domain, .path: path, .version: String(version),
    ]
    if let expiresDate { properties[.expires] = expiresDate }
    if isSecure { properties[.secure] = "TRUE" }
    if isHTTPOnly { properties[.httpOnly] = "TRUE" }
    if let sameSitePolicy { properties[.sameSitePolicy] = sameSitePolicy }
    return properties
  }

  /// The cookies the `Set-Cookie` fields of a response from `url` set (several in one field, joined
  /// by commas as Foundation joins repeated fields, are told apart), as Foundation parses them.
  public static func cookies(withResponseHeaderFields headerFields: [String: String], for url: URL) -> [HTTPCookie] {
    headerFields.filter { $0.key.caseInsensitiveCompare("Set-Cookie") == .orderedSame }.values
      .flatMap(splitFields).compactMap { cookie(from: $0, for: url) }
  }

  /// The `Cookie` field that sends `cookies`: `["Cookie": "a=b; c=d"]`, empty for none.
  public static func requestHeaderFields(with cookies: [HTTPCookie]) -> [String: String] {
    cookies.isEmpty ? [:] : ["Cookie": cookies.map { "\($0.name)=\($0.value)" }.joined(separator: "; ")]
  }

  /// Whether it goes with a request to `url` now: its domain and path match, it has not expired,
  /// and a secure one only over https.
  func matches(_ url: URL, at now: Date = Date()) -> Bool {
    guard let host = url.host?.lowercased(), Self.domain(domain, matches: host) else { return false }
    if let expiresDate, expiresDate <= now { return false }
    if isSecure, url.scheme?.lowercased() != "https" { return false }
    let requestPath = url.path.isEmpty ? "/" : url.path
    return requestPath == path
      || (requestPath.hasPrefix(path) && (path.hasSuffix("/") || requestPath.dropFirst(path.count).hasPrefix("/")))
  }

  /// Whether a cookie of `domain` goes to `host` (RFC 6265 §5.1.3; no subdomains for an address).
  static func domain(_ domain: String, matches host: String) -> Bool {
    guard domain.hasPrefix(".") else { return host == domain }
    let bare = String(domain.dropFirst())
    if host == bare { return true }
    let isAddress = host.contains(":") || host.split(separator: ".").allSatisfy { Int($0) != nil }
    return !isAddress && host.hasSuffix(domain)
  }

  /// The cookie one `Set-Cookie` value sets for `url`; nil for one without a name, or whose
  /// `Domain` the URL's host does not belong to.
  static func cookie(from field: String, for url: URL) -> HTTPCookie? {
    guard let host = url.host?.lowercased() else { return nil }
    let parts = field.split(separator: ";", omittingEmptySubsequences: false).map {
      $0.trimmingCharacters(in: .whitespaces)
    }
    guard let pair = parts.first, let equals = pair.firstIndex(of: "=") else { return nil }
    var properties: [HTTPCookiePropertyKey: Any] = [
      .name: String(pair[..<equals]).trimmingCharacters(in: .whitespaces),
      .value: String(pair[pair.index(after: equals)...]).trimmingCharacters(in: .whitespaces),
      .domain: host, .originURL: url,
    ]
    // A cookie's default path is the directory of the URL's path (RFC 6265 §5.1.4).
    let urlPath = url.path.isEmpty ? "/" : url.path
    properties[.path] =
      urlPath.lastIndex(of: "/").map { index in
        index == urlPath.startIndex ? "/" : String(urlPath[..<index])
      } ?? "/"
    for attribute in parts.dropFirst() where !attribute.isEmpty {
      let key = attribute.prefix { $0 != "=" }.trimmingCharacters(in: .whitespaces).lowercased()
      let value = attribute.firstIndex(of: "=").map {
        String(attribute[attribute.index(after: $0)...]).trimmingCharacters(in: .whitespaces)
      }
      switch key {
      case "domain":
        guard var domain = value?.lowercased(), !domain.isEmpty else { continue }
        if !domain.hasPrefix(".") { domain = "." + domain }
        guard Self.domain(domain, matches: host) else { return nil }
        properties[.domain] = domain
      case "path": if let value, value.hasPrefix("/") { properties[.path] = value }
      case "expires": if let value { properties[.expires] = value }
      case "max-age": if let value { properties[.maximumAge] = value }
      case "secure": properties[.secure] = "TRUE"
      case "httponly": properties[.httpOnly] = "TRUE"
      case "samesite": if let value { properties[.sameSitePolicy] = value }
      default: continue
      }
    }
    return HTTPCookie(properties: properties)
  }

  /// A field's cookies: split at the commas that begin another `name=` (an `Expires` date's own
  /// comma is followed by a day, not a name).
  private static func splitFields(_ field: String) -> [String] {
    var result: [String] = []
    var current = ""
    var rest = Substring(field)
    while let comma = rest.firstIndex(of: ",") {
      let after = rest[rest.index(after: comma)...]
      let token = after.drop { $0 == " " }.prefix { $0 != "=" && $0 != ";" && $0 != "," }
      if !token.isEmpty, token.allSatisfy({ !$0.isWhitespace }),
        after.drop(while: { $0 == " " }).dropFirst(token.count).first == "="
      {
        result.append(current + rest[..<comma])
        current = ""
      } else {
        current += rest[...comma]
      }
      rest = after
    }
    result.append(current + rest)
    return result.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
  }

  /// An `Expires` date in any of the forms servers send (RFC 1123, RFC 850, asctime).
  static func date(_ text: String) -> Date? {
    for format in [
      "EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy",
      "EEE, dd-MMM-yyyy HH:mm:ss zzz",
    ] {
      let formatter = DateFormatter()
      formatter.locale = Locale(identifier: "en_US_POSIX")
      formatter.timeZone = TimeZone(identifier: "GMT")
      formatter.dateFormat = format
      if let date = formatter.date(from: text) { return date }
    }
    return nil
  }

  private static func flag(_ value: Any?) -> Bool {
    if let text = value as? String { return text.uppercased() == "TRUE" || text == "1" }
    return (value as? Bool) ?? (value as? NSNumber)?.boolValue ?? false
  }

  public override var description: String { "<HTTPCookie \(name)=\(value); domain=\(domain); path=\(path)>" }
}

extension URLSession {
  /// The `Cookie` field for a request to `url` from the configuration's storage, as Foundation
  /// sends it when the session and the request handle cookies.
  func cookieField(for request: URLRequest) -> String? {
    guard configuration.httpShouldSetCookies, request.httpShouldHandleCookies,
      request.value(forHTTPHeaderField: "Cookie") == nil, let url = request.url,
      let storage = configuration.httpCookieStorage, let cookies = storage.cookies(for: url), !cookies.isEmpty
    else { return nil }
    return HTTPCookie.requestHeaderFields(with: cookies)["Cookie"]
  }

  /// Keeps the cookies a request's responses set (`Set-Cookie` values with the URL of the
  /// response, a redirect's included), as Foundation does, unless the session keeps none
  /// (`httpShouldSetCookies`, the accept policy `.never`).
  func storeCookies(_ fields: [(url: URL, value: String)], request: URLRequest?) {
    guard !fields.isEmpty, configuration.httpShouldSetCookies, request?.httpShouldHandleCookies ?? true,
      configuration.httpCookieAcceptPolicy != .never, let storage = configuration.httpCookieStorage
    else { return }
    for (url, value) in fields {
      guard let cookie = HTTPCookie.cookie(from: value, for: url) else { continue }
      storage.setCookies([cookie], for: url, mainDocumentURL: request?.mainDocumentURL)
    }
  }

}
