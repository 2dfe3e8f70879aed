import Foundation
import ProtFS
import ProtFSCache
import ProtFSDownloads
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Upload tasks on a device (docs/semantics.md §9): the snapshot taken under the lock rules, PUT
/// and POST through the engine with retries, the server's answer kept with the task.
@Suite(.timeLimit(.minutes(1))) struct UploadTests {
  let app = "com.example.app"

  /// A device with the app's container, a session for it, and `bytes` written to Documents/name.
  func setUp(_ t: TestDevice, bytes: [UInt8] = DownloadFixture.bytes(300_000), name: String = "report.bin") throws
    -> (DownloadSession, String)
  {
    let bundle = try BundleID(app)
    if !t.device.container(bundle).exists { try t.device.createContainer(bundle) }
    let container = t.device.container(bundle)
    var configuration = try t.device.downloadConfiguration(
      bundleID: bundle, identifier: "uploads", destination: try container.path("Documents"))
    configuration.retryBaseDelay = .milliseconds(10)
    configuration.retryMaximumDelay = .milliseconds(50)
    configuration.maximumRetries = 3
    let path = t.containerPath(app, "Documents/" + name)
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    return (try DownloadSession(configuration: configuration), path)
  }

  /// The names in the app's Uploads directory.
  func snapshots(_ t: TestDevice) -> [String] {
    let path = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Uploads/" + app)
    return ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
  }

  /// The server's JSON reply.
  struct Reply: Decodable {
    var received: Int
    var sha256: String
    var method: String
  }

  static func hex(_ bytes: [UInt8]) -> String {
    let digest = SHA256Digest()
    bytes.withUnsafeBytes { digest.update($0.baseAddress!, count: $0.count) }
    return digest.finalizeHex()
  }

  @Test func aPutSendsTheFileAndKeepsTheJSONReply() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let bytes = DownloadFixture.bytes(300_000)
    let (session, path) = try setUp(t, bytes: bytes)
    defer { session.invalidate() }
    let events = session.events
    let task = try session.uploadTask(with: UploadRequest(url: server.url("put")), fromFile: path)
    #expect(task.kind == .upload)
    #expect(task.countOfBytesExpectedToSend == 300_000)
    #expect(snapshots(t).count == 1)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(task.responseStatus == 201)
    let reply = try JSONDecoder().decode(Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == 300_000 && reply.sha256 == Self.hex(bytes) && reply.method == "PUT")
    #expect(task.countOfBytesSent == 300_000)
    // Kept in the store for another process, and the snapshot is gone.
    #expect(try session.store.responseBody(of: task.id) == task.responseBody)
    #expect(try session.store.task(id: task.id)?.upload?.responseStatus == 201)
    #expect(snapshots(t).isEmpty)
    var sawResponse = false
    for await event in events {
      if case .receivedResponse(task.id, 201, let body) = event { sawResponse = body == task.responseBody }
      if case .completed(task.id, _) = event { break }
    }
    #expect(sawResponse)
  }

  @Test func aPostSendsItsHeaders() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    let request = UploadRequest(
      url: server.url("post"), method: .post,
      headers: [
        UploadHeader(name: "Content-Type", value: "application/json"), UploadHeader(name: "X-Token", value: "abc"),
      ])
    let task = try session.uploadTask(with: request, fromFile: path)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(task.responseStatus == 200)
    let received = try #require(server.requests.last)
    #expect(received.method == "POST" && received.received == 300_000)
    #expect(received.headers["x-token"] == "abc" && received.headers["content-type"] == "application/json")
  }

  @Test func a500IsRetriedFromTheFirstByte() async throws {
    let t = try TestDevice()
    let server = try UploadServer(failFirst: 2)
    defer { server.stop() }
    let bytes = DownloadFixture.bytes(200_000, seed: 7)
    let (session, path) = try setUp(t, bytes: bytes)
    defer { session.invalidate() }
    let task = try session.uploadTask(with: UploadRequest(url: server.url()), fromFile: path)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(server.requests.map(\.status) == [500, 500, 201])
    #expect(server.requests.allSatisfy { $0.received == 200_000 })
    let reply = try JSONDecoder().decode(Reply.self, from: try #require(task.responseBody))
    #expect(reply.sha256 == Self.hex(bytes))
  }

  @Test func a4xxFailsWithItsStatusAndKeepsTheBody() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    let task = try session.uploadTask(with: UploadRequest(url: server.url("status/403")), fromFile: path)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.responseStatus == 403)
    #expect(task.error?.message.contains("403") == true)
    #expect(task.responseBody?.isEmpty == false)
    #expect(server.requests.count == 1)
    #expect(snapshots(t).isEmpty)
  }

  @Test func theSnapshotSurvivesTheSourceBeingDeletedOrSwappedForALink() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let bytes = DownloadFixture.bytes(150_000, seed: 3)
    let (session, path) = try setUp(t, bytes: bytes)
    defer { session.invalidate() }
    let first = try session.uploadTask(with: UploadRequest(url: server.url("a")), fromFile: path)
    try FileManager.default.removeItem(atPath: path)
    // A link swapped in for the file after the task was made changes nothing: the copy is sent.
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: "/etc/hostname")
    first.resume()
    #expect(await first.waitUntilSettled() == .completed)
    let reply = try JSONDecoder().decode(Reply.self, from: try #require(first.responseBody))
    #expect(reply.sha256 == Self.hex(bytes) && reply.received == 150_000)
  }

  @Test func aLargeFileIsSentWhileItsSnapshotIsStillBeingCopied() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    var bytes = [UInt8](repeating: 0x5A, count: Int(UploadSnapshot.backgroundThreshold) + (6 << 20) + 123)
    for index in stride(from: 0, to: bytes.count, by: 4093) { bytes[index] = UInt8(truncatingIfNeeded: index / 4093) }
    let (session, path) = try setUp(t, bytes: bytes)
    defer { session.invalidate() }
    let task = try session.uploadTask(with: UploadRequest(url: server.url("big")), fromFile: path)
    // The source is held open until the copy ends: deleting it at once changes nothing.
    try FileManager.default.removeItem(atPath: path)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    let reply = try JSONDecoder().decode(Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == bytes.count && reply.sha256 == Self.hex(bytes))
    #expect(snapshots(t).isEmpty)
  }

  @Test func aCompleteFileCannotBeUploadedWhileLockedAndCanAfterUnlock() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    try t.device.setClass(.complete, of: try t.device.resolve(path))
    _ = try LockController(device: t.device).lock()
    let request = UploadRequest(url: server.url())
    let error = #expect(throws: ProtFSError.self) { try session.uploadTask(with: request, fromFile: path) }
    #expect(error?.code == .protectedDataUnavailable && error?.errno == EPERM)
    #expect(error?.message.contains(path) == true)
    #expect(snapshots(t).isEmpty && session.allTasks.isEmpty)
    _ = try LockController(device: t.device).unlock()
    let task = try session.uploadTask(with: request, fromFile: path)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
  }

  @Test func theUploadsDirectoryFollowsInitCachesClassSoALockedUploadOfAnOpenFileWorks() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let bundle = try BundleID(app)
    try t.device.createContainer(bundle, defaultClass: .complete)
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    try t.device.setClass(.none, of: try t.device.resolve(path))
    _ = try LockController(device: t.device).lock()
    // Without init-cache the Uploads directory inherits complete: no snapshot while locked.
    let refused = #expect(throws: ProtFSError.self) {
      try session.uploadTask(with: UploadRequest(url: server.url()), fromFile: path)
    }
    #expect(refused?.errno == EPERM && refused?.message.contains("Uploads") == true)
    #expect(snapshots(t).isEmpty)
    _ = try t.device.initCache(bundle)
    let task = try session.uploadTask(with: UploadRequest(url: server.url()), fromFile: path)
    #expect(
      t.rawClass(t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Uploads/" + app))
        == "NSFileProtectionNone")
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
  }

  @Test func badSourcesFailWithOneClearErrorAndLeaveNothing() throws {
    let t = try TestDevice()
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    let documents = t.containerPath(app, "Documents")
    try FileManager.default.createSymbolicLink(atPath: documents + "/out", withDestinationPath: "/etc/hostname")
    try FileManager.default.createSymbolicLink(atPath: documents + "/dir", withDestinationPath: "/etc")
    let outside = t.path("outside.bin")
    try Data("x".utf8).write(to: URL(fileURLWithPath: outside))
    let url = URL(string: "http://127.0.0.1:9/")!
    let cases: [(String, ProtFSError.Code, String)] = [
      (documents + "/missing.bin", .notFound, "no such file"),
      (documents, .invalidArgument, "is a directory"),
      (outside, .outsideDevice, "outside the app's container"),
      (documents + "/../../../outside.bin", .outsideDevice, "outside the app's container"),
      (documents + "/out", .symlink, "symbolic link"),
      (documents + "/dir/hostname", .symlink, "symbolic link"),
      // A file named with a trailing slash, which open(2) refuses (it names a directory).
      (path + "/", .io, "Not a directory"),
    ]
    for (source, code, words) in cases {
      let error = #expect(throws: ProtFSError.self) {
        try session.uploadTask(with: UploadRequest(url: url), fromFile: source)
      }
      #expect(error?.code == code, "\(source): \(String(describing: error))")
      #expect(error?.message.contains(words) == true, "\(source): \(String(describing: error))")
    }
    for text in ["ftp://127.0.0.1/x", "file:///tmp/x", "http:///nohost"] {
      let error = #expect(throws: ProtFSError.self) {
        try session.uploadTask(with: UploadRequest(url: URL(string: text)!), fromFile: path)
      }
      #expect(error?.message.contains(text) == true)
    }
    let header = UploadRequest(url: url, headers: [UploadHeader(name: "Bad Name", value: "x")])
    #expect(throws: ProtFSError.self) { try session.uploadTask(with: header, fromFile: path) }
    #expect(snapshots(t).isEmpty)
    #expect(try session.store.tasks().isEmpty)
  }

  @Test func anUploadIsReattachedByTheNextSessionAndSent() async throws {
    let t = try TestDevice()
    let server = try UploadServer()
    defer { server.stop() }
    let bytes = DownloadFixture.bytes(100_000, seed: 11)
    let (session, path) = try setUp(t, bytes: bytes)
    let id = try session.uploadTask(with: UploadRequest(url: server.url("later"), method: .post), fromFile: path).id
    let configuration = session.configuration
    session.invalidate()
    try FileManager.default.removeItem(atPath: path)
    let next = try DownloadSession(configuration: configuration)
    defer { next.invalidate() }
    let task = try #require(next.task(id: id))
    #expect(task.kind == .upload && task.state == .suspended)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(server.requests.last?.method == "POST")
    let reply = try JSONDecoder().decode(Reply.self, from: try #require(task.responseBody))
    #expect(reply.sha256 == Self.hex(bytes))
  }

  @Test func cancellingRemovesTheSnapshot() async throws {
    let t = try TestDevice()
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    let task = try session.uploadTask(with: UploadRequest(url: URL(string: "http://127.0.0.1:9/")!), fromFile: path)
    #expect(snapshots(t).count == 1)
    task.cancel()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.code == .cancelled)
    #expect(snapshots(t).isEmpty)
  }

  @Test func aPurgeKeepsTheSnapshotOfAnUnfinishedUpload() throws {
    let t = try TestDevice()
    let (session, path) = try setUp(t)
    defer { session.invalidate() }
    _ = try session.uploadTask(with: UploadRequest(url: URL(string: "http://127.0.0.1:9/")!), fromFile: path)
    let kept = snapshots(t)
    #expect(kept.count == 1)
    let manager = CacheManager(device: t.device, tasks: DeviceDownloadTasks(device: t.device))
    let report = try manager.purge(try BundleID(app), criteria: PurgeCriteria(includeResumable: true))
    #expect(report.kept.contains { $0.contains(kept[0]) && $0.contains("an upload task sends it") }, "\(report)")
    #expect(snapshots(t) == kept)
  }

  @Test func headersAndMethodsParseAsCurlGivesThem() throws {
    #expect(try UploadHeader.parse("X-A:  b c ") == UploadHeader(name: "X-A", value: "b c"))
    #expect(throws: ProtFSError.self) { try UploadHeader.parse("NoColon") }
    #expect(throws: ProtFSError.self) { try UploadHeader.parse(": value") }
    #expect(try UploadMethod.parse("post") == .post)
    #expect(throws: ProtFSError.self) { try UploadMethod.parse("GET") }
  }

  @Test func aStoreFromBeforeUploadsGetsTheirColumns() throws {
    let fixture = try DownloadFixture()
    let store = try DownloadStore(path: fixture.storePath)
    try store.database.transaction { db throws(ProtFSError) in
      try db.query("ALTER TABLE tasks DROP COLUMN upload_json")
      try db.query("ALTER TABLE tasks DROP COLUMN response")
    }
    let reopened = try DownloadStore(path: fixture.storePath)
    let columns = try reopened.database.read { db throws(ProtFSError) in
      try db.query("PRAGMA table_info(tasks)").compactMap { $0[1].string }
    }
    #expect(columns.contains("upload_json") && columns.contains("response"))
  }
}
