import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// A standard (not background) session's download, run in the app's own process as iOS runs one:
/// the body goes to a file of the app's `tmp/` (`CFNetworkDownload_XXXXXX.tmp`), written by the
/// app itself, so its container's classes decide (a locked class-A `tmp/` fails the download with
/// EPERM, as on a phone), and the task lives and dies with the app: it stops while the app is
/// suspended and ends with it. The file is handed to `didFinishDownloadingTo` (or the completion
/// handler) and deleted when that returns, as a background session's is.
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessDownloadTask: URLSessionDownloadTask, RunsInProcess, @unchecked Sendable {
  /// The transfer, made with the task.
  let run: InProcessTransfer
  /// What the transfer's events share with the task.
  private let controls: TransferControls

  /// A download of `request`, or, with `resuming`, one continuing that resume data's file in the
  /// app's `tmp/` from its bytes (`Range`, with `If-Range` so that a changed entity starts over).
  init(id: Int, request: URLRequest, session: URLSession, resuming: InProcessResumeData? = nil) {
    let file = DownloadFile(directory: NSTemporaryDirectory())
    let controls = TransferControls()
    // The resume data's file, when it is still there with its bytes: else the download starts over.
    let continuing = resuming.flatMap { file.existing($0.temporaryFileName, holding: $0.bytesReceived) }
    var sent = request
    if let continuing, let resuming {
      sent.setValue("bytes=\(continuing.bytes)-", forHTTPHeaderField: "Range")
      sent.setValue(resuming.entityTag ?? resuming.serverDownloadDate, forHTTPHeaderField: "If-Range")
    }
    let events = DownloadEvents(
      id: id, method: request.httpMethod ?? "GET", headers: request.allHTTPHeaderFields ?? [:], file: file,
      controls: controls, continuing: continuing, resuming: resuming)
    run = InProcessTransfer(id: id, request: sent, session: session) { [weak session] event, url in
      events.handle(event, url: url, session: session)
    }
    controls.transfer = run.transfer
    self.controls = controls
    super.init(id: id, request: request, backend: nil)
  }

  /// Starts the download (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: the download, once begun, runs to its end here (iOS may pause its reads).
  override func suspend() {}

  /// Stops the download: the task completes with `NSURLErrorCancelled` and its file goes.
  override func cancel() { run.cancel(self) }

  /// Cancels the download, keeping its file in `tmp/`, and hands `completionHandler` the data
  /// `downloadTask(withResumeData:)` continues it from, as iOS does: only for a GET whose server
  /// named the entity (`ETag` or `Last-Modified`), sent it unencoded, and sent some of it;
  /// otherwise nil, and the file goes.
  override func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
    guard state != .completed else {
      completionHandler(nil)
      return
    }
    controls.producesResumeData()
    // The transfer ends, and its completion makes the resume data, before `cancel` returns.
    run.cancel(self)
    let data = controls.madeResumeData
    resumeData.withLock { $0 = data }
    completionHandler(data)
  }
}

/// What a download run in the app does with its transfer's events: makes (or continues) its file
/// at the response, writes the body there, and at the end hands the file, or its resume data, to
/// the session.
private struct DownloadEvents: Sendable {
  /// The task's id.
  let id: Int
  /// The request's method and headers, for the resume data.
  let method: String
  let headers: [String: String]
  /// The file the body goes to.
  let file: DownloadFile
  /// What the events share with the task.
  let controls: TransferControls
  /// The resume data's file still there to continue, when there is one.
  let continuing: DownloadFile.Continuation?
  /// The resume data the download continues, when it does.
  let resuming: InProcessResumeData?

  /// Handles `event` of the transfer of `url`, telling `session` (nil: it is gone).
  func handle(_ event: DataTransfer.Event, url: URL, session: URLSession?) {
    let task = Int64(id)
    switch event {
    case .response(let response):
      let length = response.headers.last { $0.name.lowercased() == "content-length" }.flatMap { Int64($0.value) }
      controls.response = response
      session?.receive(
        .receivedResponse(
          task: task, url: response.url.absoluteString, statusCode: response.statusCode,
          headers: response.headers.map { SessionHeader(name: $0.name, value: $0.value) }))
      // A download asks the delegate nothing about its response: its file is made (or the resume
      // data's continued, when the server sends the rest), and it goes on.
      do throws(ProtFSError) {
        let offset = response.statusCode == 206 ? continuing : nil
        try file.create(expecting: length, continuing: offset, reusing: resuming?.temporaryFileName)
        if resuming != nil { session?.resumes(task: id, at: offset?.bytes ?? 0) }
        controls.transfer?.proceed()
      } catch {
        controls.fail(error)
      }
    case .data(let body):
      do throws(ProtFSError) {
        let (total, expected) = try file.append(body)
        session?.receive(
          .wroteData(
            task: task, bytesWritten: Int64(body.count), totalBytesWritten: total,
            totalBytesExpectedToWrite: expected))
      } catch {
        controls.fail(error)
      }
    case .sent:
      break  // A download's request body goes out whole; only an upload reports it.
    case .completed(let failure):
      let error = controls.failure ?? failure
      let (written, expected) = file.counts
      var snapshot = SessionTaskSnapshot(
        id: task, kind: .download, request: SessionRequest(url: url), state: "completed", bytesReceived: written,
        bytesExpectedToReceive: expected, error: error)
      if error == nil, let location = file.close() {
        session?.receive(.finishedDownloading(task: task, location: location))
      } else if let error,
        let resume = controls.resumeData(
          after: error, method: method, url: url, headers: headers, file: file)
      {
        // The file stays in tmp/ for the task made from the resume data.
        _ = file.close()
        snapshot.resumeData = resume
        controls.resumeDataMade(resume)
      } else {
        file.discard()
      }
      session?.receive(.completed(task: task, snapshot: snapshot, error: error))
    }
  }
}

/// The resume data of a download run in the app is Apple's, as the session service's is
/// (`AppleResumeData`), naming its file in `tmp/`.
typealias InProcessResumeData = AppleResumeData

extension AppleResumeData {
  /// The request it continues (without its `Range`, which the task adds).
  var request: URLRequest {
    var request = URLRequest(url: url)
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) { request.setValue(value, forHTTPHeaderField: name) }
    return request
  }
}

/// What the transfer's events need of the transfer itself, set once it is made, the error that
/// stopped it from here (the file could not be made or written), its response, and the resume data
/// its end made when the app asked for it.
private final class TransferControls: Sendable {
  private struct State {
    var transfer: DataTransfer?
    var failure: ProtFSError?
    var response: DataTransfer.Response?
    var producesResumeData = false
    var resumeData: Data?
  }
  private let state = Mutex(State())

  var transfer: DataTransfer? {
    get { state.withLock { $0.transfer } }
    set { state.withLock { $0.transfer = newValue } }
  }

  var failure: ProtFSError? { state.withLock { $0.failure } }

  var response: DataTransfer.Response? {
    get { state.withLock { $0.response } }
    set { state.withLock { $0.response = newValue } }
  }

  /// Stops the transfer with `error`, which its completion carries.
  func fail(_ error: ProtFSError) {
    let transfer = state.withLock { state -> DataTransfer? in
      if state.failure == nil { state.failure = error }
      return state.transfer
    }
    transfer?.cancel()
  }

  /// The app asked for resume data (`cancel(byProducingResumeData:)`).
  func producesResumeData() { state.withLock { $0.producesResumeData = true } }

  /// The resume data the end made.
  var madeResumeData: Data? { state.withLock { $0.resumeData } }
  func resumeDataMade(_ data: Data) { state.withLock { $0.resumeData = data } }

  /// The resume data of a download that ended with `error` having written `file`'s bytes: after a
  /// cancel that asked for it or a broken connection (not a failure of the app's own file), when
  /// the request was a GET whose answer (200 or 206) named its entity and was not encoded.
  func resumeData(
    after error: ProtFSError, method: String, url: URL, headers: [String: String], file: DownloadFile
  ) -> Data? {
    let (asked, failedHere, response) = state.withLock { ($0.producesResumeData, $0.failure != nil, $0.response) }
    guard (error.code == .cancelled && asked) || (error.code == .network && !failedHere), method == "GET",
      let response, [200, 206].contains(response.statusCode), let name = file.name
    else { return nil }
    func header(_ name: String) -> String? { response.headers.last { $0.name.lowercased() == name }?.value }
    let encoding = header("content-encoding")?.lowercased()
    let (written, _) = file.counts
    guard written > 0, encoding == nil || encoding == "identity",
      header("etag") != nil || header("last-modified") != nil
    else { return nil }
    return InProcessResumeData(
      url: url, bytesReceived: written, temporaryFileName: name, entityTag: header("etag"),
      serverDownloadDate: header("last-modified"), headers: headers
    ).archived
  }
}

/// The file a download writes, in `directory` (the app's `tmp/`): made when the response comes (or
/// the resume data's, continued or started over), written as the body arrives, kept for the app
/// when it is complete (or for its resume data), removed otherwise.
///
/// Written on the transfer's thread, but a cancel ends the transfer (and so closes the file) on the
/// thread that cancels: every step holds the lock, so that no write reaches a descriptor closed
/// (and perhaps reused) meanwhile, and no file is made once the download has ended.
final class DownloadFile: Sendable {
  /// A file of an earlier download to continue: its name in the directory, and the bytes it keeps.
  struct Continuation: Sendable, Equatable {
    var name: String
    var bytes: Int64
  }

  private struct State {
    var fd: Int32 = -1
    var path: String?
    var written: Int64 = 0
    var expected: Int64 = -1
    var ended = false
  }
  private let directory: String
  private let state = Mutex(State())

  init(directory: String) { self.directory = directory.hasSuffix("/") ? String(directory.dropLast()) : directory }

  /// Bytes written and expected.
  var counts: (Int64, Int64) { state.withLock { ($0.written, $0.expected) } }

  /// The file's name in the directory, once it is made.
  var name: String? { state.withLock { $0.path.map { String($0[$0.index(after: $0.lastIndex(of: "/")!)...]) } } }

  /// `name`, when it is a regular file in the directory holding at least `bytes` (of which the first
  /// `bytes` are continued).
  func existing(_ name: String, holding bytes: Int64) -> Continuation? {
    var status = stat()
    guard bytes > 0, case .success = Kernel.lstat(directory + "/" + name, &status),
      status.st_mode & S_IFMT == S_IFREG, Int64(status.st_size) >= bytes
    else { return nil }
    return Continuation(name: name, bytes: bytes)
  }

  /// Makes the file, expecting `length` bytes of body (nil: unknown): a new name (mode 0600), or
  /// `continuing`'s file, cut to its bytes and written after them, or, when the server sent the
  /// whole entity again, `reusing`'s file emptied (a new one when it is gone).
  func create(expecting length: Int64?, continuing: Continuation? = nil, reusing: String? = nil) throws(ProtFSError) {
    let directory = self.directory
    try state.withLock { (state: inout State) throws(ProtFSError) in
      guard !state.ended else { throw Self.ended }
      let offset = continuing?.bytes ?? 0
      if let name = continuing?.name ?? reusing {
        let path = directory + "/" + name
        let flags = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | (continuing == nil ? O_TRUNC : 0)
        switch Kernel.open(path, flags) {
        case .success(let fd):
          state.fd = fd
          state.path = path
          if continuing != nil {
            _ = try Kernel.ftruncate(fd, off_t(offset), as: .write).orThrow(
              "continue the download's file", path: path)
            _ = try Kernel.lseek(fd, off_t(offset), SEEK_SET).orThrow(
              "continue the download's file", path: path)
          }
          state.written = offset
          state.expected = length.map { $0 + offset } ?? -1
          return
        case .failure(let error):
          // Gone since: a continuation cannot go on; a download starting over makes a new file.
          if continuing != nil { throw ProtFSError.system("continue the download's file", path: path, errno: error) }
        }
      }
      var template = Array((directory + "/CFNetworkDownload_XXXXXX.tmp").utf8CString)
      let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, 4) }
      let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      guard fd >= 0 else {
        throw ProtFSError.system("create the download's file", path: path, errno: Errno(errno))
      }
      // No program the app starts inherits it.
      _ = Kernel.fcntl(fd, F_SETFD, FD_CLOEXEC)
      state.fd = fd
      state.path = path
      state.expected = length ?? -1
    }
  }

  /// Appends `bytes`; returns the bytes written so far and those expected.
  func append(_ bytes: Data) throws(ProtFSError) -> (Int64, Int64) {
    let directory = self.directory
    return try state.withLock { (state: inout State) throws(ProtFSError) -> (Int64, Int64) in
      guard !state.ended, state.fd >= 0 else { throw Self.ended }
      try AtomicFile.writeAll(state.fd, bytes, path: state.path ?? directory)
      state.written += Int64(bytes.count)
      return (state.written, state.expected)
    }
  }

  /// Ends the file: closes it and returns its path (nil when it was never made).
  func close() -> String? {
    state.withLock { state in
      state.ended = true
      if state.fd >= 0 { closeDescriptor(state.fd) }
      state.fd = -1
      return state.path
    }
  }

  /// Ends the file and removes it, if there is one.
  func discard() {
    if let path = close() { _ = Kernel.unlink(path) }
  }

  /// The error of a step taken after the download ended.
  private static let ended = ProtFSError(.cancelled, "The download has ended.")
}
