import CCurl
import Foundation
import Synchronization

/// The response as it arrives: its header lines, the challenge it may hold and the answers the
/// transfer waits for.
extension DataTransfer {
  /// The challenge in `response`, when it is a 401 naming a scheme answered here (Digest before
  /// Basic when it names both), and this transfer may still send a credential.
  func challenge(in response: Response) -> Challenge? {
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
  static func realm(in value: String) -> String? {
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
  func waitForAnswer<Answer: Sendable>(
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
  func waitForStream(_ provider: BodyStreamProvider) -> BodyStream? {
    waitForAnswer { answer in provider(answer) } ?? nil
  }

  /// Asks the authenticator about `challenge` and waits for the answer (or a cancel): true when
  /// the transfer is to send the request again (`retryCredential` set) or end cancelled.
  func ask(_ challenge: Challenge, _ authenticate: Authenticator) -> Bool {
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

  /// Reports the final response once, before the first byte of its body or at the end of one
  /// without a body, and waits for the app's answer: false when the transfer was cancelled.
  @discardableResult
  func reportResponse() -> Bool {
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
  func header(_ bytes: UnsafeRawBufferPointer) {
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
}

let dataWriteCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  // A cancelled transfer stops taking bytes: libcurl ends it.
  guard !transfer.isCancelled else { return 0 }
  let length = size * count
  guard transfer.reportResponse() else { return 0 }
  transfer.report(.data(Data(bytes: data, count: length)))
  return length
}

let dataHeaderCallback: curl_write_callback = { data, size, count, context in
  guard let context, let data else { return 0 }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  transfer.header(UnsafeRawBufferPointer(start: data, count: size * count))
  return size * count
}
