import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSLock
import ProtFSTestSupport
import Testing

/// The device locking during a transfer, with the real lock simulator deciding (docs/semantics.md §3, "fd
/// already open"): a complete Downloads directory fails the task and keeps its bytes, a
/// complete-unless-open one keeps writing.
@Suite(.timeLimit(.minutes(1))) struct DownloadsDeviceLockTests {
  let app = "com.example.app"

  func session(_ t: TestDevice, downloadsClass: ProtectionClass, server: FaultServer) throws -> (
    DownloadSession, DownloadTask
  ) {
    let bundle = try BundleID(app)
    try t.device.createContainer(bundle, defaultClass: .complete)
    _ = try t.device.initCache(bundle, protectionClass: downloadsClass)
    let container = t.device.container(bundle)
    var configuration = try t.device.downloadConfiguration(
      bundleID: bundle, identifier: "lock-test", destination: try container.path("tmp"))
    configuration.accessCheckInterval = .milliseconds(10)
    configuration.maximumRetries = 0
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url("data.bin"))
    return (session, task)
  }

  @Test func aCompleteTempDirectoryFailsOnLockKeepingItsBytesAndResumesAfterUnlock() async throws {
    let t = try TestDevice()
    let body = DownloadFixture.bytes(600_000)
    let server = try FaultServer(body: body, entityTag: "\"lock\"", mode: .stallAfter(bytes: 200_000))
    defer { server.stop() }
    let (session, task) = try session(t, downloadsClass: .complete, server: server)
    defer { session.invalidate() }
    task.resume()
    await session.waitForProgress(of: task, atLeast: 200_000)
    _ = try LockController(device: t.device).lock()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.errno == EPERM)
    #expect(task.record.temporaryFileName != nil)
    _ = try LockController(device: t.device).unlock()
    server.setMode(.normal)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "tmp/data.bin")) == Data(body))
    #expect(server.requests.last?.headers["if-range"] == "\"lock\"")
  }

  @Test func anUnlessOpenTempDirectoryKeepsWritingWhileLocked() async throws {
    let t = try TestDevice()
    let body = DownloadFixture.bytes(600_000)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let (session, task) = try session(t, downloadsClass: .completeUnlessOpen, server: server)
    defer { session.invalidate() }
    task.resume()
    await session.waitForProgress(of: task, atLeast: 200_000)
    _ = try LockController(device: t.device).lock()
    // The open temp file stays writable while locked: the rest of the body arrives and is written.
    server.openGate()
    // The destination (tmp) is complete: the finished file waits for the unlock.
    #expect(await task.waitUntilSettled() == .waitingForUnlock)
    _ = try LockController(device: t.device).unlock()
    #expect(session.completeWaitingTasks().map(\.state) == [.completed])
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "tmp/data.bin")) == Data(body))
  }
}
