import Foundation
import ProtFSDownloads
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// A standard (not background) session's uploads, run in the app's own process as iOS runs them,
/// against a Python upload server on loopback: from a file opened when the task is made, and from
/// memory; their progress, the server's reply as a data task's, redirects, and Foundation's errors.
@Suite(.timeLimit(.minutes(2))) struct URLSessionUploadTaskTests {
  /// A delegate that records the progress, the reply and the end of an upload.
  final class UploadDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let sent = Mutex<[(Int64, Int64, Int64)]>([])
    let reply = Mutex(Data())
    let responses = Mutex<[Int]>([])
    let error = Mutex<NSError?>(nil)
    let done = DispatchSemaphore(value: 0)
    /// The body `needNewBodyStream` hands over a stream of (none when nil), and how often it was asked.
    let streamed: Data?
    let asked = Mutex(0)

    init(streaming body: Data? = nil) { streamed = body }

    func urlSession(
      _ session: URLSession, task: URLSessionTask, needNewBodyStream completionHandler: @escaping (InputStream?) -> Void
    ) {
      asked.withLock { $0 += 1 }
      completionHandler(streamed.map { InputStream(data: $0) })
    }

    func urlSession(
      _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
      totalBytesExpectedToSend: Int64
    ) {
      sent.withLock { $0.append((bytesSent, totalBytesSent, totalBytesExpectedToSend)) }
    }

    func urlSession(
      _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
      completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
      responses.withLock { $0.append((response as? HTTPURLResponse)?.statusCode ?? 0) }
      completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
      reply.withLock { $0.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      self.error.withLock { $0 = error.map { $0 as NSError } }
      done.signal()
    }

    /// The server's JSON reply.
    var json: [String: Any] {
      (try? JSONSerialization.jsonObject(with: reply.withLock { $0 }) as? [String: Any]) ?? [:]
    }
  }

  /// A standard session with `delegate`, over a fake service that records whether it was asked.
  func session(_ delegate: UploadDelegate?, _ backend: FakeSessionBackend) -> URLSession {
    URLSession(configuration: .default, delegate: delegate, delegateQueue: nil, backend: backend)
  }

  /// A file of `count` bytes in a new temporary directory, and that directory.
  func file(_ count: Int) throws -> (URL, Data) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-upload-\(UUID())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let bytes = Data(DownloadFixture.bytes(count))
    let file = directory.appendingPathComponent("report.bin")
    try bytes.write(to: file)
    return (file, bytes)
  }

  /// The SHA-256 of `data`, in hex, as the server reports it.
  func sha256(_ data: Data) -> String {
    let digest = SHA256Digest()
    data.withUnsafeBytes { digest.update($0.baseAddress!, count: $0.count) }
    return digest.finalizeHex()
  }

  /// An upload from a file runs here, never in the session service: the app opens the file when it
  /// makes the task (so its name may go at once), `didSendBodyData` counts up to the file's size,
  /// the reply arrives as a data task's, and the task ends with the server's status.
  @Test func aFileUploadRunsInTheAppFromTheFileOpenedWhenTheTaskIsMade() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let (source, bytes) = try file(300_000)
    defer { try? FileManager.default.removeItem(at: source.deletingLastPathComponent()) }
    let backend = FakeSessionBackend(identifier: "fake.upload.file.\(UUID())")
    let delegate = UploadDelegate()
    var request = URLRequest(url: server.url("report"))
    request.httpMethod = "PUT"
    let task = session(delegate, backend).uploadTask(with: request, fromFile: source)
    #expect(task.countOfBytesExpectedToSend == 300_000)
    try FileManager.default.removeItem(at: source)
    task.resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    #expect(delegate.error.withLock { $0 } == nil)
    #expect(delegate.responses.withLock { $0 } == [201])
    #expect(delegate.json["received"] as? Int == 300_000 && delegate.json["method"] as? String == "PUT")
    #expect(delegate.json["sha256"] as? String == sha256(bytes))
    let sent = delegate.sent.withLock { $0 }
    #expect(sent.last?.1 == 300_000 && sent.allSatisfy { $0.2 == 300_000 })
    #expect(sent.map(\.0).reduce(0, +) == 300_000)
    #expect(task.countOfBytesSent == 300_000 && (task.response as? HTTPURLResponse)?.statusCode == 201)
    #expect(backend.store.withLock { $0.calls }.isEmpty, "the session service was asked")
  }

  /// An upload from memory (POST and PATCH) sends the bytes as they are, leaves no file behind in
  /// the app's temporary directory, and hands the reply to a completion handler.
  @Test func anUploadFromDataSendsItFromMemory() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let before = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())
      .filter { $0.hasPrefix("protfskit-upload-") }
    let body = Data(DownloadFixture.bytes(70_000))
    for method in ["POST", "PATCH"] {
      var request = URLRequest(url: server.url("items"))
      request.httpMethod = method
      let result = Mutex<(Data?, Int, NSError?)>((nil, 0, nil))
      let done = DispatchSemaphore(value: 0)
      let task = session(nil, FakeSessionBackend(identifier: "fake.upload.data.\(UUID())"))
        .uploadTask(with: request, from: body) { data, response, error in
          result.withLock { $0 = (data, (response as? HTTPURLResponse)?.statusCode ?? 0, error.map { $0 as NSError }) }
          done.signal()
        }
      task.resume()
      #expect(await offPool { done.wait(timeout: .now() + 20) } == .success)
      let (data, status, error) = result.withLock { $0 }
      #expect(error == nil && status == 200, "\(method): \(String(describing: error))")
      let reply = try #require(try JSONSerialization.jsonObject(with: data ?? Data()) as? [String: Any])
      #expect(reply["received"] as? Int == 70_000 && reply["method"] as? String == method, "\(reply)")
      #expect(reply["sha256"] as? String == sha256(body))
    }
    let after = try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())
      .filter { $0.hasPrefix("protfskit-upload-") }
    #expect(Set(after) == Set(before))
  }

  /// A 307 sends the method and the whole body again to where it points, from the file's start.
  @Test func aTemporaryRedirectSendsTheWholeFileAgain() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let (source, bytes) = try file(200_000)
    defer { try? FileManager.default.removeItem(at: source.deletingLastPathComponent()) }
    let delegate = UploadDelegate()
    var request = URLRequest(url: server.url("redirect/307/moved"))
    request.httpMethod = "PUT"
    session(delegate, FakeSessionBackend(identifier: "fake.upload.redirect.\(UUID())"))
      .uploadTask(with: request, fromFile: source).resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    #expect(delegate.error.withLock { $0 } == nil)
    #expect(delegate.json["received"] as? Int == 200_000 && delegate.json["sha256"] as? String == sha256(bytes))
    #expect(server.requests.map(\.path) == ["/redirect/307/moved", "/moved"])
    #expect(server.requests.last?.method == "PUT")
  }

  /// A streamed upload in a standard session runs in the app: its body comes from the delegate's
  /// `needNewBodyStream`, sent chunked (the length unknown, so progress expects
  /// `NSURLSessionTransferSizeUnknown`), asked again when a 307 sends it once more.
  @Test func aStreamedUploadReadsTheDelegatesStream() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let body = Data(DownloadFixture.bytes(150_000))
    let delegate = UploadDelegate(streaming: body)
    var request = URLRequest(url: server.url("redirect/307/streamed"))
    request.httpMethod = "PUT"
    let task = session(delegate, FakeSessionBackend(identifier: "fake.upload.stream.\(UUID())"))
      .uploadTask(withStreamedRequest: request)
    #expect(task.countOfBytesExpectedToSend == NSURLSessionTransferSizeUnknown)
    task.resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    #expect(delegate.error.withLock { $0 } == nil, "\(String(describing: delegate.error.withLock { $0 }))")
    #expect(delegate.json["received"] as? Int == 150_000 && delegate.json["sha256"] as? String == sha256(body))
    #expect(delegate.asked.withLock { $0 } == 2)
    #expect(server.requests.last?.headers["transfer-encoding"] == "chunked")
    #expect(delegate.sent.withLock { $0 }.allSatisfy { $0.2 == NSURLSessionTransferSizeUnknown })

    // Without a stream the task fails, naming why; a data task's own httpBodyStream is its body.
    let none = UploadDelegate()
    var post = URLRequest(url: server.url("items"))
    post.httpMethod = "POST"
    session(none, FakeSessionBackend(identifier: "fake.upload.nostream.\(UUID())"))
      .uploadTask(withStreamedRequest: post).resume()
    #expect(await offPool { none.done.wait(timeout: .now() + 20) } == .success)
    #expect(none.error.withLock { $0 }?.localizedDescription.contains("needNewBodyStream") == true)
    post.httpBodyStream = InputStream(data: Data("streamed body".utf8))
    let (data, _) = try await session(nil, FakeSessionBackend(identifier: "fake.data.stream.\(UUID())"))
      .data(for: post)
    let reply = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    #expect(reply["received"] as? Int == 13 && reply["method"] as? String == "POST", "\(reply)")
  }

  /// A file that is not there fails the task when it runs with `NSURLErrorFileDoesNotExist`, naming
  /// the file (one the app may not read: SwiftAppTests), and so does anything but a regular file.
  @Test func aFileThatCannotBeOpenedFailsTheTaskWithFoundationsCode() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let delegate = UploadDelegate()
    var request = URLRequest(url: server.url("report"))
    request.httpMethod = "PUT"
    let missing = URL(fileURLWithPath: "/nonexistent-\(UUID())/report.bin")
    session(delegate, FakeSessionBackend(identifier: "fake.upload.missing.\(UUID())"))
      .uploadTask(with: request, fromFile: missing).resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    let error = delegate.error.withLock { $0 }
    #expect(error?.domain == NSURLErrorDomain && error?.code == NSURLErrorFileDoesNotExist)
    #expect(error?.localizedDescription.contains(missing.path) == true, "\(String(describing: error))")
    // A FIFO nobody writes to is refused when the task is made, not waited for.
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-upload-\(UUID())")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let fifo = directory.appendingPathComponent("pipe").path
    #expect(mkfifo(fifo, 0o644) == 0)
    let refused = UploadDelegate()
    session(refused, FakeSessionBackend(identifier: "fake.upload.fifo.\(UUID())"))
      .uploadTask(with: request, fromFile: URL(fileURLWithPath: fifo)).resume()
    #expect(await offPool { refused.done.wait(timeout: .now() + 20) } == .success)
    #expect(refused.error.withLock { $0 }?.localizedDescription.contains("not a regular file") == true)
    #expect(server.requests.isEmpty)
  }
}
