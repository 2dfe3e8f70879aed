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
    client.invalidate(cancelling: false)
  }
}
