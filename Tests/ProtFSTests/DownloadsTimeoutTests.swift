import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// The request timeout's minimum speed and the resource timeout, and both kept with the task.
@Suite(.timeLimit(.minutes(1))) struct DownloadsTimeoutTests {
  let fixture: DownloadFixture
  /// One byte a second: never silent for long, never fast enough.
  static let trickle = FaultServer.Mode.slowDrip(chunk: 1, interval: .seconds(1))

  init() throws { fixture = try DownloadFixture() }

  @Test func aOneBytePerSecondTrickleTimesOut() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(1000), mode: Self.trickle)
    defer { server.stop() }
    var configuration = fixture.configuration()
    configuration.requestTimeout = .seconds(2)
    configuration.maximumRetries = 0
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    let message = task.error?.description ?? ""
    #expect(message.contains("less than the minimum of 100 bytes a second"), "\(message)")
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func aLaterSessionAppliesTheTimeoutsTheTaskWasCreatedWith() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(1000), mode: Self.trickle)
    defer { server.stop() }
    var first = fixture.configuration()
    first.resourceTimeout = .seconds(2)
    let creator = try DownloadSession(configuration: first)
    let id = try creator.downloadTask(with: server.url()).id
    creator.invalidate()
    // A session with the defaults (7 days) reattaches the task: its own 2 s still apply.
    var second = fixture.configuration()
    second.resumesReattachedTasks = false
    let session = try DownloadSession(configuration: second)
    defer { session.invalidate() }
    let task = try #require(session.task(id: id))
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    let message = task.error?.description ?? ""
    #expect(message.contains("resource timeout of 2 s"), "\(message)")
    #expect(try session.store.task(id: id)?.resourceTimeout == 2)
  }
}

/// The numbered names a second download of one name gets.
@Suite struct DownloadFileNameNumberingTests {
  @Test(arguments: [
    ("report.pdf", 1, "report (1).pdf"), ("archive.tar.gz", 2, "archive (2).tar.gz"), ("README", 1, "README (1)"),
    (".profile", 1, ".profile (1)"), ("a.b.c", 3, "a.b (3).c"),
  ])
  func numbered(name: String, n: Int, expected: String) {
    #expect(DownloadFileName.numbered(name, n) == expected)
  }
}
