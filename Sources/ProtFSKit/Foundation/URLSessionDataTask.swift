import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// A task whose response body is delivered to the app (`dataTask(_:didReceive:)`).
///
/// `@unchecked Sendable`: adds nothing to `URLSessionTask`.
open class URLSessionDataTask: URLSessionTask, @unchecked Sendable {}

/// A data task (`dataTask(with:)`), run in the app's own process as iOS runs a standard session's:
/// its request by `DataTransfer`, its answer in memory, so the lock never stops it. Its events take
/// the session's way to the delegate, with ids of their own (below zero, as the service's are not).
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessDataTask: URLSessionDataTask, RunsInProcess, AnswersItsResponse, @unchecked Sendable {
  /// The transfer, made with the task.
  let run: InProcessTransfer

  /// Where the body goes once the delegate answered the response with `.becomeDownload`.
  let becameDownload = BecameDownload()

  init(id: Int, request: URLRequest, session: URLSession, upload: UploadBody? = nil) {
    let becameDownload = self.becameDownload
    run = InProcessTransfer(id: id, request: request, session: session, upload: upload) {
      [weak session] event, url in
      if let download = becameDownload.target {
        becameDownload.carry(event, to: download, url: url, session: session)
      } else {
        session?.receive(Self.event(event, task: Int64(id), url: url))
      }
    }
    super.init(id: id, request: request, backend: nil)
  }

  /// The session's event for the transfer's `event` (an upload's too).
  static func event(
    _ event: DataTransfer.Event, task: Int64, url: URL, kind: SessionTaskSnapshot.Kind = .data
  ) -> SessionEvent {
    switch event {
    case .response(let response):
      return .receivedResponse(
        task: task, url: response.url.absoluteString, statusCode: response.statusCode,
        headers: response.headers.map { SessionHeader(name: $0.name, value: $0.value) })
    case .data(let body):
      return .receivedData(task: task, statusCode: 0, body: body)
    case .sent(let bytes, let total, let expected):
      return .sentBodyData(task: task, bytesSent: bytes, totalBytesSent: total, totalBytesExpectedToSend: expected)
    case .completed(let failure):
      return .completed(
        task: task,
        snapshot: SessionTaskSnapshot(
          id: task, kind: kind, request: SessionRequest(url: url), state: "completed", error: failure),
        error: failure)
    }
  }

  /// Starts the request (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: a data task's request, once begun, runs to its end here (iOS may pause its reads).
  override func suspend() {}

  /// Stops the request: the task completes with `NSURLErrorCancelled`.
  override func cancel() { run.cancel(self) }
}

/// A task sending a file (a data task, as on iOS: the server's reply arrives as data).
///
/// `@unchecked Sendable`: adds nothing to `URLSessionDataTask`.
open class URLSessionUploadTask: URLSessionDataTask, @unchecked Sendable {}

/// A standard (not background) session's upload, run in the app's own process as iOS runs one:
/// its body is the app's bytes or a file the app opens when it makes the task (so the file's
/// class decides then, and the app may remove its name afterwards), read as it is sent, with
/// `didSendBodyData` as it goes; the server's reply comes as a data task's. It lives and dies
/// with the app, as a data task does.
///
/// `@unchecked Sendable`: adds only `run`, immutable and Sendable.
final class InProcessUploadTask: URLSessionUploadTask, RunsInProcess, AnswersItsResponse, @unchecked Sendable {
  /// The transfer, made with the task.
  let run: InProcessTransfer

  init(id: Int, request: URLRequest, body: UploadBody, session: URLSession) {
    run = InProcessTransfer(id: id, request: request, session: session, upload: body) { [weak session] event, url in
      session?.receive(InProcessDataTask.event(event, task: Int64(id), url: url, kind: .upload))
    }
    super.init(id: id, request: request, backend: nil)
    switch body {
    case .data(let data): change { $0.expectedToSend = Int64(data.count) }
    case .file(_, let size, _): change { $0.expectedToSend = size }
    case .stream: change { $0.expectedToSend = NSURLSessionTransferSizeUnknown }
    case .failed: break
    }
    refreshProgress()
  }

  /// The body of an upload from the file at `path`, opened now by the app itself (without
  /// blocking: a FIFO with no writer is refused, not waited for).
  static func body(fromFile path: String) -> UploadBody {
    let fd: Int32
    switch Kernel.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) {
    case .success(let opened): fd = opened
    case .failure(let error): return .failed(ProtFSError.system("open the file to upload", path: path, errno: error))
    }
    let file = FileDescriptor(owning: fd)
    var status = stat()
    guard case .success = Kernel.fstat(fd, &status), status.st_mode & S_IFMT == S_IFREG else {
      return .failed(ProtFSError(.invalidArgument, "'\(path)' is not a regular file to upload.", path: path))
    }
    return .file(file, size: Int64(status.st_size), path: path)
  }

  /// Starts the upload (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: an upload, once begun, runs to its end here.
  override func suspend() {}

  /// Stops the upload: the task completes with `NSURLErrorCancelled`.
  override func cancel() { run.cancel(self) }
}
