import Foundation
import ProtFSSystem

/// Upload tasks: a snapshot of the file taken when the task is made, sent by the session's engine
/// with PUT or POST, the server's answer kept with the task (docs/semantics.md §9).
extension DownloadSession {
  /// A suspended task that sends the file at `path` (absolute) to `request.url`; call `resume()`
  /// to start it (URLSession's `uploadTask(with:fromFile:)`).
  ///
  /// The file is checked and copied now (a file over 64 MiB is held open and copied while the task
  /// starts sending, so that its transfer need not wait for the whole copy): it must be a regular
  /// file inside the app's container,
  /// reached without a symbolic link, and readable under the device's lock rules (a complete file
  /// while locked fails with `.protectedDataUnavailable`, EPERM). The copy is what is sent, so the
  /// app may delete its file at once; it is removed when the task completes, fails or is cancelled.
  /// Progress comes as `.progress` events (bytes sent) and `didSendBodyData`; the answer as
  /// `.receivedResponse` and `didReceive data`, and stays in the task's record.
  ///
  /// With `handsOver` (a session the session service runs for an app), the completion and the
  /// answer are queued in the store for the app until it acknowledges them.
  public func uploadTask(with request: UploadRequest, fromFile path: String, handsOver: Bool = false)
    throws(ProtFSError) -> DownloadTask
  {
    if core.isInvalidated {
      throw ProtFSError(
        .invalidArgument, "The download session '\(identifier)' was invalidated.",
        remedy: .advice("open the session again with the same identifier"))
    }
    try Self.checkUploadURL(request.url)
    let headers = try request.headers.map { header throws(ProtFSError) in try header.validated() }
    let snapshot = try UploadSnapshot.make(from: path, configuration: configuration)
    let now = Date().timeIntervalSince1970
    let fileName = URL(fileURLWithPath: path).lastPathComponent
    var record = DownloadTaskRecord(
      id: 0, sessionIdentifier: identifier, url: request.url.absoluteString, destinationDirectory: "",
      fileName: fileName, temporaryDirectory: snapshot.directory, temporaryFileName: snapshot.name,
      state: .suspended, bytesReceived: 0, bytesExpected: snapshot.size, entityTag: nil, lastModified: nil,
      expectedSHA256: nil, errorMessage: nil, errorNumber: nil, taskDescription: request.taskDescription,
      createdAt: now, updatedAt: now)
    record.requestTimeout = Monotonic.seconds(configuration.requestTimeout)
    record.resourceTimeout = Monotonic.seconds(configuration.resourceTimeout)
    record.upload = UploadDetails(method: request.method, headers: headers, sourcePath: path)
    record.handsOver = handsOver
    record.earliestBegin = request.earliestBegin
    let inserted: DownloadTaskRecord
    do {
      inserted = try core.store.insert(
        [record], owner: core.owner, requesting: configuration.recordsForService ? .resume : nil)[0]
    } catch {
      TemporaryRemoval(
        directory: try? configuration.fileSystem.openDirectory(snapshot.directory, creating: false),
        name: snapshot.name
      ).remove()
      throw error
    }
    let task = DownloadTask(record: inserted, url: request.url, fileNameIsExplicit: true, core: core)
    task.runtime.withLock { $0.snapshotCopy = snapshot.copying }
    core.tasks.withLock { $0[task.id] = task }
    return task
  }

  /// The URL `text` names when an upload can go to it, or an error naming it.
  package static func uploadURL(_ text: String) throws(ProtFSError) -> URL {
    guard let url = URL(string: text) else {
      throw ProtFSError(.invalidArgument, "'\(text)' is not a URL.", remedy: .advice("give an http or https URL"))
    }
    try checkUploadURL(url)
    return url
  }

  /// Throws unless `url` is an http or https URL with a host: the only ones an upload can go to.
  package static func checkUploadURL(_ url: URL) throws(ProtFSError) {
    let scheme = url.scheme?.lowercased() ?? ""
    guard scheme == "http" || scheme == "https", !(url.host ?? "").isEmpty else {
      throw ProtFSError(
        .invalidArgument, "Cannot upload to '\(url.absoluteString)': only http and https URLs take uploads.",
        remedy: .advice("give an URL such as https://example.com/upload"))
    }
  }
}

extension DownloadTask {
  /// Whether the task downloads or uploads.
  public var kind: TaskKind { runtime.withLock { $0.record.kind } }
  /// Bytes sent so far by an upload task (`countOfBytesSent`).
  public var countOfBytesSent: Int64 { runtime.withLock { $0.record.upload == nil ? 0 : $0.record.bytesReceived } }
  /// Bytes an upload task sends in all (`countOfBytesExpectedToSend`).
  public var countOfBytesExpectedToSend: Int64 {
    runtime.withLock { $0.record.upload == nil ? 0 : $0.record.bytesExpected }
  }
  /// The HTTP status of an upload's last response, once there is one.
  public var responseStatus: Int? { runtime.withLock { $0.record.upload?.responseStatus } }
  /// The response body an upload task received (at most `UploadDetails.keptResponseLimit` bytes).
  public var responseBody: Data? { runtime.withLock { $0.record.responseBody } }
}
