import CCurl
import Foundation
import ProtFSSystem

/// An upload's body as the app hands it over: bytes, or a file already open (read as it is sent,
/// so the app may remove its name meanwhile), or why the file could not be opened.
package enum UploadBody: Sendable {
  case data(Data)
  case file(FileDescriptor, size: Int64, path: String)
  /// A stream of unknown length (sent chunked), asked of `provider` when the body is first sent
  /// and again whenever it must be sent from its start (a 307 or 308, a credential).
  case stream(provider: BodyStreamProvider)
  case failed(ProtFSError)
}

/// Hands over a body stream (nil: there is none) through `answer`, once, from any thread.
package typealias BodyStreamProvider = @Sendable (_ answer: @escaping @Sendable (BodyStream?) -> Void) -> Void

/// An upload's body as a stream the app hands over (Foundation's `InputStream`), read on the
/// transfer's thread alone.
///
/// `@unchecked Sendable`: the stream is handed over once and then only touched by the transfer.
package final class BodyStream: @unchecked Sendable {
  let stream: InputStream
  /// Wraps `stream`.
  package init(_ stream: InputStream) { self.stream = stream }
}

/// The body of an upload as libcurl reads it, on the transfer's thread only: what was sent so far
/// and what stopped the reading.
///
/// `@unchecked Sendable`: made with its transfer and then read and written on the transfer's
/// thread alone (libcurl's read and seek callbacks run on it).
final class UploadSource: @unchecked Sendable {
  let body: UploadBody
  /// The body's length, -1 for a stream's.
  let size: Int64
  var offset: Int64 = 0
  var readFailure: ProtFSError?
  /// The stream being read, and how to wait for the provider's next one (set by the transfer).
  private var stream: InputStream?
  var waitForStream: ((BodyStreamProvider) -> BodyStream?)?

  init(_ body: UploadBody) {
    self.body = body
    switch body {
    case .data(let data): size = Int64(data.count)
    case .file(_, let size, _): self.size = size
    case .stream: size = -1
    case .failed: size = 0
    }
  }

  /// Closes the file or the stream (on the transfer's thread, once it reads no more).
  func close() {
    if case .file(let file, _, _) = body { _ = file.close() }
    stream?.close()
    stream = nil
  }

  /// Sends the body again from its start: a stream is asked for anew.
  func rewind() {
    offset = 0
    stream?.close()
    stream = nil
  }

  /// The next bytes of a stream into `buffer`: 0 at its end, libcurl's abort when there is no
  /// stream or it fails.
  private func readStream(_ provider: BodyStreamProvider, into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    if stream == nil {
      guard let given = waitForStream?(provider)?.stream else {
        readFailure = ProtFSError(
          .invalidArgument, "The upload's body stream was not given: the delegate's needNewBodyStream handed over none."
        )
        return Int(CURL_READFUNC_ABORT)
      }
      if given.streamStatus == .notOpen { given.open() }
      stream = given
    }
    guard let stream else { return Int(CURL_READFUNC_ABORT) }
    let count = stream.read(buffer.assumingMemoryBound(to: UInt8.self), maxLength: capacity)
    guard count >= 0 else {
      readFailure = ProtFSError(
        .io, "The upload's body stream failed: \(stream.streamError.map { "\($0)" } ?? "a read error").")
      return Int(CURL_READFUNC_ABORT)
    }
    offset += Int64(count)
    return count
  }

  /// Why the upload cannot begin, if it cannot.
  var failure: ProtFSError? {
    if case .failed(let error) = body { return error }
    return nil
  }

  /// Fills `buffer` with the next bytes; 0 at the end, or libcurl's abort when the file fails.
  func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    if case .stream(let provider) = body { return readStream(provider, into: buffer, capacity: capacity) }
    let wanted = min(capacity, Int(max(0, size - offset)))
    guard wanted > 0 else { return 0 }
    switch body {
    case .data(let data):
      let start = Int(offset)
      data.withUnsafeBytes { raw in buffer.copyMemory(from: raw.baseAddress! + start, byteCount: wanted) }
      offset += Int64(wanted)
      return wanted
    case .file(let file, _, let path):
      switch Kernel.pread(file.rawValue, buffer, wanted, off_t(offset)) {
      case .success(let count):
        offset += Int64(count)
        return count
      case .failure(let error):
        readFailure = ProtFSError.system("read the file to upload", path: path, errno: error)
        return Int(CURL_READFUNC_ABORT)
      }
    case .stream, .failed:
      return Int(CURL_READFUNC_ABORT)
    }
  }
}

let uploadSourceReadCallback: curl_write_callback = { buffer, size, count, context in
  guard let context, let buffer else { return Int(CURL_READFUNC_ABORT) }
  let transfer = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue()
  guard !transfer.isCancelled, let upload = transfer.uploadSource else { return Int(CURL_READFUNC_ABORT) }
  let count = upload.read(into: buffer, capacity: size * count)
  if count > 0, count != Int(CURL_READFUNC_ABORT) {
    transfer.report(.sent(bytes: Int64(count), total: upload.offset, expected: upload.size))
  }
  return count
}

/// libcurl rewinds the body to send it again after a 307 or 308 (to byte 0).
let uploadSourceSeekCallback: curl_seek_callback = { context, offset, origin in
  guard let context, origin == SEEK_SET, offset >= 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
  guard let upload = Unmanaged<DataTransfer>.fromOpaque(context).takeUnretainedValue().uploadSource else {
    return Int32(CURL_SEEKFUNC_FAIL)
  }
  // A stream goes again from its start only (a new one); other bodies from anywhere in them.
  if upload.size < 0 {
    guard offset == 0 else { return Int32(CURL_SEEKFUNC_CANTSEEK) }
    upload.rewind()
    return Int32(CURL_SEEKFUNC_OK)
  }
  guard Int64(offset) <= upload.size else { return Int32(CURL_SEEKFUNC_FAIL) }
  upload.offset = Int64(offset)
  return Int32(CURL_SEEKFUNC_OK)
}
