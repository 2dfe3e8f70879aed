import Foundation
import ProtFSSystem

/// One download task as the task store keeps it: what `protfs tasks` lists.
public struct DownloadTaskRecord: Sendable, Equatable, Codable {
  /// The task's id, unique in the store.
  public var id: Int64
  /// The identifier of the session the task belongs to.
  public var sessionIdentifier: String
  /// The URL the task downloads.
  public var url: String
  /// The directory the finished file goes to (absolute path).
  public var destinationDirectory: String
  /// The destination file name, once known.
  public var fileName: String?
  /// The temp file's directory (absolute path).
  public var temporaryDirectory: String
  /// The temp file's name, once created.
  public var temporaryFileName: String?
  /// Where the task is.
  public var state: DownloadState
  /// Bytes in the temp file (or at the destination, once completed).
  public var bytesReceived: Int64
  /// Total the server announced, or -1 when unknown.
  public var bytesExpected: Int64
  /// The entity's ETag, for `If-Range`.
  public var entityTag: String?
  /// The entity's Last-Modified, for `If-Range` when there is no ETag.
  public var lastModified: String?
  /// The expected SHA-256 digest, lowercase hex.
  public var expectedSHA256: String?
  /// The error's message, for a failed task.
  public var errorMessage: String?
  /// The errno behind the error, if any.
  public var errorNumber: Int32?
  /// The error itself, with its code and typed remedy, for a task that failed in this version
  /// (nil in records an earlier version stored, which keep only `errorMessage`).
  public var failure: ProtFSError?
  /// The caller's description of the task (`taskDescription`).
  public var taskDescription: String?
  /// When the task was created (seconds since 1970).
  public var createdAt: Double
  /// When the record last changed (seconds since 1970).
  public var updatedAt: Double
  /// The longest time, in seconds, the task's transfer may go with no data or too little, before
  /// the attempt times out (URLSession's `timeoutIntervalForRequest`); nil for the session's.
  public var requestTimeout: Double?
  /// The longest time, in seconds from its creation, the task may take in all, across resumes
  /// (URLSession's `timeoutIntervalForResource`); nil for the session's.
  public var resourceTimeout: Double?
  /// What an upload task sends and how the server answered; nil for a download.
  public var upload: UploadDetails?
  /// The response body an upload task received (at most `UploadDetails.keptResponseLimit` bytes);
  /// not part of the JSON form.
  public var responseBody: Data?

  /// Whether the task downloads or uploads.
  public var kind: TaskKind { upload == nil ? .download : .upload }
  /// Whether the finished file is handed over (kept at its temp name for the app) instead of placed.
  public var handsOver: Bool = false
  /// A handed-over download's final response (its status and header fields), once it completed.
  public var response: DownloadResponse?
  /// The delivery of a handed-over task's completion to its app (nil before it settles).
  public var delivery: DownloadDelivery?
  /// A download task's extra request headers (`DownloadRequest.headers`); not part of the JSON
  /// form, as they may hold credentials.
  public var requestHeaders: [UploadHeader] = []
  /// A download task's HTTP method when it is not GET (`DownloadRequest.method`); nil for GET.
  public var requestMethod: String?
  /// A download task's request body (`DownloadRequest.body`), sent with its method; not part of the
  /// JSON form, as it may hold credentials.
  public var requestBody: Data?
  /// When the task may begin, in seconds since 1970 (`earliestBeginDate`); nil: as soon as it is
  /// resumed.
  public var earliestBegin: Double?

  /// Whether the task can continue from its temp file (`Range`, `If-Range`) and give resume data:
  /// only a GET download can, as on iOS. An upload, or another method, starts over.
  public var isResumable: Bool { upload == nil && requestMethod == nil }

  /// The fields a task's JSON form (`protfs tasks --json`) shows: all but `failure`, whose text is
  /// `errorMessage` already, and `responseBody`.
  private enum CodingKeys: String, CodingKey {
    case id, sessionIdentifier, url, destinationDirectory, fileName, temporaryDirectory, temporaryFileName, state
    case bytesReceived, bytesExpected, entityTag, lastModified, expectedSHA256, errorMessage, errorNumber
    case taskDescription, createdAt, updatedAt, requestTimeout, resourceTimeout, upload, delivery, requestMethod
    case earliestBegin
  }

  /// Whether the task was handed over and its completion (or part of it) still waits for the app.
  public var awaitsDelivery: Bool { handsOver && delivery?.isOutstanding == true }

  /// The handed-over temp file's absolute path, while it is kept for the app.
  public var handedOverPath: String? {
    guard handsOver, state == .completed, let name = temporaryFileName else { return nil }
    return temporaryDirectory.hasSuffix("/") ? temporaryDirectory + name : temporaryDirectory + "/" + name
  }

  /// The destination file's absolute path, once the file name is known.
  public var destinationPath: String? {
    fileName.map { destinationDirectory.hasSuffix("/") ? destinationDirectory + $0 : destinationDirectory + "/" + $0 }
  }

  /// Creates a record.
  public init(
    id: Int64, sessionIdentifier: String, url: String, destinationDirectory: String, fileName: String?,
    temporaryDirectory: String, temporaryFileName: String?, state: DownloadState, bytesReceived: Int64,
    bytesExpected: Int64, entityTag: String?, lastModified: String?, expectedSHA256: String?,
    errorMessage: String?, errorNumber: Int32?, taskDescription: String?, createdAt: Double, updatedAt: Double
  ) {
    self.id = id
    self.sessionIdentifier = sessionIdentifier
    self.url = url
    self.destinationDirectory = destinationDirectory
    self.fileName = fileName
    self.temporaryDirectory = temporaryDirectory
    self.temporaryFileName = temporaryFileName
    self.state = state
    self.bytesReceived = bytesReceived
    self.bytesExpected = bytesExpected
    self.entityTag = entityTag
    self.lastModified = lastModified
    self.expectedSHA256 = expectedSHA256
    self.errorMessage = errorMessage
    self.errorNumber = errorNumber
    self.taskDescription = taskDescription
    self.createdAt = createdAt
    self.updatedAt = updatedAt
  }
}

/// Where a handed-over task's completion is on its way to the app.
public enum DownloadDelivery: String, Sendable, Equatable, Codable {
  /// Settled; the app has not acknowledged it yet (queued for the next subscriber).
  case pending
  /// The app's `didFinishDownloadingTo` returned (the file is gone from its temp name); its
  /// `didCompleteWithError` has not: only that is delivered again.
  case fileDelivered = "file-delivered"
  /// The app acknowledged it; it is never delivered again.
  case delivered

  /// Whether something of it still waits for the app.
  public var isOutstanding: Bool { self != .delivered }
}

/// The response a handed-over download completed with: the app reads its status and header fields
/// from the task's `response`, as iOS gives them (a 404's body is the file, as nsurlsessiond's).
public struct DownloadResponse: Sendable, Equatable, Codable {
  /// The HTTP status.
  public var status: Int
  /// The header fields, in order.
  public var headers: [UploadHeader]

  /// A response of `status` with `headers`.
  public init(status: Int, headers: [UploadHeader]) {
    self.status = status
    self.headers = headers
  }
}
