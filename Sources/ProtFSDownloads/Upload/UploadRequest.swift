import Foundation
import ProtFSSystem

/// The HTTP method of an upload task.
public enum UploadMethod: String, Sendable, Codable, CaseIterable {
  /// `PUT`: the body replaces the resource (libcurl's `CURLOPT_UPLOAD`).
  case put = "PUT"
  /// `POST`: the body is sent to the resource.
  case post = "POST"

  /// The method spelled `text` (any case), or a clear error naming it.
  public static func parse(_ text: String) throws(ProtFSError) -> UploadMethod {
    guard let method = UploadMethod(rawValue: text.uppercased()) else {
      throw ProtFSError(
        .invalidArgument, "'\(text)' is not an upload method; use PUT or POST.",
        remedy: .advice("give -X PUT or -X POST"))
    }
    return method
  }
}

/// One request header of an upload task.
public struct UploadHeader: Sendable, Equatable, Codable {
  /// The header's name.
  public var name: String
  /// The header's value.
  public var value: String

  /// Creates a header; `validated()` checks it.
  public init(name: String, value: String) {
    self.name = name
    self.value = value
  }

  /// Parses `Name: value` (as curl's `-H`), or throws an error naming the text.
  public static func parse(_ text: String) throws(ProtFSError) -> UploadHeader {
    guard let colon = text.firstIndex(of: ":") else {
      throw ProtFSError(
        .invalidArgument, "The header '\(text)' has no ':'; give it as 'Name: value'.",
        remedy: .advice("give -H 'Content-Type: application/json'"))
    }
    let name = String(text[..<colon]).trimmingCharacters(in: .whitespaces)
    let value = String(text[text.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
    return try UploadHeader(name: name, value: value).validated()
  }

  /// The characters RFC 9110 allows in a token: a header name, or a method.
  static let tokenCharacters = Set(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

  /// The header itself when its name is a token and its value holds no line break or NUL.
  public func validated() throws(ProtFSError) -> UploadHeader {
    guard !name.isEmpty, name.allSatisfy({ Self.tokenCharacters.contains($0) }) else {
      throw ProtFSError(
        .invalidArgument, "The header name '\(name)' is not valid: use letters, digits and -.",
        remedy: .advice("give headers as 'Name: value'"))
    }
    guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
      throw ProtFSError(
        .invalidArgument, "The value of the header '\(name)' holds a line break, which HTTP does not allow.")
    }
    return self
  }
}

/// What to upload where: the argument of `DownloadSession.uploadTask(with:fromFile:)`.
public struct UploadRequest: Sendable, Equatable {
  /// The http or https URL the body goes to.
  public var url: URL
  /// PUT (the default) or POST.
  public var method: UploadMethod
  /// Extra request headers, in order.
  public var headers: [UploadHeader]
  /// The task's description.
  public var taskDescription: String?
  /// When the task may begin, in seconds since 1970 (`earliestBeginDate`); nil: when resumed.
  public var earliestBegin: Double?

  /// Creates a request.
  public init(url: URL, method: UploadMethod = .put, headers: [UploadHeader] = [], taskDescription: String? = nil) {
    self.url = url
    self.method = method
    self.headers = headers
    self.taskDescription = taskDescription
  }
}

/// What the task store keeps of an upload task besides the common fields: for an upload the
/// record's `bytesReceived` and `bytesExpected` count the bytes sent and to send, its temp file is
/// the snapshot, and `fileName` is the source file's name.
public struct UploadDetails: Sendable, Equatable, Codable {
  /// The method.
  public var method: UploadMethod
  /// The request headers.
  public var headers: [UploadHeader]
  /// The source file's path when the task was created (the snapshot is what is sent).
  public var sourcePath: String
  /// The HTTP status of the last response, once there is one.
  public var responseStatus: Int?
  /// The response body's size, which may exceed what is kept (`UploadDetails.keptResponseLimit`).
  public var responseBytes: Int64?

  /// The most bytes of a response body kept with the task (16 MiB); the rest is counted, not kept.
  public static let keptResponseLimit = 16 << 20

  /// Creates the details.
  public init(method: UploadMethod, headers: [UploadHeader], sourcePath: String) {
    self.method = method
    self.headers = headers
    self.sourcePath = sourcePath
  }
}

/// Whether a task downloads or uploads.
public enum TaskKind: String, Sendable, Codable {
  /// A download task.
  case download
  /// An upload task.
  case upload
}
