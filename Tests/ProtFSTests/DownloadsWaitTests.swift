import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// `DownloadTask.waitUntilAllSettled(_:)`: the blocking wait of the command line and the session
/// service for many tasks at once.
@Suite("Waiting for many downloads", .timeLimit(.minutes(1)))
struct DownloadsWaitTests {
  let fixture: DownloadFixture
  let nginx: NginxServer

  init() throws {
    fixture = try DownloadFixture()
    nginx = try NginxServer()
  }

  @Test func everyTaskIsWaitedForAndItsStateReturnedOnce() async throws {
    var urls: [URL] = []
    for index in 0..<40 { urls.append(try nginx.put(Data(DownloadFixture.bytes(1_000 + index)), at: "w\(index).bin")) }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let tasks = try urls.map { try session.downloadTask(with: $0) }
    for task in tasks { task.resume() }
    // A task settled before the wait begins counts as well as one that settles during it.
    #expect(await tasks[0].waitUntilSettled() == .completed)
    let states = await offPool { DownloadTask.waitUntilAllSettled(tasks) }
    #expect(states.count == tasks.count)
    #expect(tasks.allSatisfy { states[$0.id] == .completed }, "\(states)")
    #expect(DownloadTask.waitUntilAllSettled([]).isEmpty)
  }

  @Test func anInvalidatedSessionEndsTheWaitWithTheStatesItLeft() async throws {
    let url = try nginx.put(Data(DownloadFixture.bytes(1_000)), at: "never.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: url)  // never resumed: nothing settles it
    let waiting = Task { await offPool { DownloadTask.waitUntilAllSettled([task]) } }
    // Invalidated while the wait runs or before it registers: either way it ends.
    session.invalidate()
    let states = await waiting.value
    #expect(states == [task.id: .suspended], "\(states)")
    // A wait begun after the invalidation ends at once too (it used to wait forever).
    #expect(await task.waitUntilSettled() == .suspended)
    #expect(DownloadTask.waitUntilAllSettled([task]) == [task.id: .suspended])
  }
}
