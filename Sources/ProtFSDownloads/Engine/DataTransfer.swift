import CCurl
import Foundation
import ProtFSSystem
import Synchronization

/// A request whose answer stays in memory, run on a thread of its own: an app's data task, which
/// iOS runs in the app's own process and which touches no file (so the lock never stops it).
///
/// libcurl is loaded as the engine loads it; the request is made as the engine makes a download's
/// (`TransferEngine.configureRequest`, `configureMethod`), redirects to http and https followed,
/// and the body is decoded as Foundation decodes it (gzip, deflate). Its events come in order on the
/// transfer's thread: the final response once its headers are read (then it waits for
/// `proceed()`), its body in pieces as they arrive, then the end, once.
///
/// `@unchecked Sendable`: what `start()` and `cancel()` share with the thread is in `state` (a
/// `Mutex`); the response being read (`statusCode`, `headerLines`, `responseReported`, `easy`) is
/// the thread's alone, touched by it and by libcurl's callbacks, which run on it.
package final class DataTransfer: @unchecked Sendable {
  /// The final response (after redirects).
  package struct Response: Sendable, Equatable {
    /// Where it came from: the last URL of the redirects.
    package var url: URL
    /// Its HTTP status.
    package var statusCode: Int
    /// Its header fields, in order (a repeated name keeps each line).
    package var headers: [(name: String, value: String)]
    /// The redirects followed to it.
    package var redirectCount = 0
    /// The cookies its responses set (the redirects' too), with the URL of each.
    package var setCookies: [(url: URL, value: String)] = []

    package static func == (a: Response, b: Response) -> Bool {
      a.url == b.url && a.statusCode == b.statusCode && a.headers.elementsEqual(b.headers) { $0 == $1 }
    }
  }

  /// What the transfer reports.
  package enum Event: Sendable, Equatable {
    /// The final response's status and headers, before any of its body.
    case response(Response)
    /// Bytes of the body.
    case data(Data)
    /// Bytes of an upload's body went out (`bytes` now, `total` in all, of `expected`).
    case sent(bytes: Int64, total: Int64, expected: Int64)
    /// The end: nil when the server answered (whatever its status), else why not.
    case completed(ProtFSError?)
  }

  /// A server's demand for credentials: a final response of 401 naming a scheme libcurl can answer
  /// (`WWW-Authenticate: Basic` or `Digest`).
  package struct Challenge: Sendable {
    /// The schemes answered.
    package enum Scheme: String, Sendable { case basic = "Basic", digest = "Digest" }
    /// The scheme asked for (the first the server names that is answered here).
    package var scheme: Scheme
    /// Its realm, if the server named one.
    package var realm: String?
    /// The URL that demanded it (after redirects).
    package var url: URL
    /// How many credentials this task gave before that the server refused.
    package var previousFailureCount: Int
    /// The user of the credential refused last, if any.
    package var proposedUser: String?
    /// The 401 response itself.
    package var response: Response
  }

  /// What answers a challenge.
  package enum ChallengeAnswer: Sendable {
    /// Send the request again with this user and password.
    case credential(user: String, password: String)
    /// Go on with the 401 as the answer.
    case answerWithResponse
    /// Cancel the transfer.
    case cancel
  }

  /// Asks for the answer to a challenge; the answer comes through the closure, once, from any
  /// thread (the transfer waits for it, or for `cancel()`).
  package typealias Authenticator =
    @Sendable (Challenge, _ answer: @escaping @Sendable (ChallengeAnswer) -> Void) -> Void

  /// At most this many credentials are sent for one transfer; then the 401 is the answer.
  static let credentialAttempts = 100

  /// The request.
  let url: URL
  let method: String
  let headers: [(name: String, value: String)]
  let body: Data?
  /// An upload's body, sent as libcurl reads it (instead of `body`), or nil.
  let upload: UploadSource?
  /// Seconds without a byte before the request fails (`timeoutIntervalForRequest`), and in all
  /// (`timeoutIntervalForResource`).
  let requestTimeout: Double
  let resourceTimeout: Double
  let events: @Sendable (Event) -> Void
  let authenticate: Authenticator?
  let state = Mutex(State())

  struct State: Sendable {
    var started = false
    var cancelled = false
    var ended = false
    /// Whether the app let the transfer go on past its response (`proceed()`).
    var proceeding = false
    /// The running transfer's multi handle, which `cancel()` wakes.
    var multi: UInt?
  }
  /// Signalled by `proceed()` and `cancel()`: the response is answered.
  let answered = DispatchSemaphore(value: 0)
  /// Signalled by the answer `waitForAnswer` waits for (a challenge's, a body stream) and by `cancel()`.
  let answerCame = DispatchSemaphore(value: 0)

  /// A transfer of `method` (GET when nil) to `url` with `headers` and `body`, or with `upload`'s
  /// bytes as its body (reported as they go out); `events` gets what it reports once `start()`ed.
  package init(
    url: URL, method: String?, headers: [(name: String, value: String)], body: Data?, upload: UploadBody? = nil,
    requestTimeout: Double, resourceTimeout: Double, authenticate: Authenticator? = nil,
    events: @escaping @Sendable (Event) -> Void
  ) {
    self.authenticate = authenticate
    self.url = url
    self.method = method ?? "GET"
    self.headers = headers
    self.body = upload == nil ? body : nil
    self.upload = upload.map(UploadSource.init)
    self.requestTimeout = requestTimeout
    self.resourceTimeout = resourceTimeout
    self.events = events
    self.upload?.waitForStream = { [unowned self] provider in waitForStream(provider) }
  }

  /// Starts the transfer on a thread of its own; a second call does nothing.
  package func start() {
    let first = state.withLock { state in
      defer { state.started = true }
      return !state.started && !state.ended
    }
    guard first else { return }
    let thread = Thread { [self] in run() }
    thread.name = "protfs-data-transfer"
    thread.start()
  }

  /// Lets the transfer go on past the response it reported, as the app's answer to it: until then
  /// it reads no more of the body and does not end (Foundation waits for the delegate's
  /// `completionHandler` likewise).
  package func proceed() {
    let first = state.withLock { state in
      defer { state.proceeding = true }
      return !state.proceeding
    }
    if first { answered.signal() }
  }

  /// Stops the transfer: it ends with `.cancelled` at once, and its thread lets go of the
  /// connection; nothing is reported after.
  package func cancel() {
    let multi = state.withLock { state -> UInt? in
      state.cancelled = true
      return state.multi
    }
    answered.signal()
    answerCame.signal()
    if let multi, let pointer = UnsafeMutableRawPointer(bitPattern: multi) { protfs_curl_multi_wakeup(pointer) }
    end(
      ProtFSError(.cancelled, "The request to '\(url.absoluteString)' was cancelled.", remedy: nil))
  }

  /// Reports the end, once; nothing is reported after it.
  func end(_ failure: ProtFSError?) {
    let first = state.withLock { state in
      defer { state.ended = true }
      return !state.ended
    }
    if first { events(.completed(failure)) }
  }

  /// Reports `event` unless the transfer has ended.
  func report(_ event: Event) {
    guard !state.withLock({ $0.ended }) else { return }
    events(event)
  }

  var isCancelled: Bool { state.withLock { $0.cancelled } }

  /// The upload's body, for libcurl's callbacks.
  var uploadSource: UploadSource? { upload }

  // MARK: The transfer's thread

  /// Header lines of the response being read; a new status line (a redirect's next response, a
  /// 100 Continue) starts them over.
  var statusCode = 0
  var headerLines: [(name: String, value: String)] = []
  var responseReported = false
  /// The `Set-Cookie` fields of every response so far (redirects included), with their URLs.
  var setCookies: [(url: URL, value: String)] = []
  /// The easy handle, while the transfer runs.
  var easy: UnsafeMutableRawPointer?
  /// The credential to send the request again with, once a challenge was answered with one; the
  /// credentials sent so far (each refused, when a challenge comes again), and the user of the last.
  var retryCredential: (user: String, password: String, scheme: Challenge.Scheme)?
  var credentialsSent = 0
  var lastUser: String?
}
