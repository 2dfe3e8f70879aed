import Foundation
import ProtFSSystem

/// What a cancelled download needs to continue where it stopped: the bytes already received stay in
/// the temp file, and the validator lets the server say whether they still belong to its entity.
public struct DownloadResumeData: Sendable, Codable, Equatable {
  /// The URL the download was created with.
  public var url: URL
  /// How many bytes the temp file holds.
  public var bytesReceived: Int64
  /// The total the server announced, or -1 when unknown.
  public var bytesExpected: Int64
  /// The temp file's directory (absolute path).
  public var temporaryDirectory: String
  /// The temp file's name, `CFNetworkDownload_XXXXXX.tmp`.
  public var temporaryFileName: String
  /// The directory the finished file goes to (absolute path).
  public var destinationDirectory: String
  /// The destination file name, when already known (from the URL or Content-Disposition).
  public var fileName: String?
  /// The entity's ETag, sent back as `If-Range`.
  public var entityTag: String?
  /// The entity's Last-Modified date, sent back as `If-Range` when there is no ETag.
  public var lastModified: String?
  /// The expected SHA-256 digest, lowercase hex.
  public var expectedSHA256: String?
  /// The task's description.
  public var taskDescription: String?
  /// The task's extra request headers, sent again with the resumed request; nil when it had none
  /// (and in resume data made before headers were kept).
  public var headers: [UploadHeader]?

  /// Creates resume data; the engine makes these, tests craft them.
  public init(
    url: URL, bytesReceived: Int64, bytesExpected: Int64 = -1, temporaryDirectory: String,
    temporaryFileName: String, destinationDirectory: String, fileName: String? = nil,
    entityTag: String? = nil, lastModified: String? = nil, expectedSHA256: String? = nil,
    taskDescription: String? = nil, headers: [UploadHeader]? = nil
  ) {
    self.url = url
    self.bytesReceived = bytesReceived
    self.bytesExpected = bytesExpected
    self.temporaryDirectory = temporaryDirectory
    self.temporaryFileName = temporaryFileName
    self.destinationDirectory = destinationDirectory
    self.fileName = fileName
    self.entityTag = entityTag
    self.lastModified = lastModified
    self.expectedSHA256 = expectedSHA256
    self.taskDescription = taskDescription
    self.headers = headers
  }

  /// The resume data of `record`'s download from its temp file `temporaryFileName`, which holds
  /// `bytesReceived` bytes (the record's count when nil): everything else, request headers
  /// included, as the record keeps it.
  public init(
    record: DownloadTaskRecord, url: URL, temporaryFileName: String, bytesReceived: Int64? = nil
  ) {
    self.init(
      url: url, bytesReceived: bytesReceived ?? record.bytesReceived, bytesExpected: record.bytesExpected,
      temporaryDirectory: record.temporaryDirectory, temporaryFileName: temporaryFileName,
      destinationDirectory: record.destinationDirectory, fileName: record.fileName, entityTag: record.entityTag,
      lastModified: record.lastModified, expectedSHA256: record.expectedSHA256,
      taskDescription: record.taskDescription,
      headers: record.requestHeaders.isEmpty ? nil : record.requestHeaders)
  }

  /// The opaque bytes `cancel(byProducingResumeData:)` hands out (JSON).
  public func encoded() -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    // Encoding plain strings and integers cannot fail.
    return (try? encoder.encode(self)) ?? Data()
  }

  /// Decodes bytes made by `encoded()`.
  public init(data: Data) throws(ProtFSError) {
    do {
      self = try JSONDecoder().decode(DownloadResumeData.self, from: data)
    } catch {
      throw ProtFSError(
        .invalidArgument, "The resume data is not valid: \(error).",
        remedy: .advice("pass the bytes that cancel(byProducingResumeData:) produced"))
    }
  }
}
