import Foundation
import ProtFSApp
import ProtFSSystem
import Synchronization

/// The cookies an app's sessions keep, as Foundation's `HTTPCookieStorage`: a cookie replaces the
/// one of the same name, domain and path, an expired one removes it. The shared storage of an app
/// keeps its cookies with an expiry date in `Library/Cookies/Cookies.plist` of its container (iOS
/// keeps them in `Library/Cookies`), the rest for as long as it runs; outside an app it keeps them
/// in memory.
public final class HTTPCookieStorage: NSObject, Sendable {
  private struct State: Sendable {
    var cookies: [String: HTTPCookie] = [:]
    var loaded = false
    var policy = HTTPCookie.AcceptPolicy.always
  }
  private let state = Mutex(State())
  /// Where persistent cookies are kept, or nil for memory alone.
  private let file: String?
  private static let groups = Mutex<[String: HTTPCookieStorage]>([:])

  /// The app's storage.
  public static let shared = HTTPCookieStorage(
    file: ProcessEnvironment.value(AppEnvironment.bundle) == nil
      ? nil : NSHomeDirectory() + "/Library/Cookies/Cookies.plist")

  /// The storage an app group shares (in memory here).
  public class func sharedCookieStorage(forGroupContainerIdentifier identifier: String) -> HTTPCookieStorage {
    groups.withLock { groups in
      if let existing = groups[identifier] { return existing }
      let made = HTTPCookieStorage(file: nil)
      groups[identifier] = made
      return made
    }
  }

  init(file: String?) { self.file = file }

  /// A storage in memory alone (an ephemeral configuration's).
  static func ephemeral() -> HTTPCookieStorage { HTTPCookieStorage(file: nil) }

  /// Which cookies it keeps.
  public var cookieAcceptPolicy: HTTPCookie.AcceptPolicy {
    get { state.withLock { $0.policy } }
    set { state.withLock { $0.policy = newValue } }
  }

  /// Every cookie not expired.
  public var cookies: [HTTPCookie]? {
    let now = Date()
    return withCookies { $0.values.filter { $0.expiresDate.map { $0 > now } ?? true } }
  }

  /// The cookies that go with a request to `url`, those of the longest paths first.
  public func cookies(for url: URL) -> [HTTPCookie]? {
    let now = Date()
    return withCookies { $0.values.filter { $0.matches(url, at: now) } }
      .sorted { $0.path.count != $1.path.count ? $0.path.count > $1.path.count : $0.created < $1.created }
  }

  /// Keeps `cookie` (replacing the one of its name, domain and path; an expired one removes it),
  /// unless the policy is `.never`.
  public func setCookie(_ cookie: HTTPCookie) {
    guard cookieAcceptPolicy != .never else { return }
    change { cookies in
      let key = Self.key(cookie)
      if let expires = cookie.expiresDate, expires <= Date() {
        cookies[key] = nil
      } else {
        cookies[key] = cookie
      }
    }
  }

  /// Keeps the `cookies` a response from `url` set, under the policy.
  public func setCookies(_ cookies: [HTTPCookie], for url: URL?, mainDocumentURL: URL?) {
    guard cookieAcceptPolicy != .never, let host = url?.host?.lowercased() else { return }
    if cookieAcceptPolicy == .onlyFromMainDocumentDomain, let main = mainDocumentURL?.host?.lowercased(),
      !(main == host || main.hasSuffix("." + host) || host.hasSuffix("." + main))
    {
      return
    }
    for cookie in cookies where HTTPCookie.domain(cookie.domain, matches: host) { setCookie(cookie) }
  }

  /// Forgets `cookie`.
  public func deleteCookie(_ cookie: HTTPCookie) { change { $0[Self.key(cookie)] = nil } }

  /// Forgets the cookies made since `date`.
  public func removeCookies(since date: Date) { change { $0 = $0.filter { $0.value.created < date } } }

  /// Every cookie, sorted by `sortOrder` (by name when it sorts nothing it knows).
  public func sortedCookies(using sortOrder: [NSSortDescriptor]) -> [HTTPCookie] {
    (cookies ?? []).sorted { $0.name < $1.name }
  }

  private static func key(_ cookie: HTTPCookie) -> String {
    cookie.domain + "\u{0}" + cookie.path + "\u{0}" + cookie.name
  }

  /// `body` over the cookies, read from the file the first time.
  private func withCookies<T>(_ body: ([String: HTTPCookie]) -> T) -> T {
    state.withLock { state in
      load(&state)
      return body(state.cookies)
    }
  }

  /// Changes the cookies with `body`, then writes the persistent ones.
  private func change(_ body: (inout [String: HTTPCookie]) -> Void) {
    let persistent = state.withLock { state -> [HTTPCookie] in
      load(&state)
      body(&state.cookies)
      return state.cookies.values.filter { !$0.isSessionOnly }
    }
    guard let file else { return }
    let list: [[String: Any]] = persistent.compactMap { cookie in
      guard let properties = cookie.properties else { return nil }
      var entry: [String: Any] = [:]
      for (key, value) in properties {
        entry[key.rawValue] = (value as? Date).map { $0.timeIntervalSince1970 } ?? value
      }
      return entry
    }
    // Written whole and renamed into place; a device locked meanwhile may refuse it, as iOS's does.
    guard let data = try? PropertyListSerialization.data(fromPropertyList: list, format: .xml, options: 0) else {
      return
    }
    let directory = (file as NSString).deletingLastPathComponent
    // Best effort, as iOS's storage (which has no error to give): the cookies stay in memory, and
    // the next change writes them all again.
    try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try? data.write(to: URL(fileURLWithPath: file), options: .atomic)  // see above: best effort
  }

  /// Reads the persistent cookies, once.
  private func load(_ state: inout State) {
    guard !state.loaded else { return }
    state.loaded = true
    guard let file, let data = FileManager.default.contents(atPath: file),
      let list = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [[String: Any]]
    else { return }
    for entry in list {
      var properties: [HTTPCookiePropertyKey: Any] = [:]
      for (key, value) in entry {
        properties[HTTPCookiePropertyKey(key)] =
          key == HTTPCookiePropertyKey.expires.rawValue
          ? ((value as? Double) ?? (value as? NSNumber)?.doubleValue).map { Date(timeIntervalSince1970: $0) } as Any
          : value
      }
      if let cookie = HTTPCookie(properties: properties), !(cookie.expiresDate.map { $0 <= Date() } ?? false) {
        state.cookies[Self.key(cookie)] = cookie
      }
    }
  }
}
