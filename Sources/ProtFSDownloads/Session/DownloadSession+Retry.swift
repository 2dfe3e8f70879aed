import Foundation
import ProtFSSystem

extension DownloadSession {
  /// The task that goes on with the task `record` of this session: the one reattached, else, for a
  /// failed task (settled, so not reattached), a new task that retries it, from its temp file
  /// (with Range and If-Range) when it kept one. `retried` is true for a new task.
  package func continuation(of record: DownloadTaskRecord) throws(ProtFSError) -> (task: DownloadTask, retried: Bool) {
    if let attached = task(id: record.id) { return (attached, false) }
    guard let url = URL(string: record.url) else {
      throw ProtFSError(.malformed, "Download task \(record.id) has the invalid URL '\(record.url)'.")
    }
    if let temporary = record.temporaryFileName, record.isResumable {
      let data = DownloadResumeData(record: record, url: url, temporaryFileName: temporary)
      return (try downloadTask(withResumeData: data.encoded()), true)
    }
    let request = DownloadRequest(
      url: url, destinationDirectory: record.destinationDirectory, fileName: record.fileName,
      expectedSHA256: record.expectedSHA256, taskDescription: record.taskDescription,
      headers: record.requestHeaders, method: record.requestMethod ?? "GET", body: record.requestBody)
    return (try downloadTasks(with: [request])[0], true)
  }
}
