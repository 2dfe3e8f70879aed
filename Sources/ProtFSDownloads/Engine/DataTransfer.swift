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
  private let url: URL
  private let method: String
  private let headers: [(name: String, value: String)]
  private let body: Data?
  /// An upload's body, sent as libcurl reads it (instead of `body`), or nil.
  private let upload: UploadSource?
  /// Seconds without a byte before the request fails (`timeoutIntervalForRequest`), and in all
  /// (`timeoutIntervalForResource`).
  private let requestTimeout: Double
  private let resourceTimeout: Double
  private let events: @Sendable (Event) -> Void
  private let authenticate: Authenticator?
  private let state = Mutex(State())

  private struct State: Sendable {
    var started = false
    var cancelled = false
    var ended = false
    /// Whether the app let the transfer go on past its response (`proceed()`).
    var proceeding = false
    /// The running transfer's multi handle, which `cancel()` wakes.
    var multi: UInt?
  }
  /// Signalled by `proceed()` and `cancel()`: the response is answered.
  private let answered = DispatchSemaphore(value: 0)
  /// Signalled by the answer `waitForAnswer` waits for (a challenge's, a body stream) and by `cancel()`.
  private let answerCame = DispatchSemaphore(value: 0)

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
  private func end(_ failure: ProtFSError?) {
    let first = state.withLock { state in
      defer { state.ended = true }
      return !state.ended
    }
    if first { events(.completed(failure)) }
  }

  /// Reports `event` unless the transfer has ended.
  fileprivate func report(_ event: Event) {
    guard !state.withLock({ $0.ended }) else { return }
    events(event)
  }

  fileprivate var isCancelled: Bool { state.withLock { $0.cancelled } }

  /// The upload's body, for libcurl's callbacks.
  fileprivate var uploadSource: UploadSource? { upload }

  // MARK: The transfer's thread

  /// Header lines of the response being read; a new status line (a redirect's next response, a
  /// 100 Continue) starts them over.
  fileprivate var statusCode = 0
  fileprivate var headerLines: [(name: String, value: String)] = []
  fileprivate var responseReported = false
  /// The `Set-Cookie` fields of every response so far (redirects included), with their URLs.
  fileprivate var setCookies: [(url: URL, value: String)] = []
  /// The easy handle, while the transfer runs.
  fileprivate var easy: UnsafeMutableRawPointer?
  /// The credential to send the request again with, once a challenge was answered with one; the
  /// credentials sent so far (each refused, when a challenge comes again), and the user of the last.
  private var retryCredential: (user: String, password: String, scheme: Challenge.Scheme)?
  private var credentialsSent = 0
  private var lastUser: String?

  private func run() {
    // An upload's file is let go with the transfer, not with the task the app may keep.
    defer { upload?.close() }
    let scheme = url.scheme?.lowercased() ?? ""
    guard scheme == "http" || scheme == "https", url.host?.isEmpty == false else {
      end(
        ProtFSError(
          .invalidArgument, "The URL '\(url.absoluteString)' is not an http or https URL with a host.",
          remedy: .advice("give an http or https URL")))
      return
    }
    if let failure = upload?.failure {
      end(failure)
      return
    }
    if let failure = protfs_curl_load() {
      end(.libcurlUnavailable(String(cString: failure)))
      return
    }
    guard let multi = protfs_curl_multi_init(), let easy = protfs_curl_easy_init() else {
      end(ProtFSError(.io, "libcurl could not make a handle for '\(url.absoluteString)'."))
      return
    }
    self.easy = easy
    defer {
      self.easy = nil
      protfs_curl_multi_remove_handle(multi, easy)
      protfs_curl_easy_cleanup(easy)
      protfs_curl_multi_cleanup(multi)
    }
    let context = Unmanaged.passRetained(self)
    defer { context.release() }
    var list: UnsafeMutablePointer<curl_slist>?
    defer { if let list { protfs_curl_slist_free_all(list) } }
    configure(easy, context: context.toOpaque(), headers: &list)
    let alreadyCancelled = state.withLock { state -> Bool in
      state.multi = UInt(bitPattern: multi)
      return state.cancelled
    }
    defer { state.withLock { $0.multi = nil } }
    guard !alreadyCancelled else { return }
    // One attempt, and one more each time a challenge is answered with a credential.
    while true {
      protfs_curl_multi_add_handle(multi, easy)
      var running: Int32 = 1
      while running > 0, !isCancelled {
        protfs_curl_multi_perform(multi, &running)
        if running == 0 { break }
        var ready: Int32 = 0
        protfs_curl_multi_poll(multi, nil, 0, 1000, &ready)
      }
      guard !isCancelled else { return }
      var left: Int32 = 0
      var result = CURLE_OK
      if let message = protfs_curl_multi_info_read(multi, &left) { result = protfs_curlmsg_result(message) }
      protfs_curl_multi_remove_handle(multi, easy)
      // A response without a body is answered (or challenged) at its end.
      let answered = result == CURLE_OK && upload?.readFailure == nil ? reportResponse() : true
      if let credential = retryCredential {
        retryCredential = nil
        prepareRetry(easy, with: credential)
        continue
      }
      if let failure = upload?.readFailure {
        end(failure)
      } else if result == CURLE_OK {
        guard answered else { return }
        end(nil)
      } else {
        end(failure(result))
      }
      return
    }
  }

  /// Sets the handle up to send the request again with `credential`, its body from the start.
  private func prepareRetry(
    _ easy: UnsafeMutableRawPointer, with credential: (user: String, password: String, scheme: Challenge.Scheme)
  ) {
    protfs_curl_easy_setopt_string(easy, CURLOPT_USERNAME, credential.user)
    protfs_curl_easy_setopt_string(easy, CURLOPT_PASSWORD, credential.password)
    // CURLAUTH_BASIC is 1, CURLAUTH_DIGEST 2 (macros with casts, which Swift does not import).
    protfs_curl_easy_setopt_long(easy, CURLOPT_HTTPAUTH, credential.scheme == .basic ? 1 : 2)
    statusCode = 0
    headerLines = []
    responseReported = false
    upload?.rewind()
  }

  /// The challenge in `response`, when it is a 401 naming a scheme answered here (Digest before
  /// Basic when it names both), and this transfer may still send a credential.
  private func challenge(in response: Response) -> Challenge? {
    guard response.statusCode == 401, credentialsSent < Self.credentialAttempts else { return nil }
    var found: [(Challenge.Scheme, String?)] = []
    for header in response.headers where header.name.lowercased() == "www-authenticate" {
      let value = header.value.trimmingCharacters(in: .whitespaces)
      let name = String(value.prefix { !$0.isWhitespace && $0 != "," }).lowercased()
      guard let scheme = name == "basic" ? Challenge.Scheme.basic : name == "digest" ? .digest : nil else { continue }
      found.append((scheme, Self.realm(in: value)))
    }
    guard let (scheme, realm) = found.first(where: { $0.0 == .digest }) ?? found.first else { return nil }
    return Challenge(
      scheme: scheme, realm: realm, url: response.url, previousFailureCount: credentialsSent,
      proposedUser: lastUser, response: response)
  }

  /// The `realm="…"` parameter of a `WWW-Authenticate` value.
  private static func realm(in value: String) -> String? {
    guard let start = value.range(of: "realm=", options: .caseInsensitive)?.upperBound else { return nil }
    let rest = value[start...]
    if rest.first == "\"" {
      let inner = rest.dropFirst()
      return String(inner.prefix { $0 != "\"" })
    }
    return String(rest.prefix { $0 != "," && !$0.isWhitespace })
  }

  /// Asks `question` for an answer (given once, from any thread: a later one is ignored) and waits
  /// for it on the transfer's thread, or for `cancel()`: nil when cancelled.
  private func waitForAnswer<Answer: Sendable>(
    _ question: (_ answer: @escaping @Sendable (Answer) -> Void) -> Void
  ) -> Answer? {
    let given = Mutex<Answer?>(nil)
    question { [self] answer in
      let first = given.withLock { given in
        defer { if given == nil { given = answer } }
        return given == nil
      }
      if first { answerCame.signal() }
    }
    answerCame.wait()
    return isCancelled ? nil : given.withLock { $0 }
  }

  /// Asks `provider` for a body stream and waits for it (or a cancel): nil when none came.
  private func waitForStream(_ provider: BodyStreamProvider) -> BodyStream? {
    waitForAnswer { answer in provider(answer) } ?? nil
  }

  /// Asks the authenticator about `challenge` and waits for the answer (or a cancel): true when
  /// the transfer is to send the request again (`retryCredential` set) or end cancelled.
  private func ask(_ challenge: Challenge, _ authenticate: Authenticator) -> Bool {
    let answer = waitForAnswer { answer in authenticate(challenge, answer) }
    guard !isCancelled else { return true }
    switch answer {
    case .credential(let user, let password)?:
      credentialsSent += 1
      lastUser = user
      retryCredential = (user, password, challenge.scheme)
      return true
    case .cancel?:
      cancel()
      return true
    case .answerWithResponse?, nil:
      return false
    }
  }

  private func configure(
    _ easy: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer,
    headers list: inout UnsafeMutablePointer<curl_slist>?
  ) {
    TransferEngine.configureRequest(
      easy, url: url, userAgent: Self.userAgent, certificates: nil,
      connectTimeout: .milliseconds(Int64(max(1, requestTimeout) * 1000)))
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_WRITEFUNCTION, dataWriteCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context)
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_HEADERFUNCTION, dataHeaderCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context)
    protfs_curl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1)
    protfs_curl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, TransferEngine.maximumRedirects)
    protfs_curl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
    protfs_curl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
    // Foundation asks for compressed bodies and hands them over decoded.
    protfs_curl_easy_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, "")
    // timeoutIntervalForRequest is the longest wait for the next bytes, not for the whole answer.
    protfs_curl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
    protfs_curl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, Int(max(1, requestTimeout.rounded(.up))))
    protfs_curl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, Int(min(resourceTimeout, 365 * 86400) * 1000))
    for header in headers { list = protfs_curl_slist_append(list, "\(header.name): \(header.value)") }
    if let list { protfs_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list) }
    if let upload {
      configureUpload(easy, upload, context: context, headers: &list)
    } else if method != "GET" || body != nil {
      TransferEngine.configureMethod(easy, method: method, body: body)
    }
  }

  /// Sends `upload` as the body, read as libcurl asks for it, with the request's method: a POST
  /// as libcurl's own (a 301, 302 or 303 redirect turns it into a GET, as Foundation does), any
  /// other method as an upload under its own name. A 307 or 308 sends it again from its start.
  private func configureUpload(
    _ easy: UnsafeMutableRawPointer, _ upload: UploadSource, context: UnsafeMutableRawPointer,
    headers list: inout UnsafeMutablePointer<curl_slist>?
  ) {
    if method == "POST" {
      protfs_curl_easy_setopt_long(easy, CURLOPT_POST, 1)
      protfs_curl_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(upload.size))
      // A POST of unknown length goes chunked only when asked (a PUT's does by itself).
      if upload.size < 0 { list = protfs_curl_slist_append(list, "Transfer-Encoding: chunked") }
    } else {
      protfs_curl_easy_setopt_long(easy, CURLOPT_UPLOAD, 1)
      protfs_curl_easy_setopt_off_t(easy, CURLOPT_INFILESIZE_LARGE, curl_off_t(upload.size))
      if method != "PUT" { protfs_curl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method) }
    }
    // curl_read_callback and curl_write_callback have the same C type.
    protfs_curl_easy_setopt_write_callback(easy, CURLOPT_READFUNCTION, uploadSourceReadCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_READDATA, context)
    protfs_curl_easy_setopt_seek_callback(easy, uploadSourceSeekCallback)
    protfs_curl_easy_setopt_pointer(easy, CURLOPT_SEEKDATA, context)
    protfs_curl_easy_setopt_long(easy, CURLOPT_POSTREDIR, 0)
    // The body goes at once, not after a `100 Continue` round trip, as Foundation sends it.
    list = protfs_curl_slist_append(list, "Expect:")
    protfs_curl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list)
  }

  /// What a data task says it is.
  static let userAgent = "protfs (ProtFSKit)"

  /// Reports the final response once, before the first byte of its body or at the end of one
  /// without a body, and waits for the app's answer: false when the transfer was cancelled.
  @discardableResult
  fileprivate func reportResponse() -> Bool {
    guard !responseReported, let easy else { return !isCancelled }
    responseReported = true
    var effective: UnsafeMutableRawPointer?
    protfs_curl_easy_getinfo_pointer(easy, CURLINFO_EFFECTIVE_URL, &effective)
    let last =
      effective.flatMap { URL(string: String(cString: $0.assumingMemoryBound(to: CChar.self))) } ?? url
    var redirects = 0
    protfs_curl_easy_getinfo_long(easy, CURLINFO_REDIRECT_COUNT, &redirects)
    let response = Response(
      url: last, statusCode: statusCode, headers: headerLines, redirectCount: redirects, setCookies: setCookies)
    // A demand for credentials goes to the authenticator first: answered with one, this attempt
    // ends here (its body unread) and the request goes again.
    if let authenticate, let challenge = challenge(in: response), ask(challenge, authenticate) { return false }
    report(.response(response))
    answered.wait()
    return !isCancelled
  }

  /// A header line of a response.
  fileprivate func header(_ bytes: UnsafeRawBufferPointer) {
    let line = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    if line.hasPrefix("HTTP/") {
      let parts = line.split(separator: " ", maxSplits: 2)
      statusCode = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
      headerLines = []
      return
    }
    guard let colon = line.firstIndex(of: ":") else { return }
    let name = String(line[..<colon])
    let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
    headerLines.append((name, value))
    // Every response's cookies, a redirect's too, with the URL that answered (the effective URL
    // while its headers arrive).
    if name.caseInsensitiveCompare("Set-Cookie") == .orderedSame, let easy {
      var effective: UnsafeMutableRawPointer?
      protfs_curl_easy_getinfo_pointer(easy, CURLINFO_EFFECTIVE_URL, &effective)
      let answering = effective.flatMap { URL(string: String(cString: $0.assumingMemoryBound(to: CChar.self))) } ?? url
      setCookies.append((answering, value))
    }
  }

  /// The failure libcurl's `result` stands for, with the errno Foundation's error codes follow
  /// (`URLErrorMapping` in ProtFSKit): a timeout, a refused or unreachable server, a connection lost.
  private func failure(_ result: CURLcode) -> ProtFSError {
    let detail = String(cString: protfs_curl_easy_strerror(result))
    let errno: Int32?
    switch result {
    case CURLE_OPERATION_TIMEDOUT: errno = ETIMEDOUT
    case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: errno = ECONNREFUSED
    case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE: errno = ECONNRESET
    default: errno = nil
    }
    return ProtFSError(
      .network, "The request to '\(url.absoluteString)' failed: \(detail).", errno: errno,
      remedy: TransferClassification.hint(for: result).map(Remedy.advice))
  }
}

private let dataWriteCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  // A cancelled transfer stops taking bytes: libcurl ends it.
  guard !transfer.isCancelled else { return 0 }
  let length = size * count
  guard transfer.reportResponse() else { return 0 }
  transfer.report(.data(Data(bytes: data, count: length)))
  return length
}

private let dataHeaderCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  transfer.header(UnsafeRawBufferPointer(start: data, count: size * count))
  return size * count
}

/// An upload's body as the app hands it over: bytes, or a file already open (read as it is sent,
/// so the app may remove its name meanwhile), or why the file could not be opened.
package enum UploadBody: Sendable {
  case data(Data)
  case file(FileDescriptor, size: Int64, path: String)
  /// A stream of unknown length (sent chunked), asked of `provider` when the body is first sent
  /// and again whenever it must be sent from its start (a 307 or 308, a credential).
  case stream(provider: BodyStreamProvider)
  case failed(ProtFSError)
}

/// Hands over a body stream (nil: there is none) through `answer`, once, from any thread.
package typealias BodyStreamProvider = @Sendable (_ answer: @escaping @Sendable (BodyStream?) -> Void) -> Void

/// An upload's body as a stream the app hands over (Foundation's `InputStream`), read on the
/// transfer's thread alone.
///
/// `@unchecked Sendable`: the stream is handed over once and then only touched by the transfer.
package final class BodyStream: @unchecked Sendable {
  let stream: InputStream
  /// Wraps `stream`.
  package init(_ stream: InputStream) { self.stream = stream }
}

/// The body of an upload as libcurl reads it, on the transfer's thread only: what was sent so far
/// and what stopped the reading.
///
/// `@unchecked Sendable`: made with its transfer and then read and written on the transfer's
/// thread alone (libcurl's read and seek callbacks run on it).
private final class UploadSource: @unchecked Sendable {
  let body: UploadBody
  /// The body's length, -1 for a stream's.
  let size: Int64
  var offset: Int64 = 0
  var readFailure: ProtFSError?
  /// The stream being read, and how to wait for the provider's next one (set by the transfer).
  private var stream: InputStream?
  var waitForStream: ((BodyStreamProvider) -> BodyStream?)?

  init(_ body: UploadBody) {
    self.body = body
    switch body {
    case .data(let data): size = Int64(data.count)
    case .file(_, let size, _): self.size = size
    case .stream: size = -1
    case .failed: size = 0
    }
  }

  /// Closes the file or the stream (on the transfer's thread, once it reads no more).
  func close() {
    if case .file(let file, _, _) = body { _ = file.close() }
    stream?.close()
    stream = nil
  }

  /// Sends the body again from its start: a stream is asked for anew.
  func rewind() {
    offset = 0
    stream?.close()
    stream = nil
  }

  /// The next bytes of a stream into `buffer`: 0 at its end, libcurl's abort when there is no
  /// stream or it fails.
  private func readStream(_ provider: BodyStreamProvider, into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    if stream == nil {
      guard let given = waitForStream?(provider)?.stream else {
        readFailure = ProtFSError(
          .invalidArgument, "The upload's body stream was not given: the delegate's needNewBodyStream handed over none."
        )
        return Int(CURL_READFUNC_ABORT)
      }
      if given.streamStatus == .notOpen { given.open() }
      stream = given
    }
    guard let stream else { return Int(CURL_READFUNC_ABORT) }
    let count = stream.read(buffer.assumingMemoryBound(to: UInt8.self), maxLength: capacity)
    guard count >= 0 else {
      readFailure = ProtFSError(
        .io, "The upload's body stream failed: \(stream.streamError.map { "\($0)" } ?? "a read error").")
      return Int(CURL_READFUNC_ABORT)
    }
    offset += Int64(count)
    return count
  }

  /// Why the upload cannot begin, if it cannot.
  var failure: ProtFSError? {
    if case .failed(let error) = body { return error }
    return nil
  }

  /// Fills `buffer` with the next bytes; 0 at the end, or libcurl's abort when the file fails.
  func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    if case .stream(let provider) = body { return readStream(provider, into: buffer, capacity: capacity) }
    let wanted = min(capacity, Int(max(0, size - offset)))
    guard wanted > 0 else { return 0 }
    switch body {
    case .data(let data):
      let start = Int(offset)
      data.withUnsafeBytes { raw in buffer.copyMemory(from: raw.baseAddress! + start, byteCount: wanted) }
      offset += Int64(wanted)
      return wanted
    case .file(let file, _, let path):
      switch valueOrErrno(.read, { pread(file.rawValue, buffer, wanted, off_t(offset)) }) {
      case .success(let count):
        offset += Int64(count)
        return count
      case .failure(let error):
        readFailure = ProtFSError.system("read the file to upload", path: path, errno: error)
        return Int(CURL_READFUNC_ABORT)
      }
    case .stream, .failed:
      return Int(CURL_READFUNC_ABORT)
    }
  }
}

private let uploadSourceReadCallback: curl_write_callback = { buffer, size, count, context in
  guard let context, let buffer else { return Int(CURL_READFUNC_ABORT) }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  guard !transfer.isCancelled, let upload = transfer.uploadSource else { return Int(CURL_READFUNC_ABORT) }
  let count = upload.read(into: buffer, capacity: size * count)
  if count > 0, count != Int(CURL_READFUNC_ABORT) {
    transfer.report(.sent(bytes: Int64(count), total: upload.offset, expected: upload.size))
  }
  return count
}

/// libcurl rewinds the body to send it again after a 307 or 308 (to byte 0).
private let uploadSourceSeekCallback: curl_seek_callback = { context, offset, origin in
  guard let context, origin == SEEK_SET, offset >= 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
  guard let upload = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue().uploadSource else {
    return Int32(CURL_SEEKFUNC_FAIL)
  }
  // A stream goes again from its start only (a new one); other bodies from anywhere in them.
  if upload.size < 0 {
    guard offset == 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
    upload.rewind()
    return Int32(CURL_SEEKFUNC_OK)
  }
  guard Int64(offset) <= upload.size else { return Int32(CURL_SEEKFUNC_FAIL) }
  upload.offset = Int64(offset)
  return Int32(CURL_SEEKFUNC_OK)
}
