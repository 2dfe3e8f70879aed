import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// Tasks as the service reports them: snapshots, and the resume data of a cancelled or failed
/// download.
extension SessionService {
  /// Cancels `task` producing resume data, waiting for it.
  static func cancelProducingResumeData(_ task: DownloadTask) -> Data? {
    let done = DispatchSemaphore(value: 0)
    let box = Mutex<Data?>(nil)
    task.cancel { data in
      box.withLock { $0 = data }
      done.signal()
    }
    done.wait()
    return box.withLock { $0 }
  }

  /// The snapshot of `record` the app sees; `cancelledReason` is the reason the service recorded
  /// for it (`BackgroundTaskCancelledReason`'s raw value), which a task cancelled counts. Its
  /// resume data is Apple's (`AppleResumeData`).
  func snapshot(_ record: DownloadTaskRecord, cancelledReason: Int? = nil) -> SessionTaskSnapshot {
    let state: String
    switch record.state {
    // An interrupted task goes on when the service claims it, as nsurlsessiond's does.
    case .running, .waitingForUnlock, .interrupted: state = "running"
    case .suspended: state = "suspended"
    case .canceling: state = "canceling"
    case .completed, .failed: state = "completed"
    }
    let error =
      record.state == .failed
      ? record.failure ?? ProtFSError(.io, record.errorMessage ?? "The download failed.", errno: record.errorNumber)
      : nil
    let reason = error?.code == .cancelled ? cancelledReason.flatMap(BackgroundTaskCancelledReason.init) : nil
    let url = URL(string: record.url) ?? URL(fileURLWithPath: "/")
    if let upload = record.upload {
      // An upload's record counts the bytes sent and to send.
      return SessionTaskSnapshot(
        id: record.id, kind: .upload,
        request: SessionRequest(
          url: url, method: upload.method.rawValue,
          headers: upload.headers,
          taskDescription: record.taskDescription),
        state: state, bytesReceived: upload.responseBytes ?? 0, bytesExpectedToReceive: upload.responseBytes ?? -1,
        bytesSent: record.bytesReceived, bytesExpectedToSend: record.bytesExpected,
        statusCode: upload.responseStatus ?? 0, error: error, cancelledReason: reason)
    }
    return SessionTaskSnapshot(
      id: record.id, kind: .download,
      request: SessionRequest(
        url: url, method: record.requestMethod ?? "GET", headers: record.requestHeaders,
        taskDescription: record.taskDescription),
      state: state, bytesReceived: record.bytesReceived, bytesExpectedToReceive: record.bytesExpected,
      statusCode: record.response?.status ?? (record.state == .completed ? 200 : 0), error: error,
      cancelledReason: reason,
      resumeData: error.flatMap { Self.resumeData(record, $0) }.flatMap(Self.appleResumeData),
      responseHeaders: record.response?.headers)
  }

  /// The resume data of a download that failed keeping its temp file (cancelled, broken off, or
  /// stopped by the lock), as `cancel(byProducingResumeData:)` would have made it; nil otherwise.
  static func resumeData(_ record: DownloadTaskRecord, _ error: ProtFSError) -> Data? {
    guard record.state == .failed, record.isResumable, let temporary = record.temporaryFileName,
      [.cancelled, .network, .protectedDataUnavailable].contains(error.code), let url = URL(string: record.url)
    else { return nil }
    return DownloadResumeData(record: record, url: url, temporaryFileName: temporary).encoded()
  }

  /// The engine's resume data `data` (`DownloadResumeData`'s encoding) as Apple's, which the app
  /// gets.
  static func appleResumeData(_ data: Data) -> Data? {
    guard let engine = try? DownloadResumeData(data: data) else { return nil }
    var headers: [String: String] = [:]
    for header in engine.headers ?? [] { headers[header.name] = header.value }
    return AppleResumeData(
      url: engine.url, bytesReceived: engine.bytesReceived, temporaryFileName: engine.temporaryFileName,
      entityTag: engine.entityTag, serverDownloadDate: engine.lastModified, headers: headers
    ).archived
  }

  /// The download resume data `data` continues in `session`, and the task whose temp file it
  /// takes. The data is Apple's format, and the app may rewrite it as iOS apps do: what it names
  /// is checked against the store, which holds the truth. Its temp file must be one the session
  /// keeps for a download that failed resumable, its URL that download's, its byte count the bytes
  /// that file holds; everything else (directories, validators, request headers) is the record's,
  /// and the store hands the file over once. Anything else is refused (`resumeDataRefused`), and
  /// nothing is read or changed outside that temp file.
  func resumable(_ data: Data, in hosted: HostedSession) throws(ProtFSError) -> (DownloadResumeData, Int64) {
    let session = hosted.session.identifier
    let given = try AppleResumeData(data)
    let name = given.temporaryFileName
    guard
      let record = try store.tasks(session: session).first(where: {
        $0.temporaryFileName == name && $0.state == .failed && $0.isResumable
      })
    else {
      throw AppleResumeData.refusal(
        "its temp file '\(name)' is not one the session '\(session)' keeps for a download to continue")
    }
    guard record.url == given.url.absoluteString, let url = URL(string: record.url) else {
      throw AppleResumeData.refusal("it names another URL than the download whose temp file it names")
    }
    guard record.bytesReceived == given.bytesReceived else {
      throw AppleResumeData.refusal(
        "it counts \(given.bytesReceived) bytes received; the temp file holds \(record.bytesReceived)")
    }
    // The file comes back from the app's tmp/ (where a cancellation left it) to be continued.
    unparkPartialFile(name, bundleID: hosted.bundleID)
    return (DownloadResumeData(record: record, url: url, temporaryFileName: name), record.id)
  }
}
