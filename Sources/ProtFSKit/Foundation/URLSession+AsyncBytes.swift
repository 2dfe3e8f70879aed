import Foundation
import Synchronization

extension URLSession {
  /// A response body as bytes while they arrive, as Foundation's `URLSession.AsyncBytes`: what
  /// `bytes(from:)` and `bytes(for:)` return with the response, read with `for try await`; its
  /// `lines` are the body's lines. Cancelling the reading Swift task cancels the data task.
  public struct AsyncBytes: AsyncSequence, Sendable {
    /// A byte of the body.
    public typealias Element = UInt8
    /// The data task that loads the body.
    public let task: URLSessionDataTask
    fileprivate let chunks: AsyncThrowingStream<Data, any Error>

    /// Reads the body a byte at a time (from the pieces as they came).
    public struct AsyncIterator: AsyncIteratorProtocol {
      fileprivate var pieces: AsyncThrowingStream<Data, any Error>.AsyncIterator
      fileprivate var piece = Data()
      fileprivate var index = 0
      fileprivate let task: URLSessionDataTask

      /// The next byte, nil at the end; throws the task's error.
      public mutating func next() async throws -> UInt8? {
        while index >= piece.count {
          let task = self.task
          let nextPiece = try await withTaskCancellationHandler {
            try await pieces.next()
          } onCancel: {
            task.cancel()
          }
          guard let nextPiece else { return nil }
          piece = nextPiece
          index = 0
        }
        defer { index += 1 }
        return piece[piece.startIndex + index]
      }
    }

    /// Reads the body from its first byte.
    public func makeAsyncIterator() -> AsyncIterator {
      AsyncIterator(pieces: chunks.makeAsyncIterator(), task: task)
    }
  }

  /// The body of `url` as bytes while they arrive, once its response came.
  public func bytes(from url: URL, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (
    AsyncBytes, URLResponse
  ) {
    try await bytes(for: URLRequest(url: url), delegate: delegate)
  }

  /// The body of `request` as bytes while they arrive, once its response came (a data task run in
  /// the app). Throws the task's error (`URLError`) when no response came. `delegate` becomes the
  /// task's own, as Apple's.
  public func bytes(for request: URLRequest, delegate: (any URLSessionTaskDelegate)? = nil) async throws -> (
    AsyncBytes, URLResponse
  ) {
    refuseConvenienceTaskInBackground()
    let (chunks, continuation) = AsyncThrowingStream<Data, any Error>.makeStream()
    let sink = ByteStreamSink(continuation)
    let task = dataTask(with: request)
    task.completion.withLock { $0 = .stream(sink) }
    if let delegate { task.delegate = delegate }
    let response = try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { (answer: CheckedContinuation<URLResponse, any Error>) in
        sink.onResponse(answer)
        task.resume()
      }
    } onCancel: {
      task.cancel()
    }
    return (AsyncBytes(task: task, chunks: chunks), response)
  }
}

/// Where a `bytes(for:)` task's events go: its response resumes the caller once, its body's pieces
/// go to the stream, and its end finishes it (or, before a response, fails the caller).
final class ByteStreamSink: Sendable {
  private let continuation: AsyncThrowingStream<Data, any Error>.Continuation
  private let waiting = Mutex<(answer: CheckedContinuation<URLResponse, any Error>?, answered: Bool)>((nil, false))

  init(_ continuation: AsyncThrowingStream<Data, any Error>.Continuation) { self.continuation = continuation }

  func onResponse(_ answer: CheckedContinuation<URLResponse, any Error>) { waiting.withLock { $0.answer = answer } }

  /// The response came: the caller gets it.
  func respond(_ response: URLResponse) {
    let answer = waiting.withLock { waiting -> CheckedContinuation<URLResponse, any Error>? in
      defer { waiting = (nil, true) }
      return waiting.answered ? nil : waiting.answer
    }
    answer?.resume(returning: response)
  }

  func yield(_ piece: Data) { continuation.yield(piece) }

  /// The task ended with `error` (nil: the whole body came).
  func finish(_ error: (any Error)?) {
    let answer = waiting.withLock { waiting -> CheckedContinuation<URLResponse, any Error>? in
      defer { waiting = (nil, true) }
      return waiting.answered ? nil : waiting.answer
    }
    let thrown = error.map { URLSession.urlError($0) }
    if let answer { answer.resume(throwing: thrown ?? URLError(.badServerResponse)) }
    if let thrown { continuation.finish(throwing: thrown) } else { continuation.finish() }
  }
}

extension AsyncSequence where Element == UInt8 {
  /// The bytes' lines (UTF-8), as Foundation's `lines`: split at `\n`, `\r\n` or `\r`, without
  /// the line ends; a last line without an end is a line too.
  public var lines: AsyncLineSequence<Self> { AsyncLineSequence(base: self) }
}

/// The lines of a byte sequence, as Foundation's `AsyncLineSequence`.
public struct AsyncLineSequence<Base: AsyncSequence>: AsyncSequence where Base.Element == UInt8 {
  /// A line, without its end.
  public typealias Element = String
  let base: Base

  /// Reads the lines in order.
  public struct AsyncIterator: AsyncIteratorProtocol {
    var bytes: Base.AsyncIterator
    var pendingCarriageReturn = false
    var finished = false

    /// The next line, nil at the end.
    public mutating func next() async throws -> String? {
      guard !finished else { return nil }
      var line: [UInt8] = []
      while true {
        guard let byte = try await bytes.next() else {
          finished = true
          return line.isEmpty ? nil : String(decoding: line, as: UTF8.self)
        }
        if pendingCarriageReturn {
          pendingCarriageReturn = false
          if byte == 0x0A { continue }
        }
        switch byte {
        case 0x0A: return String(decoding: line, as: UTF8.self)
        case 0x0D:
          pendingCarriageReturn = true
          return String(decoding: line, as: UTF8.self)
        default: line.append(byte)
        }
      }
    }
  }

  /// Reads from the first line.
  public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(bytes: base.makeAsyncIterator()) }
}

extension AsyncLineSequence: Sendable where Base: Sendable {}
