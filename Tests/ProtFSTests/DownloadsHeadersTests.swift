import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A download's own request headers: sent with every request, kept across restarts and resume data.
@Suite("Download request headers", .timeLimit(.minutes(1)))
struct DownloadsHeadersTests {
  let fixture: DownloadFixture
  let body = DownloadFixture.bytes(2 << 20)
  let headers = [UploadHeader(name: "Authorization", value: "Bearer abc"), UploadHeader(name: "X-Trace", value: "7")]

  init() throws { fixture = try DownloadFixture() }

  @Test func headersGoWithTheFirstAndTheResumedRequest() async throws {
    let server = try FaultServer(body: body, mode: .dropMidBody(after: 300_000, times: 1))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTasks(with: [DownloadRequest(url: server.url(), headers: headers)])[0]
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    let requests = server.requests
    #expect(requests.count == 2)
    for request in requests {
      #expect(request.headers["authorization"] == "Bearer abc")
      #expect(request.headers["x-trace"] == "7")
    }
    #expect(requests.last?.headers["range"] == "bytes=300000-")
    #expect(requests.last?.headers["if-range"] == "\"v1\"")
  }

  @Test func headersAreKeptByTheStoreAcrossARestart() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    let first = try DownloadSession(configuration: fixture.configuration())
    let task = try first.downloadTasks(with: [DownloadRequest(url: server.url(), headers: headers)])[0]
    task.resume()
    await first.waitForProgress(of: task, atLeast: 200_000)
    first.invalidate()
    #expect(try first.store.task(id: task.id)?.requestHeaders == headers)

    server.setMode(.normal)
    let second = try DownloadSession(configuration: fixture.configuration())
    defer { second.invalidate() }
    let reattached = try #require(second.task(id: task.id))
    #expect(await reattached.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    let last = try #require(server.requests.last)
    #expect(last.headers["range"]?.hasPrefix("bytes=") == true && last.headers["range"] != "bytes=0-")
    #expect(last.headers["authorization"] == "Bearer abc")
    #expect(last.headers["x-trace"] == "7")
  }

  @Test func headersTravelInResumeData() async throws {
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: 256 * 1024))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTasks(with: [DownloadRequest(url: server.url(), headers: headers)])[0]
    task.resume()
    await session.waitForProgress(of: task, atLeast: 200_000)
    let data = try #require(await task.cancelByProducingResumeData())
    server.openGate()
    #expect(try DownloadResumeData(data: data).headers == headers)
    server.setMode(.normal)
    let resumed = try session.downloadTask(withResumeData: data)
    #expect(resumed.record.requestHeaders == headers)
    resumed.resume()
    #expect(await resumed.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    let last = try #require(server.requests.last)
    #expect(last.headers["range"] != nil)
    #expect(last.headers["authorization"] == "Bearer abc")
  }

  @Test func aBadHeaderIsRefusedWhenTheTaskIsMade() throws {
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let request = DownloadRequest(
      url: URL(string: "http://127.0.0.1:9/x")!, headers: [UploadHeader(name: "X-Bad", value: "a\r\nb")])
    #expect(throws: ProtFSError.self) { try session.downloadTasks(with: [request]) }
    #expect(try session.store.tasks().isEmpty)
  }

  @Test func aStoreMadeBeforeHeadersGetsTheColumnAndKeepsItsTasks() throws {
    let old = try DownloadSession(configuration: fixture.configuration())
    let task = try old.downloadTask(with: URL(string: "http://127.0.0.1:9/old.bin")!)
    old.invalidate()
    // The store as an earlier version left it: no request_headers column.
    try old.store.database.transaction { db throws(ProtFSError) in
      try db.query("ALTER TABLE tasks DROP COLUMN request_headers")
    }
    let reopened = try DownloadStore(path: fixture.storePath)
    let record = try #require(try reopened.task(id: task.id))
    #expect(record.url == "http://127.0.0.1:9/old.bin")
    #expect(record.requestHeaders.isEmpty)
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let fresh = try session.downloadTasks(
      with: [DownloadRequest(url: URL(string: "http://127.0.0.1:9/new.bin")!, headers: headers)])[0]
    #expect(try session.store.task(id: fresh.id)?.requestHeaders == headers)
  }
}
