import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Redirects an upload follows as a background URLSession does (docs/semantics.md §5).
@Suite(.timeLimit(.minutes(1))) struct UploadRedirectTests {
  let bytes = DownloadFixture.bytes(300_000)

  /// Uploads `bytes` with `method` to `path` on a fresh server and device; returns the task and
  /// the requests the server saw.
  func upload(_ path: String, method: UploadMethod) async throws -> (DownloadTask, [UploadServer.Request]) {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let (session, source) = try UploadTests().setUp(t, bytes: bytes)
    defer { session.invalidate() }
    let task = try session.uploadTask(
      with: UploadRequest(url: server.url(path), method: method, headers: [UploadHeader(name: "X-Id", value: "9")]),
      fromFile: source)
    task.resume()
    _ = await task.waitUntilSettled()
    #expect(UploadTests().snapshots(t).isEmpty)
    return (task, server.requests)
  }

  @Test func a307SendsTheMethodAndTheWholeBodyAgain() async throws {
    let (task, requests) = try await upload("redirect/307/moved", method: .put)
    #expect(task.state == .completed, "\(String(describing: task.error))")
    #expect(task.responseStatus == 201)
    #expect(requests.map(\.method) == ["PUT", "PUT"])
    #expect(requests.map(\.path) == ["/redirect/307/moved", "/moved"])
    #expect(requests.map(\.received) == [bytes.count, bytes.count])
    #expect(requests.last?.headers["x-id"] == "9")
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.sha256 == UploadTests.hex(bytes) && reply.method == "PUT")
  }

  @Test func a308KeepsAPostAPost() async throws {
    let (task, requests) = try await upload("redirect/308/moved", method: .post)
    #expect(task.state == .completed)
    #expect(requests.map(\.method) == ["POST", "POST"])
    #expect(requests.last?.received == bytes.count)
  }

  @Test func a303TurnsTheUploadIntoAGetWithoutABody() async throws {
    let (task, requests) = try await upload("redirect/303/result", method: .post)
    #expect(task.state == .completed, "\(String(describing: task.error))")
    #expect(task.responseStatus == 200)
    #expect(requests.map(\.method) == ["POST", "GET"])
    #expect(requests.map(\.received) == [bytes.count, 0])
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.method == "GET")
  }

  @Test func a303TurnsAPutIntoAGetToo() async throws {
    let (task, requests) = try await upload("redirect/303/result", method: .put)
    #expect(task.state == .completed)
    #expect(requests.map(\.method) == ["PUT", "GET"])
    #expect(requests.map(\.received) == [bytes.count, 0])
  }

  @Test func a302TurnsAPostIntoAGet() async throws {
    let (task, requests) = try await upload("redirect/302/result", method: .post)
    #expect(task.state == .completed)
    #expect(requests.map(\.method) == ["POST", "GET"])
  }

  @Test func a301KeepsAPutAndItsBody() async throws {
    let (task, requests) = try await upload("redirect/301/moved", method: .put)
    #expect(task.state == .completed)
    #expect(requests.map(\.method) == ["PUT", "PUT"])
    #expect(requests.map(\.received) == [bytes.count, bytes.count])
  }

  @Test func aLargeFileIsSentAgainAfterA307WhileItsSnapshotIsStillBeingCopied() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let large = UploadSnapshotTests.large(0x66)
    let (session, source) = try UploadTests().setUp(t, bytes: large)
    defer { session.invalidate() }
    let task = try session.uploadTask(with: UploadRequest(url: server.url("redirect/307/big")), fromFile: source)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == large.count && reply.sha256 == UploadTests.hex(large))
    #expect(server.requests.map(\.path) == ["/redirect/307/big", "/big"])
  }

  @Test func aRedirectLoopFailsWithAClearError() async throws {
    let (task, requests) = try await upload("loop", method: .put)
    #expect(task.state == .failed)
    let message = task.error?.message ?? ""
    #expect(message.contains("redirect loop") && message.contains("more than 20 times"), "\(message)")
    #expect(task.error?.code == .network)
    // The first request and 20 redirects, then no retry.
    #expect(requests.count == 21)
  }
}
