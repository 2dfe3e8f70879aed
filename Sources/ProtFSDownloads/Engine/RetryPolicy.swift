import CCurl
import Foundation
import ProtFSSystem

/// How the engine judges the end of an attempt (policy; `TransferEngine+Outcome.swift` acts on
/// it): which failures are worth another attempt, which are final, and how they are said.
package enum TransferClassification {
  /// Whether an HTTP status says the server may answer better later (5xx, 408, 429).
  package static func isRetryable(status: Int) -> Bool { status >= 500 || status == 408 || status == 429 }

  /// Whether a libcurl failure may go away on another attempt (a dropped or refused connection,
  /// a timeout, a name that did not resolve).
  package static func isRetryable(_ code: CURLcode) -> Bool {
    switch code {
    case CURLE_COULDNT_CONNECT, CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING,
      CURLE_OPERATION_TIMEDOUT, CURLE_SSL_CONNECT_ERROR, CURLE_HTTP2, CURLE_HTTP2_STREAM,
      CURLE_COULDNT_RESOLVE_HOST:
      return true
    default:
      return false
    }
  }

  /// The reason phrase of an HTTP status, or of its class.
  package static func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 408: return "Request Timeout"
    case 410: return "Gone"
    case 416: return "Range Not Satisfiable"
    case 429: return "Too Many Requests"
    case 500: return "Internal Server Error"
    case 502: return "Bad Gateway"
    case 503: return "Service Unavailable"
    case 504: return "Gateway Timeout"
    case 300..<400: return "Redirection"
    case 400..<500: return "Client Error"
    case 500..<600: return "Server Error"
    default: return "Unexpected Status"
    }
  }

  /// libcurl's failures that the same request would meet again, said in the user's terms: a
  /// redirect to a scheme protfs does not follow, a header larger than libcurl accepts. Never retried.
  package static func deterministicFailure(_ t: Transfer, result: CURLcode) -> ProtFSError? {
    let url = t.task.url.absoluteString
    if result == CURLE_UNSUPPORTED_PROTOCOL, let location = t.location,
      let scheme = URL(string: location)?.scheme?.lowercased(), scheme != "http" && scheme != "https"
    {
      return ProtFSError(
        .network,
        "The server redirected '\(url)' to a \(scheme): URL (\(location)), which protfs does not follow; it follows redirects to http and https only.",
        remedy: .advice("ask the server's owner for an http or https URL of the file"))
    }
    // libcurl refuses a header line over 100 KiB with "Out of memory" (27) before 8.6, CURLE_TOO_LARGE (100) after.
    if !t.bodyStarted && (result == CURLE_OUT_OF_MEMORY || result.rawValue == 100) {
      return ProtFSError(
        .network,
        "The server sent an oversized header for '\(url)' (a header line over 100 KiB, more than protfs accepts).",
        remedy: .advice("the server is misconfigured or hostile; retrying would not help"))
    }
    return nil
  }

  /// What the user can do about a libcurl failure, where there is something.
  package static func hint(for code: CURLcode) -> String? {
    switch code {
    case CURLE_URL_MALFORMAT: return "check the URL"
    case CURLE_UNSUPPORTED_PROTOCOL: return "protfs downloads http, https and file URLs"
    case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST: return "check that the server is up and reachable"
    case CURLE_FILE_COULDNT_READ_FILE: return "check that the file exists and is readable"
    case CURLE_TOO_MANY_REDIRECTS: return "the server redirects in a loop"
    case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE:
      return "the server's certificate is not trusted; trust its authority with a certificates file"
    default: return nil
    }
  }

  /// The failure of a task past its resource timeout of `limit` seconds.
  package static func resourceTimedOut(_ url: String, limit: Double) -> ProtFSError {
    ProtFSError(
      .network, "The download of '\(url)' did not finish within its resource timeout of \(format(seconds: limit)).",
      errno: ETIMEDOUT, remedy: .advice("allow a longer resource timeout, or download it again"))
  }

  /// `seconds` in the largest whole unit that fits (`7 d`, `2 h`, `90 s`), or in seconds.
  package static func format(seconds: Double) -> String {
    for (unit, size) in [("d", 86400.0), ("h", 3600.0), ("min", 60.0)] where seconds >= size {
      if (seconds / size).rounded() == seconds / size { return "\(Int(seconds / size)) \(unit)" }
    }
    return String(format: "%g s", seconds)
  }

  /// A timeout read back from the store, if it is a usable one; a damaged store's value gives way
  /// to the session's.
  package static func stored(_ seconds: Double?) -> Double? {
    guard let seconds, seconds.isFinite, seconds > 0 else { return nil }
    return seconds
  }
}

/// When a failed attempt is tried again: after a delay that doubles each attempt, from the base
/// to the cap, until the retries are used up.
package struct RetryPolicy {
  /// Retries allowed after the first attempt.
  package let maximumRetries: Int
  /// The delay before the first retry, in nanoseconds.
  package let baseDelay: UInt64
  /// The longest delay, in nanoseconds.
  package let maximumDelay: UInt64

  /// The policy of `configuration`.
  package init(_ configuration: DownloadSessionConfiguration) {
    maximumRetries = configuration.maximumRetries
    baseDelay = Monotonic.nanoseconds(configuration.retryBaseDelay)
    maximumDelay = Monotonic.nanoseconds(configuration.retryMaximumDelay)
  }

  /// The delay before the next attempt after `attempts` attempts, or nil when they are used up.
  package func delay(afterAttempts attempts: Int) -> UInt64? {
    guard attempts <= maximumRetries else { return nil }
    return min(maximumDelay, baseDelay << UInt64(min(attempts - 1, 30)))
  }

  /// `error`, final, saying how many attempts were made.
  package static func gaveUp(_ error: ProtFSError, after attempts: Int) -> ProtFSError {
    var final = error
    final.message = final.message.hasSuffix(".") ? String(final.message.dropLast()) : final.message
    final.message += " (gave up after \(attempts) attempts)."
    return final
  }
}
