import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// The lock-policy hook: temp writes refused with EPERM, destinations that wait for unlock.
@Suite("Download access policy", .timeLimit(.minutes(1)))
struct DownloadsAccessPolicyTests {
  let fixture: DownloadFixture
  let nginx: NginxServer
  let body = DownloadFixture.bytes(200_000)

  init() throws {
    fixture = try DownloadFixture()
    nginx = try NginxServer()
  }

  func session(_ policy: SwitchableAccessPolicy, delegate: (any DownloadSessionDelegate)? = nil) throws
    -> DownloadSession
  {
    var configuration = fixture.configuration()
    configuration.accessPolicy = policy
    return try DownloadSession(configuration: configuration, delegate: delegate)
  }

  @Test func refusedTempDirectoryFailsWithOperationNotPermitted() async throws {
    let url = try nginx.put(Data(body), at: "locked.bin")
    let session = try session(SwitchableAccessPolicy(temp: .deny(EPERM)))
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    let error = try #require(task.error)
    #expect(error.errno == EPERM)
    #expect(error.code == .protectedDataUnavailable)
    #expect(error.message.contains("Operation not permitted"))
    #expect(error.message.contains(fixture.temporaryDirectory))
    #expect(error.remedy == .initializeDownloadsDirectory)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(try session.store.task(id: task.id)?.errorNumber == EPERM)
  }

  @Test func unavailableDestinationWaitsForUnlockThenCompletes() async throws {
    let url = try nginx.put(Data(body), at: "later.bin")
    let policy = SwitchableAccessPolicy(destination: .waitForUnlock)
    let session = try session(policy)
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .waitingForUnlock)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(fixture.temporaryFiles.count == 1)
    #expect(try session.store.task(id: task.id)?.state == .waitingForUnlock)

    #expect(session.completeWaitingTasks().isEmpty)
    #expect(task.state == .waitingForUnlock)

    policy.set(destination: .allow)
    #expect(session.completeWaitingTasks().map(\.id) == [task.id])
    #expect(task.state == .completed)
    #expect(fixture.destinationContents("later.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(try session.store.task(id: task.id)?.state == .completed)
  }

  @Test func waitingTaskIsCompletedByALaterSession() async throws {
    let url = try nginx.put(Data(body), at: "reboot.bin")
    let policy = SwitchableAccessPolicy(destination: .waitForUnlock)
    let first = try session(policy)
    let task = try first.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .waitingForUnlock)
    first.invalidate()

    policy.set(destination: .allow)
    let second = try session(policy)
    #expect(second.task(id: task.id)?.state == .waitingForUnlock)
    #expect(second.completeWaitingTasks().count == 1)
    #expect(fixture.destinationContents("reboot.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func refusedDestinationFailsAndKeepsNothing() async throws {
    let url = try nginx.put(Data(body), at: "denied.bin")
    let session = try session(SwitchableAccessPolicy(destination: .deny(EACCES)))
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.errno == EACCES)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  /// A transfer that has received part of `body` and then stalls, with a policy the test switches.
  func stalledTransfer(of body: [UInt8]) async throws
    -> (FaultServer, SwitchableAccessPolicy, DownloadSession, DownloadTask)
  {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    let policy = SwitchableAccessPolicy()
    var configuration = fixture.configuration()
    configuration.accessPolicy = policy
    configuration.accessCheckInterval = .milliseconds(10)
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    return (server, policy, session, task)
  }

  @Test func lockDuringATransferFailsItWithItsBytesKeptForResume() async throws {
    let body = DownloadFixture.bytes(2 << 20)
    let (server, policy, session, task) = try await stalledTransfer(of: body)
    defer {
      server.stop()
      withExtendedLifetime(session) {}  // the session lives as long as its task is used
    }
    policy.set(openTemp: .deny(EPERM))
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.errno == EPERM)
    #expect(task.error?.message.contains("Operation not permitted") == true)
    #expect(fixture.temporaryFiles.count == 1)

    policy.set(openTemp: .allow)
    server.setMode(.normal)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.last?.headers["range"] != nil)
  }

  @Test func lockDuringATransferCanPauseItUntilUnlock() async throws {
    let body = DownloadFixture.bytes(2 << 20)
    let (server, policy, session, task) = try await stalledTransfer(of: body)
    defer { server.stop() }
    policy.set(openTemp: .waitForUnlock)
    await session.waitForEvent {
      if case .pausedForLock(task.id) = $0 { return true } else { return false }
    }
    #expect(task.state == .running)
    server.setMode(.normal)
    policy.set(openTemp: .allow)
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(server.requests.count == 2)
    #expect(server.requests.last?.headers["range"] != nil)
  }

  @Test func fullDiskFailsWithOneClearErrorAndNothingPartial() async throws {
    let small = fixture.directory.appendingPathComponent("full").path
    try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
    try #require(mount("none", small, "tmpfs", 0, "size=64k") == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    // Detached: the session may still hold a descriptor of the directory, which a plain umount refuses.
    defer { umount2(small, Int32(MNT_DETACH)) }
    let url = try nginx.put(Data(DownloadFixture.bytes(1 << 20)), at: "large.bin")
    let fits = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "fits.bin")
    var configuration = fixture.configuration()
    configuration.temporaryDirectory = small
    configuration.receiveBufferSize = 16 * 1024
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC)
    #expect(error.message.contains("No space left on device"))
    #expect(error.message.contains(url.absoluteString))
    #expect(try FileManager.default.contentsOfDirectory(atPath: small).isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
    let other = try session.downloadTask(with: fits)
    other.resume()
    #expect(await other.waitUntilSettled() == .completed, "\(String(describing: other.error))")
  }

  final class RecordingDelegate: DownloadSessionDelegate {
    struct Log {
      var progress: [Int64] = []
      var finishedAt: URL?
      var tempExistedDuringFinish = false
      var completedError: ProtFSError??
    }
    let log = Mutex(Log())
    let done = Mutex<CheckedContinuation<Void, Never>?>(nil)

    func downloadSession(
      _ session: DownloadSession, task: DownloadTask, didWriteData bytesWritten: Int64, totalBytesWritten: Int64,
      totalBytesExpectedToWrite: Int64
    ) {
      log.withLock { $0.progress.append(totalBytesWritten) }
    }

    func downloadSession(_ session: DownloadSession, task: DownloadTask, didFinishDownloadingTo location: URL) {
      let exists = FileManager.default.fileExists(atPath: location.path)
      log.withLock { l in
        l.finishedAt = location
        l.tempExistedDuringFinish = exists
      }
    }

    func downloadSession(_ session: DownloadSession, task: DownloadTask, didCompleteWithError error: ProtFSError?) {
      log.withLock { $0.completedError = .some(error) }
      done.withLock { $0?.resume() }
    }
  }

  @Test func delegateSeesProgressTheFinishedTempFileAndCompletion() async throws {
    let url = try nginx.put(Data(DownloadFixture.bytes(4 << 20)), at: "delegate.bin")
    let delegate = RecordingDelegate()
    let session = try session(SwitchableAccessPolicy(), delegate: delegate)
    let task = try session.downloadTask(with: url)
    await withCheckedContinuation { continuation in
      delegate.done.withLock { $0 = continuation }
      task.resume()
    }
    let log = delegate.log.withLock { $0 }
    #expect(log.tempExistedDuringFinish)
    #expect(log.finishedAt?.lastPathComponent.hasPrefix("CFNetworkDownload_") == true)
    #expect(log.finishedAt?.lastPathComponent.hasSuffix(".tmp") == true)
    #expect(log.completedError == .some(nil))
    #expect(log.progress == log.progress.sorted())
    #expect(task.state == .completed)
  }
}
