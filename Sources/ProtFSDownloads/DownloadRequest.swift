import Foundation

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
  /// Whether the finished file is handed over rather than placed (a background session's task,
  /// created without a destination): the task completes keeping its temp file, owned by the
  /// container's owner, and a delivery is queued in the store until `DownloadStore.acknowledge`.
  public var handsOver: Bool = false
  /// Extra request headers, in order: sent with every request of the task, a resumed one (with
  /// `Range`) included, and kept in the task store and in its resume data.
  public var headers: [UploadHeader]

  /// Creates a request.
  public init(
    url: URL, destinationDirectory: String? = nil, fileName: String? = nil, expectedSHA256: String? = nil,
    taskDescription: String? = nil, headers: [UploadHeader] = []
  ) {
    self.url = url
    self.destinationDirectory = destinationDirectory
    self.fileName = fileName
    self.expectedSHA256 = expectedSHA256
    self.taskDescription = taskDescription
    self.headers = headers
  }
}
