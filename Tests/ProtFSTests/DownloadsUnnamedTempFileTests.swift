import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// Temp files made without a name (`O_TMPFILE`): a download that finishes at once is linked
/// straight into its destination, and the file gets its name in the temp directory whenever
/// something must find it there (docs/semantics.md §5).
@Suite("Unnamed temp files", .timeLimit(.minutes(1)))
struct DownloadsUnnamedTempFileTests {
  let nginx: NginxServer
  let fixture: DownloadFixture
  let small = DownloadFixture.bytes(10_000)

  init() throws {
    nginx = try NginxServer()
    fixture = try DownloadFixture()
  }

  /// The fixture's configuration with progress written to the store only once a minute, so that
  /// no transfer of these tests is named for that.
  private func configuration(_ policy: (any DownloadAccessPolicy)? = nil) -> DownloadSessionConfiguration {
    var configuration = fixture.configuration()
    configuration.progressPersistInterval = .seconds(60)
    if let policy { configuration.accessPolicy = policy }
    return configuration
  }

  /// Downloads `count` small files in `session`, each to completion; `faults` are planned on the
  /// engine's thread, which the first resume starts.
  private func downloadSmallFiles(_ count: Int, in session: DownloadSession, faults: SyscallFaults = SyscallFaults())
    async throws
  {
    var tasks: [DownloadTask] = []
    for index in 0..<count {
      tasks.append(try session.downloadTask(with: try nginx.put(Data(small), at: "small-\(index).bin")))
    }
    faults.during { for task in tasks { task.resume() } }
    for task in tasks { #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))") }
  }

  @Test func smallDownloadsAreLinkedIntoPlaceWithoutEverBeingNamedInTheTempDirectory() async throws {
    let watch = try DirectoryNameWatch(fixture.temporaryDirectory)
    let session = try DownloadSession(configuration: configuration())
    try await downloadSmallFiles(5, in: session)
    #expect(watch.events().isEmpty)
    #expect(fixture.destinationFiles == (0..<5).map { "small-\($0).bin" })
    for index in 0..<5 {
      #expect(fixture.destinationContents("small-\(index).bin").map { $0 == small } == true)
      var status = stat()
      #expect(stat(fixture.destinationDirectory + "/small-\(index).bin", &status) == 0 && status.st_nlink == 1)
    }
  }

  @Test func aTransferNamedInTheTempDirectoryHoldsItsFileAgainstCachePurge() async throws {
    // Larger than the staging buffer, so it is named before its first byte reaches the disk.
    let server = try FaultServer(body: DownloadFixture.bytes(300_000), mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let session = try DownloadSession(configuration: configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url("held.bin"))
    task.resume()
    await session.waitForProgress(of: task, atLeast: 1)
    let name = try #require(fixture.temporaryFiles.first)
    #expect(TemporaryFileLock.isHeld(name, in: try DirectoryHandle(path: fixture.temporaryDirectory)))
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
  }

  @Test func aRunOfSmallFilesTakesFilesMadeAheadAndLeavesFewUnused() async throws {
    var configuration = configuration()
    configuration.maximumConnectionsPerHost = 8
    let session = try DownloadSession(configuration: configuration)
    try await downloadSmallFiles(300, in: session)
    session.invalidate()
    let reserve = session.core.engine.temporaryFiles
    #expect(reserve.taken > 0)
    // Most files made ahead are taken. How many are closed unused depends on where the engine's
    // and the finisher's threads were when the last transfers started (1 to 26 here on a quiet
    // machine), and on how often the engine ran out of transfers while this test was still
    // resuming them: each time, it lets go of what it made ahead (at most a reserve). With both
    // cores busy that happened more than once (67 unused, more than the reserve's 64), so a
    // reserve is no bound; the sizing rule itself is checked exactly by
    // `theReserveMakesNoMoreThanTheQueuedTransfersNorTwiceTheLaunches`.
    #expect(
      reserve.unneeded < reserve.taken,
      "made ahead and closed unused: \(reserve.unneeded), taken: \(reserve.taken)")
  }

  @Test func theReserveMakesNoMoreThanTheQueuedTransfersNorTwiceTheLaunches() throws {
    let reserve = TemporaryFileReserve(capacity: 64, freshness: .seconds(600))
    let directory = try DirectoryHandle(path: fixture.temporaryDirectory)
    let fileSystem = PlainDownloadFileSystem()
    let policy = AllowAllDownloadAccess()
    // Nothing is made before the engine names its directory with a first launch.
    reserve.expect(100)
    reserve.refill(fileSystem: fileSystem, policy: policy)
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    // One launch since: twice that, although 100 wait.
    reserve.refill(fileSystem: fileSystem, policy: policy)
    var taken: [FileDescriptor] = []
    for _ in 0..<2 { taken += [try #require(reserve.take(in: directory, path: fixture.temporaryDirectory))] }
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    // Three launches since the refill, but only 5 transfers wait: 5.
    reserve.expect(5)
    reserve.refill(fileSystem: fileSystem, policy: policy)
    for _ in 0..<5 { taken += [try #require(reserve.take(in: directory, path: fixture.temporaryDirectory))] }
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    // Nothing waits: nothing is made, and an idle engine's files are closed.
    reserve.expect(0)
    reserve.refill(fileSystem: fileSystem, policy: policy)
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    reserve.expect(3)
    reserve.refill(fileSystem: fileSystem, policy: policy)
    reserve.drain()
    #expect(reserve.taken == 7 && reserve.unneeded == 3 && reserve.stale == 0)
    #expect(fixture.temporaryFiles.isEmpty, "unnamed files never show in the directory")
  }

  @Test func whereTheFilesystemMakesNoUnnamedFilesEachIsNamedFromTheStart() async throws {
    let watch = try DirectoryNameWatch(fixture.temporaryDirectory)
    let faults = SyscallFaults()
    faults.fail(.tmpfile, with: EOPNOTSUPP, times: 3)
    let session = try DownloadSession(configuration: configuration())
    try await downloadSmallFiles(3, in: session, faults: faults)
    #expect(faults.injectedCount(.tmpfile) == 3)
    let made = watch.events().filter { $0.mask & UInt32(IN_CREATE) != 0 }
    #expect(made.count == 3 && made.allSatisfy { $0.name.hasPrefix("CFNetworkDownload_") })
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.count == 3)
  }

  @Test func aFileFromBeforeAtTheDestinationIsReplaced() async throws {
    // A link cannot replace a name, so this file is named in the temp directory and renamed over it.
    _ = FileManager.default.createFile(
      atPath: fixture.destinationDirectory + "/small-0.bin", contents: Data("old".utf8))
    let session = try DownloadSession(configuration: configuration())
    try await downloadSmallFiles(1, in: session)
    #expect(fixture.destinationFiles == ["small-0.bin"])
    #expect(fixture.destinationContents("small-0.bin").map { $0 == small } == true)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func aSmallFileWaitingForUnlockWaitsNamedInTheTempDirectory() async throws {
    let policy = SwitchableAccessPolicy(destination: .waitForUnlock)
    let session = try DownloadSession(configuration: configuration(policy))
    let task = try session.downloadTask(with: try nginx.put(Data(small), at: "later.bin"))
    task.resume()
    #expect(await task.waitUntilSettled() == .waitingForUnlock)
    let waiting = try #require(fixture.temporaryFiles.first)
    #expect(FileManager.default.contents(atPath: fixture.temporaryDirectory + "/" + waiting) == Data(small))
    #expect(try session.store.task(id: task.id)?.temporaryFileName == waiting)
    policy.set(destination: .allow)
    #expect(session.completeWaitingTasks().map(\.id) == [task.id])
    #expect(fixture.destinationContents("later.bin").map { $0 == small } == true)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func aDelegateFindsTheSmallFinishedFileWhereItIsTold() async throws {
    let delegate = DownloadsAccessPolicyTests.RecordingDelegate()
    let session = try DownloadSession(configuration: configuration(), delegate: delegate)
    let task = try session.downloadTask(with: try nginx.put(Data(small), at: "told.bin"))
    await withCheckedContinuation { continuation in
      delegate.done.withLock { $0 = continuation }
      task.resume()
    }
    let log = delegate.log.withLock { $0 }
    #expect(log.tempExistedDuringFinish)
    #expect(log.finishedAt?.lastPathComponent.hasPrefix("CFNetworkDownload_") == true)
    #expect(fixture.destinationContents("told.bin").map { $0 == small } == true)
  }

  @Test func aFullDiskAtTheLastWriteFailsTheTaskAndKeepsNothing() async throws {
    // A body that fits the staging buffer is written at the end, by the finisher.
    let full = fixture.directory.appendingPathComponent("full").path
    try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
    try #require(mount("none", full, "tmpfs", 0, "size=64k") == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    // Detached: the session may still hold a descriptor of the directory, which a plain umount refuses.
    defer { umount2(full, Int32(MNT_DETACH)) }
    var configuration = configuration()
    configuration.temporaryDirectory = full
    let session = try DownloadSession(configuration: configuration)
    let url = try nginx.put(Data(DownloadFixture.bytes(100_000)), at: "large.bin")
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC && error.message.contains(url.absoluteString), "\(error)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: full).isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(try session.store.task(id: task.id)?.temporaryFileName == nil)
  }

  @Test func theLockChecksLetAnUnnamedFileWriteOn() async throws {
    // Without a name the file has no link: that is its own state, not "linked elsewhere".
    let server = try FaultServer(body: small, mode: .gateAfter(bytes: 2_000))
    defer { server.stop() }
    let policy = CountingAccessPolicy()
    var configuration = configuration(policy)
    configuration.accessCheckInterval = .milliseconds(10)
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url("gated.bin"))
    task.resume()
    // Three checks, unless the task ends first (as it would if a check stopped it).
    let settled = Task {
      _ = await task.waitUntilSettled()
      policy.stopWaiting()
    }
    await policy.waitForChecks(3)
    #expect(task.state == .running, "\(String(describing: task.error))")
    #expect(fixture.temporaryFiles.isEmpty)
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationContents("gated.bin").map { $0 == small } == true)
    await settled.value
  }
}

/// Allows everything, counting how often running transfers were asked whether they may write on.
final class CountingAccessPolicy: DownloadAccessPolicy {
  private let state = Mutex<
    (count: Int, stopped: Bool, waiter: (wanted: Int, continuation: CheckedContinuation<Void, Never>)?)
  >((0, false, nil))

  func canWriteTemp(in directory: String) -> DownloadAccessDecision { .allow }
  func canPlaceDestination(_ destination: String) -> DownloadAccessDecision { .allow }

  func canContinueWritingTemp(in directory: String) -> DownloadAccessDecision {
    let ready = state.withLock { s -> CheckedContinuation<Void, Never>? in
      s.count += 1
      guard let waiter = s.waiter, s.count >= waiter.wanted else { return nil }
      s.waiter = nil
      return waiter.continuation
    }
    ready?.resume()
    return .allow
  }

  /// Ends a `waitForChecks` still waiting, and every later one at once.
  func stopWaiting() {
    state.withLock { s -> CheckedContinuation<Void, Never>? in
      s.stopped = true
      defer { s.waiter = nil }
      return s.waiter?.continuation
    }?.resume()
  }

  /// Returns once running transfers were asked `count` times.
  func waitForChecks(_ count: Int) async {
    await withCheckedContinuation { continuation in
      let done = state.withLock { s -> Bool in
        if s.count >= count || s.stopped { return true }
        s.waiter = (count, continuation)
        return false
      }
      if done { continuation.resume() }
    }
  }
}

/// The names made, moved or removed in a directory since the watch began (inotify).
final class DirectoryNameWatch {
  struct Event {
    var mask: UInt32
    var name: String
  }

  private let fd: Int32

  init(_ path: String) throws {
    fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    let mask = UInt32(IN_CREATE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE)
    guard inotify_add_watch(fd, path, mask) >= 0 else {
      close(fd)
      throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
  }

  deinit { close(fd) }

  /// The events so far (read without waiting: they are queued when the change is made).
  func events() -> [Event] {
    var events: [Event] = []
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      guard count > 0 else { return events }
      var offset = 0
      buffer.withUnsafeBytes { raw in
        while offset + MemoryLayout<inotify_event>.size <= count {
          let mask = raw.load(fromByteOffset: offset + 4, as: UInt32.self)
          let length = Int(raw.load(fromByteOffset: offset + 12, as: UInt32.self))
          let start = offset + MemoryLayout<inotify_event>.size
          let bytes = raw[start..<start + length].prefix { $0 != 0 }
          events.append(Event(mask: mask, name: String(decoding: bytes, as: UTF8.self)))
          offset = start + length
        }
      }
    }
  }
}

/// `TemporaryFileReserve`: new temp files the finisher makes ahead of the engine.
@Suite struct TemporaryFileReserveTests {
  let fixture: DownloadFixture
  let directory: DirectoryHandle

  init() throws {
    fixture = try DownloadFixture()
    directory = try DirectoryHandle(path: fixture.temporaryDirectory)
  }

  @Test func filesMadeAheadAreUnnamedAndGoToTheEngineThatAskedInTheirDirectory() throws {
    let reserve = TemporaryFileReserve(capacity: 3, freshness: .seconds(60))
    // Nothing is made before the engine names the directory it makes files in.
    reserve.expect(10)
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    var taken: [FileDescriptor] = []
    while let file = reserve.take(in: directory, path: fixture.temporaryDirectory) { taken.append(file) }
    #expect(taken.count == 3)
    for file in taken {
      var status = stat()
      #expect(fstat(file.rawValue, &status) == 0 && status.st_nlink == 0 && status.st_size == 0)
      file.close()
    }
    #expect(fixture.temporaryFiles.isEmpty)
    // Another directory: what was made for the first is dropped.
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    let other = try DirectoryHandle(path: fixture.destinationDirectory)
    #expect(reserve.take(in: other, path: fixture.destinationDirectory) == nil)
  }

  @Test func noneAreMadeWhereANewTempFileIsRefusedAndNoneIsTakenStale() throws {
    let refusing = SwitchableAccessPolicy(temp: .deny(EPERM))
    let reserve = TemporaryFileReserve(capacity: 2, freshness: .seconds(60))
    reserve.expect(10)
    _ = reserve.take(in: directory, path: fixture.temporaryDirectory)
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: refusing)
    #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil)
    // Made longer ago than its freshness: closed, not handed out.
    let stale = TemporaryFileReserve(capacity: 2, freshness: .zero)
    stale.expect(10)
    _ = stale.take(in: directory, path: fixture.temporaryDirectory)
    stale.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    #expect(stale.take(in: directory, path: fixture.temporaryDirectory) == nil)
  }

  @Test func noMoreAreMadeThanTransfersWaitToStartNorThanTwiceTheLaunchesSinceTheLastRefill() throws {
    // A file made and never taken is freed unused, and each freed inode slows every new file's
    // allocation for minutes on ext4 without a journal.
    let reserve = TemporaryFileReserve(capacity: 64, freshness: .seconds(60))
    func takeAll() -> Int {
      var count = 0
      while let file = reserve.take(in: directory, path: fixture.temporaryDirectory) {
        file.close()
        count += 1
      }
      return count
    }
    // Eleven launches asked, three transfers still queued: three are made.
    for _ in 0..<11 { #expect(reserve.take(in: directory, path: fixture.temporaryDirectory) == nil) }
    reserve.expect(3)
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    #expect(takeAll() == 3)
    // A hundred queued, and the four launches since (three taken, one found none): eight.
    reserve.expect(100)
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    #expect(takeAll() == 8)
    // Nothing left to start: none.
    reserve.drain()
    reserve.refill(fileSystem: PlainDownloadFileSystem(), policy: AllowAllDownloadAccess())
    #expect(takeAll() == 0)
  }
}
