import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Resume data from a caller not trusted with paths (the session service's apps): the session's
/// own directories are used, and the temp file is continued once (docs/semantics.md §11).
@Suite("Resume data from an untrusted caller", .timeLimit(.minutes(1)))
struct DownloadsResumeTrustTests {
  let fixture: DownloadFixture

  init() throws { fixture = try DownloadFixture() }

  @Test func itsDirectoriesAreTheSessionsAndItsTempFileIsContinuedOnce() async throws {
    let server = try FaultServer(
      body: DownloadFixture.bytes(600_000), entityTag: "\"t1\"", mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let first = try session.downloadTask(with: server.url("once.bin"))
    first.resume()
    await session.waitForProgress(of: first, atLeast: 1)
    let data = try #require(await first.cancelByProducingResumeData())
    var resume = try DownloadResumeData(data: data)
    let name = resume.temporaryFileName
    // Directories an app would like the service to write in.
    resume.temporaryDirectory = "/"
    resume.destinationDirectory = "/etc"

    let again = try session.downloadTask(resuming: resume, from: first.id, handsOver: true)
    #expect(again.record.temporaryDirectory == fixture.temporaryDirectory)
    #expect(again.record.destinationDirectory == fixture.destinationDirectory)
    #expect(again.record.temporaryFileName == name && again.record.bytesReceived > 0)
    #expect(first.record.temporaryFileName == nil)
    #expect(try session.store.task(id: first.id)?.temporaryFileName == nil)
    // The same data again: the file is the first resumed task's now, so this one starts at byte 0.
    let replayed = try session.downloadTask(resuming: resume, from: first.id, handsOver: true)
    #expect(replayed.record.temporaryFileName == nil && replayed.record.bytesReceived == 0)
    #expect(fixture.temporaryFiles == [name])
  }
}
