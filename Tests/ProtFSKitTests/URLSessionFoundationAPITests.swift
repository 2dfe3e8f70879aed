import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// The rest of Foundation's URL loading API that iOS code uses around its tasks: cookies, the
/// cache, `reset`, and what a response suggests.
@Suite(.timeLimit(.minutes(2))) struct URLSessionFoundationAPITests {
  func session(_ configuration: URLSessionConfiguration) -> URLSession {
    URLSession(
      configuration: configuration, delegate: nil, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.api.\(UUID())"))
  }

  /// The `Cookie` the server got, from its JSON reply.
  func cookieSent(_ session: URLSession, _ request: URLRequest) async throws -> String? {
    let (data, _) = try await session.data(for: request)
    let reply = try JSONSerialization.jsonObject(with: data) as? [String: Any]
    return reply?["cookie"] as? String
  }

  /// A cookie a response sets is sent with the session's next requests to that server, as on iOS;
  /// not by another ephemeral session (each keeps its own), nor when the session or the request
  /// handles no cookies; `reset` forgets it.
  @Test func cookiesGoBackToTheServerThatSetThem() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let one = session(.ephemeral)
    #expect(try await cookieSent(one, URLRequest(url: server.url("cookie/sid/abc/login"))) == nil)
    #expect(try await cookieSent(one, URLRequest(url: server.url("items"))) == "sid=abc")
    #expect(try await cookieSent(session(.ephemeral), URLRequest(url: server.url("items"))) == nil)
    var plain = URLRequest(url: server.url("items"))
    plain.httpShouldHandleCookies = false
    #expect(try await cookieSent(one, plain) == nil)
    let stored = try #require(one.configuration.httpCookieStorage?.cookies(for: server.url("items")))
    #expect(stored.map(\.name) == ["sid"] && stored.first?.value == "abc")
    // A cookie a redirect sets (a login's 302) is kept too, and goes with the next request.
    let redirected = session(.ephemeral)
    _ = try await redirected.data(from: server.url("redirect/302/home?cookie=rid=42"))
    #expect(try await cookieSent(redirected, URLRequest(url: server.url("items"))) == "rid=42")

    let refusing = URLSessionConfiguration.ephemeral
    refusing.httpShouldSetCookies = false
    let other = session(refusing)
    _ = try await other.data(from: server.url("cookie/sid/xyz/login"))
    #expect(other.configuration.httpCookieStorage?.cookies?.isEmpty == true)

    // A default configuration's storage is Foundation's shared one; none is none.
    #expect(URLSessionConfiguration.default.httpCookieStorage === HTTPCookieStorage.shared)
    let none = URLSessionConfiguration.default
    none.httpCookieStorage = nil
    #expect(session(none).configuration.httpCookieStorage == nil)

    await withCheckedContinuation { done in one.reset { done.resume() } }
    #expect(try await cookieSent(one, URLRequest(url: server.url("items"))) == nil)
  }

  /// `bytes(from:)` hands over the response, then the body while it arrives: its bytes, or its
  /// lines; a server that cannot be reached throws, as Foundation's.
  @Test func bytesArriveAsTheyComeAndSplitIntoLines() async throws {
    let text = "one\ntwo\r\nthree\rfour"
    let server = try FaultServer(body: Array(text.utf8), mode: .slowDrip(chunk: 5, interval: .milliseconds(5)))
    defer { server.stop() }
    let shared = session(.default)
    let (bytes, response) = try await shared.bytes(from: server.url("lines.txt"))
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    var lines: [String] = []
    for try await line in bytes.lines { lines.append(line) }
    #expect(lines == ["one", "two", "three", "four"])
    let (again, _) = try await shared.bytes(from: server.url("lines.txt"))
    var count = 0
    for try await _ in again { count += 1 }
    #expect(count == text.utf8.count)
    #expect(again.task.state == .completed)
    await #expect(throws: URLError.self) {
      _ = try await shared.bytes(from: URL(string: "http://127.0.0.1:9/nothing")!)
    }
  }

  /// Cookies parse and match as RFC 6265 and Foundation say: several in one field (an `Expires`
  /// date's comma is not a separator), the default path, `Domain` (refused for another site),
  /// `Max-Age`, `Secure`, and the longest path first.
  @Test func cookiesParseAndMatchAsFoundationsDo() throws {
    let url = URL(string: "http://api.example.com/v1/login")!
    let cookies = HTTPCookie.cookies(
      withResponseHeaderFields: [
        "Set-Cookie":
          "a=1; Expires=Wed, 09 Jun 2100 10:18:14 GMT, b=2; Path=/; Domain=example.com, c=3; Max-Age=0, "
          + "d=4; Domain=other.org, e=5; Secure; HttpOnly"
      ], for: url)
    #expect(cookies.map(\.name) == ["a", "b", "c", "e"])
    let a = try #require(cookies.first)
    #expect(a.path == "/v1" && a.domain == "api.example.com" && !a.isSessionOnly)
    #expect(a.expiresDate == Date(timeIntervalSince1970: 4_116_219_494))
    #expect(cookies[1].domain == ".example.com" && cookies[1].path == "/")
    #expect(cookies[3].isSecure && cookies[3].isHTTPOnly && cookies[3].isSessionOnly)
    let storage = HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: "protfs.test.\(UUID())")
    storage.setCookies(cookies, for: url, mainDocumentURL: nil)
    // c expired at once (Max-Age=0); e is secure, so not over http.
    let sent = storage.cookies(for: URL(string: "http://www.example.com/v1/items")!)?.map(\.name)
    #expect(sent == ["b"])
    let here = storage.cookies(for: URL(string: "https://api.example.com/v1/items")!)?.map(\.name)
    #expect(here == ["a", "b", "e"] || here == ["a", "e", "b"], "\(String(describing: here))")
    #expect(storage.cookies(for: URL(string: "http://api.example.com/v10")!)?.map(\.name) == ["b"])
    #expect(HTTPCookie.requestHeaderFields(with: Array(cookies.prefix(2)))["Cookie"] == "a=1; b=2")
    let removed = try #require(cookies.first)
    storage.deleteCookie(removed)
    #expect(storage.cookies?.count == 2)
  }

  /// A response's suggested file name: `Content-Disposition`'s (without a path), else the URL's
  /// last component; a plain response's MIME type is the one it was made with.
  @Test func aResponseSuggestsAFileName() throws {
    let url = URL(string: "http://127.0.0.1/files/report.json")!
    let named = try #require(
      HTTPURLResponse(
        url: url, statusCode: 200, httpVersion: nil,
        headerFields: ["Content-Disposition": "attachment; filename=\"../../etc/passwd.pdf\""]))
    #expect(named.suggestedFilename == "passwd.pdf")
    let plain = try #require(HTTPURLResponse(url: url, statusCode: 200, httpVersion: nil, headerFields: nil))
    #expect(plain.suggestedFilename == "report.json")
    let made = URLResponse(url: url, mimeType: "text/plain", expectedContentLength: 5, textEncodingName: "utf-8")
    #expect(made.mimeType == "text/plain" && made.textEncodingName == "utf-8" && made.expectedContentLength == 5)
  }

  /// The cache keeps what the app stores in it (never what the session loads), by URL and method.
  @Test func theCacheKeepsWhatTheAppStores() throws {
    let cache = URLCache(memoryCapacity: 1000, diskCapacity: 0, directory: nil)
    let request = URLRequest(url: URL(string: "http://127.0.0.1/a")!)
    let response = CachedURLResponse(
      response: URLResponse(url: request.url!, mimeType: nil, expectedContentLength: 3, textEncodingName: nil),
      data: Data("abc".utf8))
    cache.storeCachedResponse(response, for: request)
    #expect(cache.cachedResponse(for: request)?.data == Data("abc".utf8))
    #expect(cache.currentMemoryUsage == 3)
    let refused = CachedURLResponse(response: response.response, data: Data(), storagePolicy: .notAllowed)
    let other = URLRequest(url: URL(string: "http://127.0.0.1/b")!)
    cache.storeCachedResponse(refused, for: other)
    #expect(cache.cachedResponse(for: other) == nil)
    cache.removeAllCachedResponses()
    #expect(cache.cachedResponse(for: request) == nil)
  }
}
