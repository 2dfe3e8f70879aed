import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A download task created through the service keeps and sends its request's headers.
@Suite(.timeLimit(.minutes(2))) struct SessionServiceHeadersTests {
  let app = SessionServiceFixture.app

  @Test func aDownloadTaskSendsItsRequestHeadersThroughTheService() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let body = DownloadFixture.bytes(200_000)
    let server = try FaultServer(body: body, entityTag: "\"h1\"", mode: .normal)
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let headers = [
      SessionHeader(name: "Authorization", value: "Bearer s3cret"), SessionHeader(name: "X-A", value: "1"),
    ]
    let task = try client.createDownloadTask(
      SessionRequest(url: server.url("h.bin"), headers: headers), resumeData: nil)
    #expect(task.request.headers == headers)
    try client.resume(task.id)
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    #expect(try f.tasks().first?.requestHeaders == headers)
    let request = try #require(server.requests.first)
    #expect(request.headers["authorization"] == "Bearer s3cret")
    #expect(request.headers["x-a"] == "1")
    client.detach()
  }

  @Test func aDownloadTaskSendsItsMethodAndBodyAndGivesNoResumeData() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try UploadServer()
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let body = Data("{\"report\":\"weekly\"}".utf8)
    let task = try client.createDownloadTask(
      SessionRequest(
        url: server.url("report"), method: "POST",
        headers: [SessionHeader(name: "Content-Type", value: "application/json")], body: body),
      resumeData: nil)
    #expect(task.request.method == "POST")
    try client.resume(task.id)
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    let record = try #require(try f.tasks().first)
    #expect(record.requestMethod == "POST")
    #expect(record.requestBody == body)
    let request = try #require(server.requests.first)
    #expect(request.method == "POST")
    #expect(request.received == body.count)
    #expect(request.headers["content-type"] == "application/json")
    // What the server answered is the downloaded file: its digest of the body it took.
    let file = try #require(record.handedOverPath)
    let reply = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file))) as? [String: Any]
    let digest = SHA256Digest()
    body.withUnsafeBytes { digest.update($0.baseAddress!, count: $0.count) }
    #expect(reply?["sha256"] as? String == digest.finalizeHex())

    // Only a GET continues from its bytes (as iOS): a cancelled POST gives no resume data.
    let again = try client.createDownloadTask(
      SessionRequest(url: server.url("status/200"), method: "PUT", body: body), resumeData: nil)
    #expect(try client.cancel(again.id, producingResumeData: true) == nil)
    // A body the service could not carry is refused, naming its size.
    #expect(throws: ProtFSError.self) {
      try client.createDownloadTask(
        SessionRequest(url: server.url("x"), method: "POST", body: Data(count: DownloadRequest.maximumBodySize + 1)),
        resumeData: nil)
    }
    // A method that is no HTTP token (a header smuggled after a line break) is refused, naming it.
    let smuggled = #expect(throws: ProtFSError.self) {
      try client.createDownloadTask(
        SessionRequest(url: server.url("x"), method: "GET /x HTTP/1.1\r\nX-Evil: 1\r\n"), resumeData: nil)
    }
    #expect(smuggled?.message.contains("is not an HTTP method") == true, "\(String(describing: smuggled))")
    client.detach()
  }
}
