import Foundation
import FoundationNetworking

/// A cookie: Foundation's own (FoundationNetworking's `HTTPCookie`), which an app reaches through
/// ProtFSKit as it reaches Apple's through Foundation.
public typealias HTTPCookie = FoundationNetworking.HTTPCookie
/// The cookies an app's sessions keep: Foundation's own (`HTTPCookieStorage`). The shared one keeps
/// cookies with an expiry date in a file of the app's home (its container under `app launch`).
public typealias HTTPCookieStorage = FoundationNetworking.HTTPCookieStorage

extension URLSession {
  /// The `Cookie` field for a request to `url` from the configuration's storage, as Foundation
  /// sends it when the session and the request handle cookies: the cookies for its host whose path
  /// is a prefix of the URL's, not expired, and secure ones over https only.
  func cookieField(for request: URLRequest) -> String? {
    guard configuration.httpShouldSetCookies, request.httpShouldHandleCookies,
      request.value(forHTTPHeaderField: "Cookie") == nil, let url = request.url,
      let storage = configuration.httpCookieStorage
    else { return nil }
    let path = url.path.isEmpty ? "/" : url.path
    let secure = url.scheme?.lowercased() == "https"
    let now = Date()
    let cookies = (storage.cookies(for: url) ?? []).filter { cookie in
      (cookie.expiresDate.map { $0 > now } ?? true) && (!cookie.isSecure || secure)
        && (path == cookie.path || path.hasPrefix(cookie.path.hasSuffix("/") ? cookie.path : cookie.path + "/")
          || cookie.path == "/")
    }
    guard !cookies.isEmpty else { return nil }
    return HTTPCookie.requestHeaderFields(with: cookies.sorted { $0.path.count > $1.path.count })["Cookie"]
  }

  /// Keeps the cookies `headers` (a response from `url`) set, as Foundation does, unless the
  /// session keeps none (`httpShouldSetCookies`, the accept policy `.never`).
  func storeCookies(_ headers: [(name: String, value: String)], from url: URL, request: URLRequest?) {
    guard configuration.httpShouldSetCookies, request?.httpShouldHandleCookies ?? true,
      configuration.httpCookieAcceptPolicy != .never, let storage = configuration.httpCookieStorage
    else { return }
    let lines = headers.filter { $0.name.caseInsensitiveCompare("Set-Cookie") == .orderedSame }
    guard !lines.isEmpty else { return }
    // One field per cookie, as Foundation's parser takes several joined by commas.
    let cookies = lines.flatMap { HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": $0.value], for: url) }
    storage.setCookies(cookies, for: url, mainDocumentURL: request?.mainDocumentURL)
  }
}
