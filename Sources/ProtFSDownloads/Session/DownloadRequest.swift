import Foundation
import ProtFSSystem

/// What to download and where: the argument of `DownloadSession.downloadTasks(with:)`.
public struct DownloadRequest: Sendable, Equatable {
  /// The URL to download (http, https or file).
  public var url: URL
  /// The directory for the finished file; the session's destination directory when nil.
  public var destinationDirectory: String?
  /// The destination file name; from Content-Disposition or the URL when nil.
  public var fileName: String?
  /// The SHA-256 the bytes must have, in hex; a mismatch fails the task and keeps nothing.
  public var expectedSHA256: String?
  /// The task's description.
  public var taskDescription: String?
  /// When the task may begin, in seconds since 1970 (`earliestBeginDate`); nil: when resumed.
  public var earliestBegin: Double?
  /// Whether the finished file is handed over rather than placed (a background session's task,
  /// created without a destination): the task completes keeping its temp file, owned by the
  /// container's owner, and a delivery is queued in the store until `DownloadStore.acknowledge`.
  public var handsOver: Bool = false
  /// Extra request headers, in order: sent with every request of the task, a resumed one (with
  /// `Range`) included, and kept in the task store and in its resume data.
  public var headers: [UploadHeader]
  /// The HTTP method, uppercase (GET by default). Only a GET continues from its temp file with
  /// `Range` and gives resume data, as on iOS; any other method starts over on each attempt.
  public var method: String = "GET"
  /// The request body, sent with a method other than GET or HEAD (ignored with those, as
  /// Foundation does); at most `DownloadRequest.maximumBodySize` bytes.
  public var body: Data?

  /// The largest body a download's request may carry here (1 MiB): it is kept in the task store
  /// with the task, and crosses the session service's socket in one message.
  public static let maximumBodySize = 1 << 20

  /// Creates a request.
  public init(
    url: URL, destinationDirectory: String? = nil, fileName: String? = nil, expectedSHA256: String? = nil,
    taskDescription: String? = nil, headers: [UploadHeader] = [], method: String = "GET", body: Data? = nil
  ) {
    self.url = url
    self.destinationDirectory = destinationDirectory
    self.fileName = fileName
    self.expectedSHA256 = expectedSHA256
    self.taskDescription = taskDescription
    self.headers = headers
    self.method = method
    self.body = body
  }

  /// The URL `text` names when a download can fetch it (http or https with a host, or file), or an
  /// error naming it: the one check of a download's URL, for the command line and the library.
  public static func url(from text: String) -> Result<URL, ProtFSError> {
    guard let url = URL(string: text), let scheme = url.scheme?.lowercased() else {
      return .failure(
        ProtFSError(
          .invalidArgument, "'\(text)' is not a URL.",
          remedy: .advice("give an absolute URL such as https://example.com/file.zip")))
    }
    guard ["http", "https", "file"].contains(scheme) else {
      return .failure(
        ProtFSError(
          .invalidArgument, "The URL '\(text)' has the unsupported scheme '\(scheme)'.",
          remedy: .advice("use http, https or file")))
    }
    if scheme != "file" && (url.host ?? "").isEmpty {
      return .failure(ProtFSError(.invalidArgument, "The URL '\(text)' has no host."))
    }
    return .success(url)
  }

  /// `text` in lowercase when it is a SHA-256 digest (64 hexadecimal digits), or nil: the one check
  /// of an expected digest, for the command line and the library.
  public static func normalizedSHA256(_ text: String) -> String? {
    let lower = text.lowercased()
    guard lower.utf8.count == 64, lower.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
    else { return nil }
    return lower
  }

  /// `method` uppercased when it is an HTTP token, or an error naming it.
  public static func validatedMethod(_ method: String) throws(ProtFSError) -> String {
    let upper = method.uppercased()
    guard !upper.isEmpty, upper.count <= 32, upper.allSatisfy({ UploadHeader.tokenCharacters.contains($0) }) else {
      throw ProtFSError(
        .invalidArgument, "'\(method)' is not an HTTP method; use a word such as GET or POST.",
        remedy: .advice("give the request's method as letters, such as POST"))
    }
    guard upper != "CONNECT" else {
      throw ProtFSError(.invalidArgument, "A download cannot use the method CONNECT; use GET or POST.")
    }
    return upper
  }

  /// Whether a request with `method` (uppercase) carries its body: not a GET or a HEAD, as
  /// Foundation sends none with those.
  public static func sendsBody(_ method: String) -> Bool { method != "GET" && method != "HEAD" }

  /// Throws, naming the request's URL, when `body` is longer than `maximumBodySize`.
  public static func checkBodySize(_ body: Data, url: String) throws(ProtFSError) {
    guard body.count > maximumBodySize else { return }
    throw ProtFSError(
      .invalidArgument,
      "The request body for '\(url)' has \(body.count) bytes; a download's may have at most \(maximumBodySize) here.",
      remedy: .advice("send a large body as an upload task from a file"))
  }
}
