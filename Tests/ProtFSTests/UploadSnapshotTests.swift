import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// What an upload sends is one consistent snapshot of its source, even when the app writes to the
/// source while it is copied (docs/semantics.md §5).
@Suite(.timeLimit(.minutes(1))) struct UploadSnapshotTests {
  /// Bytes larger than the background threshold, so that the copy runs while the task sends.
  static func large(_ seed: UInt8) -> [UInt8] {
    var bytes = [UInt8](repeating: seed, count: Int(UploadSnapshot.backgroundThreshold) + (2 << 20) + 77)
    for index in stride(from: 0, to: bytes.count, by: 4093) { bytes[index] = UInt8(truncatingIfNeeded: index / 4093) }
    return bytes
  }

  /// Overwrites `path` in place with `bytes` and gives it a modification time a second later than
  /// before, as an app's write in a later clock tick would.
  static func rewrite(_ path: String, with bytes: [UInt8]) {
    let fd = open(path, O_WRONLY)
    precondition(fd >= 0)
    defer { close(fd) }
    var status = stat()
    fstat(fd, &status)
    _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
    var times = [status.st_atim, timespec(tv_sec: status.st_mtim.tv_sec + 1, tv_nsec: status.st_mtim.tv_nsec)]
    _ = futimens(fd, &times)
  }

  /// Uploads the file at `path` (written as `bytes`), running `hook` after each copy pass.
  func upload(_ bytes: [UInt8], hook: @escaping @Sendable (String, Int) -> Void) async throws -> (
    DownloadTask, [UploadServer.Request], [String]
  ) {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let (session, path) = try UploadTests().setUp(t, bytes: bytes)
    defer { session.invalidate() }
    UploadSnapshot.passHooks.withLock { $0[path] = { pass in hook(path, pass) } }
    defer { _ = UploadSnapshot.passHooks.withLock { $0.removeValue(forKey: path) } }
    let task = try session.uploadTask(with: UploadRequest(url: server.url("put")), fromFile: path)
    task.resume()
    _ = await task.waitUntilSettled()
    return (task, server.requests, UploadTests().snapshots(t))
  }

  @Test func aLargeFileWrittenDuringItsCopyIsCopiedAgainAndSentFromTheStart() async throws {
    let original = Self.large(0x11)
    let changed = Self.large(0x22)
    let (task, requests, left) = try await upload(original) { path, pass in
      if pass == 1 { Self.rewrite(path, with: changed) }
    }
    #expect(task.state == .completed, "\(String(describing: task.error))")
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == changed.count && reply.sha256 == UploadTests.hex(changed))
    // Whatever reached the server of the first copy never made a whole body.
    #expect(requests.filter { $0.received == original.count }.count == 1)
    #expect(task.countOfBytesExpectedToSend == Int64(changed.count))
    #expect(left.isEmpty)
  }

  @Test func aLargeFileThatGrowsDuringItsCopyIsSentAtItsNewSize() async throws {
    let original = Self.large(0x33)
    let grown = original + DownloadFixture.bytes(5000)
    let (task, _, _) = try await upload(original) { path, pass in
      if pass == 1 { try? Data(grown).write(to: URL(fileURLWithPath: path)) }
    }
    #expect(task.state == .completed, "\(String(describing: task.error))")
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == grown.count && reply.sha256 == UploadTests.hex(grown))
    #expect(task.countOfBytesExpectedToSend == Int64(grown.count))
  }

  @Test func aLargeFileThatKeepsChangingFailsClearly() async throws {
    let original = Self.large(0x44)
    let (task, requests, left) = try await upload(original) { path, pass in
      Self.rewrite(path, with: Self.large(UInt8(0x50 + pass)))
    }
    #expect(task.state == .failed)
    let message = task.error?.message ?? ""
    #expect(message.contains("changed while it was copied, 3 times"), "\(message)")
    #expect(requests.allSatisfy { $0.received < original.count || $0.status >= 400 })
    #expect(left.isEmpty)
  }

  @Test func aSmallFileWrittenDuringItsCopyIsCopiedAgain() async throws {
    let original = DownloadFixture.bytes(200_000, seed: 1)
    let changed = DownloadFixture.bytes(200_000, seed: 2)
    let (task, requests, _) = try await upload(original) { path, pass in
      if pass == 1 { Self.rewrite(path, with: changed) }
    }
    #expect(task.state == .completed)
    #expect(requests.count == 1)
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.sha256 == UploadTests.hex(changed))
  }

  @Test func aSmallFileThatKeepsChangingIsRefusedWhenTheTaskIsMade() throws {
    let t = try TestDevice()
    let (session, path) = try UploadTests().setUp(t, bytes: DownloadFixture.bytes(10_000))
    defer { session.invalidate() }
    UploadSnapshot.passHooks.withLock {
      $0[path] = { pass in Self.rewrite(path, with: DownloadFixture.bytes(10_000, seed: UInt64(pass) + 9)) }
    }
    defer { _ = UploadSnapshot.passHooks.withLock { $0.removeValue(forKey: path) } }
    let error = #expect(throws: ProtFSError.self) {
      try session.uploadTask(with: UploadRequest(url: URL(string: "http://127.0.0.1:9/x")!), fromFile: path)
    }
    #expect(error?.message.contains("changed while it was copied") == true)
    #expect(UploadTests().snapshots(t).isEmpty)
  }
}
