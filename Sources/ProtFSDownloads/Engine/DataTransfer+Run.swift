import CCurl
import Foundation
import ProtFSSystem

/// The transfer's thread: the request made, run to its end (once more for each credential), and
/// its failure worded.
extension DataTransfer {
  func run() {
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
    while perform(easy, on: multi) {}
  }

  /// Runs one attempt of the request on `multi` to its end (or a cancel), and reports how it
  /// ended; true when it is to go again with the credential a challenge was answered with.
  private func perform(_ easy: UnsafeMutableRawPointer, on multi: UnsafeMutableRawPointer) -> Bool {
    protfs_curl_multi_add_handle(multi, easy)
    var running: Int32 = 1
    while running > 0, !isCancelled {
      protfs_curl_multi_perform(multi, &running)
      if running == 0 { break }
      var ready: Int32 = 0
      protfs_curl_multi_poll(multi, nil, 0, 1000, &ready)
    }
    guard !isCancelled else { return false }
    var left: Int32 = 0
    var result = CURLE_OK
    if let message = protfs_curl_multi_info_read(multi, &left) { result = protfs_curlmsg_result(message) }
    protfs_curl_multi_remove_handle(multi, easy)
    // A response without a body is answered (or challenged) at its end.
    let answered = result == CURLE_OK && upload?.readFailure == nil ? reportResponse() : true
    if let credential = retryCredential {
      retryCredential = nil
      prepareRetry(easy, with: credential)
      return true
    }
    if let failure = upload?.readFailure {
      end(failure)
    } else if result == CURLE_OK {
      guard answered else { return false }
      end(nil)
    } else {
      end(failure(result))
    }
    return false
  }

  /// Sets the handle up to send the request again with `credential`, its body from the start.
  func prepareRetry(
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

  func configure(
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
  func configureUpload(
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

  /// The failure libcurl's `result` stands for, with the errno Foundation's error codes follow
  /// (`URLErrorMapping` in ProtFSKit): a timeout, a refused or unreachable server, a connection lost.
  func failure(_ result: CURLcode) -> ProtFSError {
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
