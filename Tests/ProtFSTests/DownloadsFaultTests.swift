import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// Resume, retries and failures against the fault-injecting server.
@Suite("Downloads against a faulty server", .timeLimit(.minutes(1)))
struct DownloadsFaultTests {
  let fixture: DownloadFixture
  let body = DownloadFixture.bytes(2 << 20)

  init() throws { fixture = try DownloadFixture() }

  /// Starts a slow download, waits until `atLeast` bytes arrived, and cancels it for resume data.
  func partialDownload(
    _ session: DownloadSession, _ server: FaultServer, atLeast: Int64 = 128 * 1024, sha256: String? = nil
  ) async throws -> (DownloadResumeData, Data) {
    let task = try session.downloadTask(with: server.url(), expectedSHA256: sha256)
    task.resume()
    await session.waitForProgress(of: task, atLeast: atLeast)
    let data = try #require(await task.cancelByProducingResumeData())
    #expect(task.state == .failed)
    #expect(task.error?.code == .cancelled)
    let resume = try DownloadResumeData(data: data)
    #expect(resume.bytesReceived >= atLeast)
    #expect(resume.bytesReceived < Int64(body.count))
    #expect(resume.entityTag == "\"v1\"")
    #expect(fixture.temporaryFiles == [resume.temporaryFileName])
    return (resume, data)
  }

  /// Sends 256 KiB and then holds the connection: the test, not the clock, decides when it ends.
  static let drip = FaultServer.Mode.stallAfter(bytes: 256 * 1024)

  @Test func resumeAfterCancelSendsRangeAndIfRange() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let (resume, data) = try await partialDownload(session, server)
    server.setMode(.normal)
    let task = try session.downloadTask(withResumeData: data)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
    let last = try #require(server.requests.last)
    #expect(last.headers["range"] == "bytes=\(resume.bytesReceived)-")
    #expect(last.headers["if-range"] == "\"v1\"")
  }

  @Test(arguments: [true, false])
  func resumedDownloadIsVerifiedAsAWhole(digestMatches: Bool) async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let digest = digestMatches ? DownloadsNginxTests.sha256(body) : String(repeating: "0", count: 64)
    let (_, data) = try await partialDownload(session, server, sha256: digest)
    server.setMode(.normal)
    let task = try session.downloadTask(withResumeData: data)
    task.resume()
    if digestMatches {
      #expect(await task.waitUntilSettled() == .completed)
      #expect(fixture.destinationContents("file.bin") == body)
    } else {
      #expect(await task.waitUntilSettled() == .failed)
      #expect(task.error?.code == .checksumMismatch)
      #expect(fixture.destinationFiles.isEmpty)
      #expect(fixture.temporaryFiles.isEmpty)
    }
  }

  @Test func progressBeforeTheFirstReadOfEventsIsInTheTaskCount() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    // Nobody reads events yet, so there is no signal to wait for: the count is polled.
    while task.countOfBytesReceived < 256 * 1024 { try await Task.sleep(for: .milliseconds(5)) }
    let events = session.events
    #expect(task.countOfBytesReceived == 256 * 1024)
    task.cancel()
    var sawProgress = false
    for await event in events {
      if case .progress = event { sawProgress = true }
      if case .failed(task.id, _) = event { break }
    }
    #expect(!sawProgress, "no event is made before events is read, and the stalled server sends no more")
  }

  @Test func bytesAStoreSnapshotCountedStillGetTheirEvent() async throws {
    let server = try FaultServer(body: body, mode: .gateThenStall(first: 64 * 1024, then: 64 * 1024))
    defer { server.stop() }
    var configuration = fixture.configuration()
    // Snapshots far more often than events: the second burst is snapshotted before its event is due.
    configuration.progressEventInterval = .milliseconds(500)
    configuration.progressPersistInterval = .milliseconds(5)
    let session = try DownloadSession(configuration: configuration)
    let events = session.events
    let task = try session.downloadTask(with: server.url())
    task.resume()
    var opened = false
    for await event in events {
      guard case .progress(task.id, let written, _) = event else { continue }
      if written == 128 * 1024 { break }
      if !opened && written == 64 * 1024 {
        opened = true
        server.openGate()
      }
    }
    #expect(opened)
    #expect(task.countOfBytesReceived == 128 * 1024)
    task.cancel()
  }

  @Test func changedEntityStartsOver() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let (_, data) = try await partialDownload(session, server)
    let newer = DownloadFixture.bytes(1 << 20, seed: 42)
    server.setContent(newer, entityTag: "\"v2\"")
    server.setMode(.normal)
    let task = try session.downloadTask(withResumeData: data)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == newer)
  }

  @Test func etagChangingOnEveryRequestStartsOver() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let (_, data) = try await partialDownload(session, server)
    server.setMode(.changeETagEveryRequest)
    let task = try session.downloadTask(withResumeData: data)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
  }

  @Test func ignoredRangeStartsOver() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let (resume, data) = try await partialDownload(session, server)
    server.setMode(.ignoreRange)
    let task = try session.downloadTask(withResumeData: data)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.last?.headers["range"] == "bytes=\(resume.bytesReceived)-")
  }

  @Test func rangeNotSatisfiableOnACompleteFileCountsAsDone() async throws {
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let name = "CFNetworkDownload_abcdef.tmp"
    try Data(body).write(to: URL(fileURLWithPath: fixture.temporaryDirectory + "/" + name))
    let resume = DownloadResumeData(
      url: server.url(), bytesReceived: Int64(body.count), temporaryDirectory: fixture.temporaryDirectory,
      temporaryFileName: name, destinationDirectory: fixture.destinationDirectory, fileName: "file.bin",
      entityTag: "\"v1\"")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(withResumeData: resume.encoded())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.count == 1)
    #expect(server.requests[0].headers["range"] == "bytes=\(body.count)-")
  }

  @Test func serverErrorsAreRetriedWithBackoff() async throws {
    let server = try FaultServer(body: body, mode: .failFirst(count: 2, status: 503))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(server.requests.count == 3)
    #expect(fixture.destinationContents("file.bin") == body)
  }

  @Test func persistentServerErrorsFailAfterTheLastRetry() async throws {
    let server = try FaultServer(body: body, mode: .alwaysStatus(500))
    defer { server.stop() }
    var configuration = fixture.configuration()
    configuration.maximumRetries = 2
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(server.requests.count == 3)
    let error = try #require(task.error)
    #expect(error.message.contains("500"))
    #expect(error.message.contains("gave up after 3 attempts"))
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test(arguments: [401, 403, 404, 410])
  func clientErrorsAreFinalAtOnce(status: Int) async throws {
    let server = try FaultServer(body: body, mode: .alwaysStatus(status))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(server.requests.count == 1)
    #expect(task.error?.message.contains("answered \(status)") == true)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
  }

  @Test func droppedConnectionIsRetriedFromWhereItStopped() async throws {
    let server = try FaultServer(body: body, mode: .dropMidBody(after: 300_000, times: 1))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.count == 2)
    #expect(server.requests[1].headers["range"] == "bytes=300000-")
    #expect(server.requests[1].headers["if-range"] == "\"v1\"")
  }

  @Test func wrongContentLengthFailsAndKeepsNothing() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(50_000), mode: .wrongContentLength(extra: 1000))
    defer { server.stop() }
    var configuration = fixture.configuration()
    configuration.maximumRetries = 1
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.code == .network)
    #expect(task.error?.message.contains("announced 51000 bytes") == true)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func serverThatNeverAnswersTimesOut() async throws {
    let server = try FaultServer(body: body, mode: .neverAnswer)
    defer { server.stop() }
    var configuration = fixture.configuration()
    configuration.requestTimeout = .milliseconds(300)
    configuration.maximumRetries = 0
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url())
    let started = Date().timeIntervalSince1970
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    // When the session failed the task, not when this await came back: with the whole suite
    // running on two cores, other tests can hold the concurrency pool for seconds.
    // Without the timeout the task would never settle; 10 s leaves room for a loaded machine.
    #expect(task.record.updatedAt - started < 10)
    #expect(task.error?.message.contains("sent nothing for 0.3 s") == true)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func contentDispositionNamesTheFile() async throws {
    let server = try FaultServer(body: body, contentDisposition: "attachment; filename=\"report 2026.pdf\"")
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url("download?id=7"))
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationFiles == ["report 2026.pdf"])
  }

  /// A name with directories keeps its last segment alone (RFC 6266 §4.3, as curl -J and wget):
  /// the file never leaves its directory, and the download completes; a name of which nothing
  /// plain remains gives way to the URL's. Such a download used to fail.
  @Test(arguments: [
    ("attachment; filename=\"../evil.sh\"", "evil.sh"), ("attachment; filename*=UTF-8''..%2F..%2Fevil", "evil"),
    ("attachment; filename=\"..\\\\windows\\\\evil.bat\"", "evil.bat"), ("attachment; filename=\"a/..\"", "file.bin"),
  ])
  func contentDispositionKeepsItsLastSegmentOnly(header: String, name: String) async throws {
    let server = try FaultServer(body: body, contentDisposition: header)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationFiles == [name])
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func suspendKeepsTheTempFileAndResumeContinues() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    task.suspend()
    await session.waitForEvent {
      if case .suspended(task.id) = $0 { return true } else { return false }
    }
    #expect(task.state == .suspended)
    #expect(fixture.temporaryFiles.count == 1)
    server.setMode(.normal)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.last?.headers["range"] != nil)
  }

  /// A resume that comes before the suspension settled (Tiercel suspends and resumes its tasks
  /// 0.1 s apart at every didBecomeActive) continues the download: the suspension, settling after
  /// it, used to leave the task stopped for good.
  @Test(.timeLimit(.minutes(2))) func aResumeRightAfterASuspendContinuesTheDownload() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    task.suspend()
    task.resume()
    server.setMode(.normal)
    #expect(await task.waitUntilSettled() == .completed, "\(task.state)")
    #expect(fixture.destinationContents("file.bin") == body)
  }

  /// The latest of the two wins the other way too: a suspend after a resume suspends.
  @Test func aSuspendRightAfterAResumeSuspends() async throws {
    let server = try FaultServer(body: body, mode: Self.drip)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    task.suspend()
    task.resume()
    task.suspend()
    // The first suspension may settle (and say so) before the resume, which starts the transfer
    // again until the second one settles: the suspension to wait for is one that leaves the task
    // suspended. Were the second suspend lost, none would, and the time limit would fail the test.
    await session.waitForEvent {
      if case .suspended(task.id) = $0 { return task.state == .suspended } else { return false }
    }
    #expect(task.state == .suspended)
    #expect(fixture.temporaryFiles.count == 1)
  }

  @Test func cancelReturnsPromptlyAndRemovesTheTempFile() async throws {
    // Two minutes of drip: far longer than the cooperative pool has ever been held by the other
    // tests of a full run on two cores (about 30 s), so the transfer is still running when this
    // test gets to cancel it. The test itself takes no longer for it.
    let server = try FaultServer(body: body, mode: .slowDrip(chunk: 4096, interval: .milliseconds(250)))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 4096)
    // The server would need two minutes more; cancel must not wait for it.
    let started = ContinuousClock.now
    let startedWall = Date().timeIntervalSince1970
    task.cancel()
    // Returning at all before the transfer's end is the point; 2 s leaves room for a loaded machine.
    #expect(ContinuousClock.now - started < .seconds(2))
    #expect(await task.waitUntilSettled() == .failed)
    // Settled by the session well before the transfer would have ended (its own clock, not this
    // await's: other tests can hold the concurrency pool for seconds when the whole suite runs on
    // two cores).
    #expect(task.record.updatedAt - startedWall < 10)
    #expect(task.error?.code == .cancelled)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
  }
}
