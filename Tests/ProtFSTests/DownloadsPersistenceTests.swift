import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Sessions outliving their objects and processes; the task store under concurrency.
@Suite("Download sessions persist", .timeLimit(.minutes(1)))
struct DownloadsPersistenceTests {
  let fixture: DownloadFixture
  let body = DownloadFixture.bytes(3 << 20)

  init() throws { fixture = try DownloadFixture() }

  @Test func reopenedSessionReattachesAndResumesFromTheTempFile() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    let first = try DownloadSession(configuration: fixture.configuration())
    let task = try first.downloadTask(with: server.url())
    task.taskDescription = "reattach me"
    task.resume()
    await first.waitForProgress(of: task, atLeast: 200_000)
    first.invalidate()
    let stored = try #require(try first.store.task(id: task.id))
    #expect(stored.state == .running)
    #expect(stored.bytesReceived > 0)
    #expect(fixture.temporaryFiles == [try #require(stored.temporaryFileName)])

    server.setMode(.normal)
    let second = try DownloadSession(configuration: fixture.configuration())
    let reattached = try #require(second.task(id: task.id))
    #expect(reattached.taskDescription == "reattach me")
    #expect(await reattached.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
    let range = try #require(server.requests.last?.headers["range"])
    #expect(range.hasPrefix("bytes=") && range != "bytes=0-")
    // Asking for the same download again gives the same task, not a second one.
    #expect(try second.store.tasks(session: second.identifier).count == 1)
  }

  /// A file that finishes with nothing else to run settles at once instead of waiting out the
  /// finisher's group window for company (which would add the window to every wait's end).
  @Test func theLastFileDoesNotWaitOutTheGroupWindow() async throws {
    let server = try FaultServer(body: body)
    defer { server.stop() }
    var configuration = fixture.configuration()
    // Waited out, the window would outlast the suite's one-minute limit, however loaded the machine.
    configuration.settleGroupWindow = .seconds(600)
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    let clock = ContinuousClock()
    let start = clock.now
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(clock.now - start < .seconds(300), "the only file waited out the 600 s group window")
    #expect(fixture.destinationContents("file.bin") == body)
  }

  @Test func finishedFilesWaitForCompanyOnlyWhereTheyAreFlushed() {
    // Without flushes a busy finisher gathers the next batch by itself; waiting only adds latency.
    var configuration = fixture.configuration()
    #expect(configuration.effectiveGroupWindow == .zero)
    configuration.synchronizesFiles = true
    #expect(configuration.effectiveGroupWindow == DownloadSessionConfiguration.flushGroupWindow)
    configuration.settleGroupWindow = .milliseconds(9)
    #expect(configuration.effectiveGroupWindow == .milliseconds(9))
  }

  @Test func sameDownloadAgainReturnsTheReattachedTask() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    var configuration = fixture.configuration()
    let first = try DownloadSession(configuration: configuration)
    let task = try first.downloadTask(with: server.url())
    task.resume()
    await first.waitForProgress(of: task, atLeast: 100_000)
    first.invalidate()
    server.setMode(.normal)
    configuration.resumesReattachedTasks = false
    let second = try DownloadSession(configuration: configuration)
    let again = try second.downloadTask(with: server.url())
    #expect(again.id == task.id)
    #expect(again.state == .suspended)
    again.resume()
    #expect(await again.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
  }

  /// The helper executable built next to the tests.
  static var fetchTool: URL? {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    return ["debug", "release"].map { root.appendingPathComponent(".build/\($0)/protfs-fetch") }
      .first { FileManager.default.isExecutableFile(atPath: $0.path) }
  }

  @Test(.enabled(if: fetchTool != nil, "protfs-fetch is built with the tests"))
  func killedProcessResumesWhenTheSameDownloadRunsAgain() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    let tool = try #require(Self.fetchTool)
    let arguments = [
      "--store", fixture.storePath, "--temp", fixture.temporaryDirectory, "--to", fixture.destinationDirectory,
      "--session", "killed", "--persist-ms", "0", server.url().absoluteString,
    ]
    let first = TestProcess()
    first.executableURL = tool
    first.arguments = arguments + ["--progress"]
    let output = Pipe()
    first.standardOutput = output
    try first.start()
    // The first progress line says bytes arrived; the store has them once the engine's next
    // snapshot is committed, which only the store itself can tell.
    let reader = output.fileHandleForReading
    let line = await offPool { reader.availableData }
    #expect(!line.isEmpty, "protfs-fetch ended before reporting progress")
    if line.isEmpty { return }
    let store = try DownloadStore(path: fixture.storePath)
    let deadline = ContinuousClock.now + .seconds(20)
    while ContinuousClock.now < deadline {
      // The store may count bytes still staged in memory: the kill must also find some in the
      // temp file, or the next run rightly starts from byte 0.
      if let record = try store.tasks(session: "killed").first, record.bytesReceived > 0,
        let name = record.temporaryFileName,
        let size = try? FileManager.default.attributesOfItem(
          atPath: fixture.temporaryDirectory + "/" + name)[.size] as? Int, size > 0
      {
        break
      }
      try await Task.sleep(for: .milliseconds(5))
    }
    kill(first.processIdentifier, SIGKILL)
    await offPool { first.waitUntilExit() }
    let stored = try #require(try DownloadStore(path: fixture.storePath).tasks(session: "killed").first)
    #expect(stored.state == .running)
    #expect(stored.bytesReceived > 0)
    #expect(fixture.temporaryFiles.count == 1)

    server.setMode(.normal)
    let second = TestProcess()
    second.executableURL = tool
    second.arguments = arguments
    try second.start()
    await offPool { second.waitUntilExit() }
    #expect(second.terminationStatus == 0)
    #expect(fixture.destinationContents("file.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
    let range = try #require(server.requests.last?.headers["range"])
    #expect(range != "bytes=0-")
    let tasks = try DownloadStore(path: fixture.storePath).tasks(session: "killed")
    #expect(tasks.map(\.state) == [.completed])
  }

  @Test func aLiveSessionKeepsItsTasks() throws {
    let first = try DownloadSession(configuration: fixture.configuration())
    let task = try first.downloadTask(with: URL(string: "http://127.0.0.1:9/a.bin")!)
    let second = try DownloadSession(configuration: fixture.configuration())
    #expect(second.task(id: task.id) == nil)
    #expect(second.allTasks.isEmpty)
    first.invalidate()
    let third = try DownloadSession(configuration: fixture.configuration())
    #expect(third.task(id: task.id)?.state == .suspended)
  }

  @Test func sessionOfAnotherBundleIsRefused() throws {
    _ = try DownloadSession(configuration: fixture.configuration(identifier: "shared"))
    var other = fixture.configuration(identifier: "shared")
    other.bundleID = "com.example.other"
    #expect(throws: ProtFSError.self) { try DownloadSession(configuration: other) }
  }

  @Test func storeIsSafeWithConcurrentWriters() async throws {
    let path = fixture.storePath
    let setup = try DownloadSession(configuration: fixture.configuration(identifier: "busy"))
    setup.invalidate()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for worker in 0..<4 {
        group.addTask {
          // A store per worker: separate SQLite connections, as separate processes have.
          var configuration = fixture.configuration(identifier: "busy-\(worker)")
          configuration.storePath = path
          let session = try DownloadSession(configuration: configuration)
          for batch in 0..<10 {
            let requests = (0..<20).map {
              DownloadRequest(url: URL(string: "http://127.0.0.1:9/w\(worker)-\(batch)-\($0).bin")!)
            }
            let tasks = try session.downloadTasks(with: requests)
            tasks.first?.taskDescription = "batch \(batch)"
          }
          session.invalidate()
        }
      }
      try await group.waitForAll()
    }
    let all = try DownloadStore(path: path).tasks()
    #expect(all.count == 4 * 10 * 20)
    #expect(all.filter { $0.taskDescription != nil }.count == 40)
  }

  @Test func aWriterWaitsForAnotherConnectionsLockOnlyUntilItsTimeout() throws {
    let holder = try SQLiteDatabase(path: fixture.storePath)
    try holder.execute("CREATE TABLE IF NOT EXISTS notes(text)")
    try holder.execute("BEGIN IMMEDIATE")
    let waiter = try SQLiteDatabase(path: fixture.storePath, busyTimeoutMilliseconds: 50)
    #expect(throws: ProtFSError.self) { try waiter.execute("INSERT INTO notes VALUES ('waited')") }
    try holder.execute("COMMIT")
    try waiter.execute("INSERT INTO notes VALUES ('waited')")
    let count = try waiter.transaction { connection throws(ProtFSError) in
      try connection.query("SELECT count(*) FROM notes")
    }
    #expect(count.first?.first == .integer(1))
  }

  @Test func aLargeLogLeftByEarlierProcessesIsCheckpointedByTheNextOpen() throws {
    let path = fixture.storePath
    do {
      // Many small transactions, as a long download list's group commits make.
      let session = try DownloadSession(configuration: fixture.configuration(identifier: "log"))
      for batch in 0..<150 {
        _ = try session.downloadTasks(
          with: (0..<4).map { DownloadRequest(url: URL(string: "http://127.0.0.1:9/\(batch)-\($0).bin")!) })
      }
      session.invalidate()
    }
    func logSize() -> Int { (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0 }
    // Closing leaves the log as it is (no flushes at the end of a command)...
    #expect(logSize() > 1 << 20)
    // ...and the next open folds it into the database, so later commands do not replay it.
    let store = try DownloadStore(path: path)
    #expect(logSize() == 0)
    #expect(try store.tasks(session: "log").count == 600)
  }

  @Test func cancelWithResumeDataLeavesTheTempFileNamedOnTheTask() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    _ = try #require(await task.cancelByProducingResumeData())
    // The cache manager must not take the resume data's temp file for an orphan.
    let stored = try #require(try session.store.task(id: task.id))
    #expect(stored.state == .failed)
    #expect(stored.temporaryFileName == fixture.temporaryFiles.first)
  }

  @Test func requestsFromAnotherProcessReachTheOwningSession() async throws {
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 256 * 1024))
    defer { server.stop() }
    var configuration = fixture.configuration()
    configuration.accessCheckInterval = .milliseconds(10)
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    // Another connection to the store stands for `protfs tasks suspend ID` in another process.
    let other = try DownloadStore(path: fixture.storePath)
    #expect(try other.isOwnedByLiveSession(task: task.id))
    try other.request(.suspend, task: task.id)
    await session.waitForEvent {
      if case .suspended(task.id) = $0 { return true } else { return false }
    }
    #expect(fixture.temporaryFiles.count == 1)
    server.setMode(.normal)
    try other.request(.resume, task: task.id)
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("file.bin") == body)
    // A completed task leaves the session's lease at once, not when the session ends.
    #expect(try !other.isOwnedByLiveSession(task: task.id))
    #expect(throws: ProtFSError.self) { try other.request(.cancel, task: 999) }
  }

  @Test func aTaskWhoseOwnersPidAnotherProcessNowHoldsIsReattached() throws {
    let first = try DownloadSession(configuration: fixture.configuration())
    let task = try first.downloadTask(with: URL(string: "http://127.0.0.1:9/a.bin")!)
    first.invalidate()
    let store = try DownloadStore(path: fixture.storePath)
    let database = try SQLiteDatabase(path: fixture.storePath)
    func claim(by owner: String) throws {
      try database.execute("UPDATE tasks SET owner = '\(owner)', owner_pid = \(getpid()) WHERE id = \(task.id)")
    }
    // A claim by this (live) process as it is now, and one written before claims named a start time.
    try claim(by: DownloadStore.makeOwner())
    #expect(try store.isOwnedByLiveSession(task: task.id))
    try claim(by: "\(getpid())-\(UUID().uuidString)")
    #expect(try store.isOwnedByLiveSession(task: task.id))
    // A session that died, whose pid this process now holds: it started at another time.
    try claim(by: "\(getpid())-t1-\(UUID().uuidString)")
    #expect(try !store.isOwnedByLiveSession(task: task.id))
    let second = try DownloadSession(configuration: fixture.configuration())
    defer { second.invalidate() }
    #expect(second.task(id: task.id) != nil)
  }

  @Test func requestLeftForAnUnownedTaskIsAppliedOnReattach() async throws {
    let first = try DownloadSession(configuration: fixture.configuration())
    let task = try first.downloadTask(with: URL(string: "http://127.0.0.1:9/a.bin")!)
    first.invalidate()
    let store = try DownloadStore(path: fixture.storePath)
    #expect(try !store.isOwnedByLiveSession(task: task.id))
    try store.request(.cancel, task: task.id)
    let second = try DownloadSession(configuration: fixture.configuration())
    let reattached = try #require(second.task(id: task.id))
    #expect(await reattached.waitUntilSettled() == .failed)
    #expect(reattached.error?.code == .cancelled)
  }
}
