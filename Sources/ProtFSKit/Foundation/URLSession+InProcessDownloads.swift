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

  init(id: Int, request: URLRequest, session: URLSession) {
    let file = DownloadFile(directory: NSTemporaryDirectory())
    let controls = TransferControls()
    let task = Int64(id)
    run = InProcessTransfer(id: id, request: request, session: session) { [weak session] event, url in
      switch event {
      case .response(let response):
        let length = response.headers.last { $0.name.lowercased() == "content-length" }.flatMap { Int64($0.value) }
        session?.receive(
          .receivedResponse(
            task: task, url: response.url.absoluteString, statusCode: response.statusCode,
            headers: response.headers.map { SessionHeader(name: $0.name, value: $0.value) }))
        // A download asks the delegate nothing about its response: its file is made, and it goes on.
        do throws(ProtFSError) {
          try file.create(expecting: length ?? -1)
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
        let snapshot = SessionTaskSnapshot(
          id: task, kind: .download, request: SessionRequest(url: url), state: "completed", bytesReceived: written,
          bytesExpectedToReceive: expected, error: error)
        if error == nil, let location = file.close() {
          session?.receive(.finishedDownloading(task: task, location: location))
        } else {
          file.discard()
        }
        session?.receive(.completed(task: task, snapshot: snapshot, error: error))
      }
    }
    controls.transfer = run.transfer
    super.init(id: id, request: request, backend: nil)
  }

  /// Starts the download (once), when the session's connections to its host allow.
  override func resume() { run.resume(self) }

  /// Nothing: the download, once begun, runs to its end here (iOS may pause its reads).
  override func suspend() {}

  /// Stops the download: the task completes with `NSURLErrorCancelled` and its file goes.
  override func cancel() { run.cancel(self) }

  /// Cancels the download; there is no resume data for it (the handler gets nil), as for any
  /// download that cannot be continued.
  override func cancel(byProducingResumeData completionHandler: @escaping @Sendable (Data?) -> Void) {
    cancel()
    completionHandler(nil)
  }
}

/// What the transfer's events need of the transfer itself, set once it is made, and the error
/// that stopped it from here (the file could not be made or written).
private final class TransferControls: Sendable {
  private let state = Mutex<(transfer: DataTransfer?, failure: ProtFSError?)>((nil, nil))

  var transfer: DataTransfer? {
    get { state.withLock { $0.transfer } }
    set { state.withLock { $0.transfer = newValue } }
  }

  var failure: ProtFSError? { state.withLock { $0.failure } }

  /// Stops the transfer with `error`, which its completion carries.
  func fail(_ error: ProtFSError) {
    let transfer = state.withLock { state -> DataTransfer? in
      if state.failure == nil { state.failure = error }
      return state.transfer
    }
    transfer?.cancel()
  }
}

/// The file a download writes, in `directory` (the app's `tmp/`): made when the response comes,
/// written as the body arrives, kept for the app when it is complete, removed otherwise.
///
/// Written on the transfer's thread, but a cancel ends the transfer (and so closes the file) on the
/// thread that cancels: every step holds the lock, so that no write reaches a descriptor closed
/// (and perhaps reused) meanwhile, and no file is made once the download has ended.
private final class DownloadFile: Sendable {
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

  /// Makes the file (a new name, mode 0600), expecting `length` bytes (-1: unknown).
  func create(expecting length: Int64) throws(ProtFSError) {
    let directory = self.directory
    try state.withLock { (state: inout State) throws(ProtFSError) in
      guard !state.ended else { throw Self.ended }
      var template = Array((directory + "/CFNetworkDownload_XXXXXX.tmp").utf8CString)
      let fd = template.withUnsafeMutableBufferPointer { mkstemps($0.baseAddress!, 4) }
      let path = String(cString: template)
      guard fd >= 0 else {
        throw ProtFSError.system("create the download's file", path: path, errno: Errno(errno))
      }
      // No program the app starts inherits it.
      _ = valueOrErrno(.fcntl) { fcntl(fd, F_SETFD, FD_CLOEXEC) }
      state.fd = fd
      state.path = path
      state.expected = length
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
    if let path = close() { _ = valueOrErrno(.unlink) { unlink(path) } }
  }

  /// The error of a step taken after the download ended.
  private static let ended = ProtFSError(.cancelled, "The download has ended.")
}
