import Foundation
import Synchronization

/// A small HTTP/1.1 server on 127.0.0.1 that serves one entity and misbehaves on request, for the
/// download engine's failure paths. Each connection runs on its own thread; keep-alive is honoured.
public final class FaultServer: Sendable {
  /// How the server misbehaves.
  public enum Mode: Sendable, Equatable {
    /// Serves the entity, honouring `Range` and `If-Range`.
    case normal
    /// The first `times` responses announce the whole length, send `after` bytes and close.
    case dropMidBody(after: Int, times: Int)
    /// Every response announces `extra` more bytes than it sends, then closes.
    case wrongContentLength(extra: Int)
    /// Sends the whole entity with 200 whatever the `Range`.
    case ignoreRange
    /// Every response carries a new ETag, so `If-Range` never matches.
    case changeETagEveryRequest
    /// The first `count` requests get `status`, then it serves normally.
    case failFirst(count: Int, status: Int)
    /// Every request gets `status`.
    case alwaysStatus(Int)
    /// Sends the body `chunk` bytes at a time with `interval` between chunks.
    case slowDrip(chunk: Int, interval: Duration)
    /// Accepts the connection, reads the request and never answers.
    case neverAnswer
    /// Sends the headers and `bytes` bytes of the body, then nothing more until the client leaves.
    case stallAfter(bytes: Int)
    /// Sends the first `bytes` bytes, then holds the rest until `openGate()` is called.
    case gateAfter(bytes: Int)
    /// Sends `first` bytes, waits for `openGate()`, sends `then` more, and then nothing more until
    /// the client leaves.
    case gateThenStall(first: Int, then: Int)
    /// Announces a Content-Length of `length`, sends `bytes` bytes of the body, then nothing more
    /// until the client leaves.
    case announceThenStall(length: Int, bytes: Int)
    /// Answers a `Range` request with 206 and a Content-Length of `length` but no Content-Range,
    /// sends `bytes` bytes and closes.
    case partialWithoutRange(length: Int, bytes: Int)
    /// Every request gets a 302 to `location`.
    case redirect(to: String)
    /// Every response carries a header line of `bytes` bytes before its body.
    case hugeHeader(bytes: Int)
    /// Sends the whole entity without a Content-Length (`Connection: close`): its end is the
    /// connection's.
    case unknownLength
  }

  /// A request the server received.
  public struct Request: Sendable {
    /// The method (GET, HEAD).
    public var method: String
    /// The request target.
    public var path: String
    /// Headers, keys lowercased.
    public var headers: [String: String]
    /// When its request line had been read.
    public var receivedAt = Date()
  }

  private struct State {
    var body: [UInt8]
    var entityTag: String
    var mode: Mode
    var contentDisposition: String?
    var requests: [Request] = []
    var connections: Set<Int32> = []
    var stopped = false
    /// Set, under the lock, when the accept loop has closed the listener: its number may belong
    /// to another socket from then on, so nothing may shut it down.
    var listenerClosed = false
  }

  private let state: Mutex<State>
  private let listener: Int32
  /// The port it listens on.
  public let port: UInt16

  /// The URL of `path` on this server.
  public func url(_ path: String = "file.bin") -> URL { URL(string: "http://127.0.0.1:\(port)/\(path)")! }

  /// Starts serving `body` with ETag `entityTag`.
  public init(
    body: [UInt8], entityTag: String = "\"v1\"", mode: Mode = .normal, contentDisposition: String? = nil
  ) throws {
    state = Mutex(State(body: body, entityTag: entityTag, mode: mode, contentDisposition: contentDisposition))
    listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard listener >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    var one: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = LoopbackSocket.loopback(port: 0)
    let fd = listener
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard bound == 0, listen(listener, 64) == 0 else {
      close(listener)
      throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
    port = try LoopbackSocket.port(of: listener)
    let thread = Thread { [self] in acceptLoop() }
    thread.start()
  }

  deinit { stop() }

  /// Replaces the entity (a new version of the file on the server).
  public func setContent(_ body: [UInt8], entityTag: String) {
    state.withLock { s in
      s.body = body
      s.entityTag = entityTag
    }
  }

  private let gate = NSCondition()
  nonisolated(unsafe) private var gateIsOpen = false

  /// Lets every response held by `.gateAfter` send the rest of its body.
  public func openGate() {
    gate.lock()
    gateIsOpen = true
    gate.broadcast()
    gate.unlock()
  }

  /// Reads and drops whatever the client sends until it closes the connection or the server stops.
  private func holdUntilClientLeaves(_ fd: Int32) {
    var sink = [UInt8](repeating: 0, count: 1024)
    while !isStopped && recv(fd, &sink, sink.count, 0) > 0 {}
  }

  /// Blocks until `openGate()` or `stop()`; the timed wait only notices a stop.
  private func waitForGate() {
    gate.lock()
    while !gateIsOpen && !isStopped { _ = gate.wait(until: Date().addingTimeInterval(0.05)) }
    gate.unlock()
  }

  /// Changes how the server behaves from the next request on.
  public func setMode(_ mode: Mode) { state.withLock { $0.mode = mode } }

  /// The requests received so far.
  public var requests: [Request] { state.withLock { $0.requests } }

  /// Stops listening and closes every connection.
  ///
  /// Everything happens under the lock, and only once: a descriptor shut down after its owner
  /// closed it could be another test's socket by then (the second call of `stop()`, from `deinit`,
  /// once shut down a later server's listener, whose clients then found nothing listening).
  public func stop() {
    state.withLock { s in
      guard !s.stopped else { return }
      s.stopped = true
      if !s.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
      // A connection leaves the set before its thread closes it, so these are all still open.
      for fd in s.connections { shutdown(fd, Int32(SHUT_RDWR)) }
    }
  }

  private var isStopped: Bool { state.withLock { $0.stopped } }

  private func acceptLoop() {
    while true {
      let fd = accept(listener, nil, nil)
      if fd < 0 {
        let code = errno
        if isStopped { break }
        // A client that gave up before its connection was accepted (ECONNABORTED) must not end
        // the server: later clients would find nothing listening. Running short of descriptors
        // or memory passes; anything else means the listener is gone.
        if code == EINTR || code == ECONNABORTED || code == EPROTO { continue }
        if code == EMFILE || code == ENFILE || code == ENOBUFS || code == ENOMEM {
          usleep(10_000)
          continue
        }
        break
      }
      let accepted = state.withLock { s -> Bool in
        guard !s.stopped else { return false }
        s.connections.insert(fd)
        return true
      }
      guard accepted else {
        close(fd)
        break
      }
      let thread = Thread { [self] in
        serve(fd)
        state.withLock { _ = $0.connections.remove(fd) }
        close(fd)
      }
      thread.start()
    }
    state.withLock { s in
      s.listenerClosed = true
      close(listener)
    }
  }

  // MARK: One connection

  private func serve(_ fd: Int32) {
    var buffer: [UInt8] = []
    while let request = readRequest(fd, &buffer) {
      guard respond(to: request, on: fd) else { return }
    }
  }

  private func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> Request? {
    let terminator: [UInt8] = [13, 10, 13, 10]
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      if let end = buffer.firstRange(of: terminator) {
        let head = String(decoding: buffer[..<end.lowerBound], as: UTF8.self)
        buffer.removeSubrange(..<end.upperBound)
        var lines = head.components(separatedBy: "\r\n")
        let requestLine = lines.removeFirst().split(separator: " ")
        guard requestLine.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
          guard let colon = line.firstIndex(of: ":") else { continue }
          headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Request(method: String(requestLine[0]), path: String(requestLine[1]), headers: headers)
      }
      let n = recv(fd, &chunk, chunk.count, 0)
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return nil }
      buffer.append(contentsOf: chunk[..<n])
    }
  }

  private func send(_ fd: Int32, _ bytes: ArraySlice<UInt8>) -> Bool {
    var offset = bytes.startIndex
    while offset < bytes.endIndex {
      let n = bytes[offset...].withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else { return false }
      offset += n
    }
    return true
  }

  private func send(_ fd: Int32, _ text: String) -> Bool { send(fd, Array(text.utf8)[...]) }

  /// Answers one request; returns whether the connection stays open.
  private func respond(to request: Request, on fd: Int32) -> Bool {
    let (index, body, storedTag, mode, disposition) = state.withLock { s in
      s.requests.append(request)
      return (s.requests.count, s.body, s.entityTag, s.mode, s.contentDisposition)
    }
    let entityTag = mode == .changeETagEveryRequest ? "\"r\(index)\"" : storedTag
    switch mode {
    case .neverAnswer:
      holdUntilClientLeaves(fd)
      return false
    case .alwaysStatus(let status):
      return sendStatus(fd, status)
    case .failFirst(let count, let status) where index <= count:
      return sendStatus(fd, status)
    case .partialWithoutRange(let length, let bytes) where request.headers["range"] != nil:
      guard send(fd, "HTTP/1.1 206 Partial Content\r\nContent-Length: \(length)\r\nETag: \(entityTag)\r\n\r\n")
      else { return false }
      _ = send(fd, body.prefix(bytes))
      return false
    case .redirect(let location):
      return send(fd, "HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Length: 0\r\n\r\n")
    case .unknownLength:
      guard send(fd, "HTTP/1.1 200 OK\r\nETag: \(entityTag)\r\nConnection: close\r\n\r\n") else { return false }
      if request.method != "HEAD" { _ = send(fd, body[...]) }
      return false
    default:
      break
    }

    var status = 200
    var slice = body[...]
    var extraHeaders = ""
    if mode != .ignoreRange, let range = request.headers["range"], range.hasPrefix("bytes="),
      let first = Int(range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false).first ?? "")
    {
      let ifRange = request.headers["if-range"]
      if ifRange == nil || ifRange == entityTag {
        if first >= body.count {
          return sendHeaders(
            fd, status: 416, length: 0, tag: entityTag, extra: "Content-Range: bytes */\(body.count)\r\n")
        }
        status = 206
        slice = body[first...]
        extraHeaders += "Content-Range: bytes \(first)-\(body.count - 1)/\(body.count)\r\n"
      }
    }
    if let disposition { extraHeaders += "Content-Disposition: \(disposition)\r\n" }
    if case .hugeHeader(let bytes) = mode {
      extraHeaders += "X-Padding: " + String(repeating: "a", count: bytes) + "\r\n"
    }
    var length = slice.count
    if case .wrongContentLength(let extra) = mode { length += extra }
    if case .announceThenStall(let announced, _) = mode { length = announced }
    guard sendHeaders(fd, status: status, length: length, tag: entityTag, extra: extraHeaders) else { return false }
    if request.method == "HEAD" { return true }
    switch mode {
    case .dropMidBody(let after, let times) where index <= times:
      _ = send(fd, slice.prefix(after))
      return false
    case .wrongContentLength:
      _ = send(fd, slice)
      return false
    case .stallAfter(let bytes), .announceThenStall(_, let bytes):
      _ = send(fd, slice.prefix(bytes))
      holdUntilClientLeaves(fd)
      return false
    case .gateAfter(let bytes):
      guard send(fd, slice.prefix(bytes)) else { return false }
      waitForGate()
      return !isStopped && send(fd, slice.dropFirst(bytes))
    case .gateThenStall(let first, let then):
      guard send(fd, slice.prefix(first)) else { return false }
      waitForGate()
      guard !isStopped, send(fd, slice.dropFirst(first).prefix(then)) else { return false }
      holdUntilClientLeaves(fd)
      return false
    case .slowDrip(let chunk, let interval):
      var rest = slice
      while !rest.isEmpty {
        guard !isStopped, send(fd, rest.prefix(chunk)) else { return false }
        rest = rest.dropFirst(chunk)
        // Dripping is the point of this mode, not synchronisation.
        Thread.sleep(
          forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
      }
      return true
    default:
      return send(fd, slice)
    }
  }

  private func sendHeaders(_ fd: Int32, status: Int, length: Int, tag: String, extra: String) -> Bool {
    let reason = [200: "OK", 206: "Partial Content", 416: "Range Not Satisfiable"][status] ?? "Status"
    return send(
      fd,
      "HTTP/1.1 \(status) \(reason)\r\nContent-Length: \(length)\r\nETag: \(tag)\r\n"
        + "Last-Modified: Mon, 02 Nov 2026 10:00:00 GMT\r\nAccept-Ranges: bytes\r\n\(extra)\r\n")
  }

  private func sendStatus(_ fd: Int32, _ status: Int) -> Bool {
    let text = "error \(status)\n"
    return send(
      fd, "HTTP/1.1 \(status) Error\r\nContent-Length: \(text.utf8.count)\r\nContent-Type: text/plain\r\n\r\n\(text)")
  }
}
