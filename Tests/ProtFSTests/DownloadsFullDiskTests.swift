import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A download that meets a full disk, at each point where it can (docs/semantics.md §5, "A full
/// disk"): making its temp file, writing it, moving the finished file into place, and the task
/// store. Each is reached deterministically: a small tmpfs where the disk really fills, planned
/// ENOSPC where only one call may fail.
@Suite("Full disk", .serialized, .timeLimit(.minutes(1)))
struct DownloadsFullDiskTests {
  let nginx: NginxServer
  let fixture: DownloadFixture

  init() throws {
    nginx = try NginxServer()
    fixture = try DownloadFixture()
  }

  private func configuration() -> DownloadSessionConfiguration {
    var configuration = fixture.configuration()
    configuration.progressPersistInterval = .seconds(60)
    return configuration
  }

  /// A fresh directory in the fixture with a tmpfs of `size` on it, unmounted by `unmount`.
  private func smallDisk(_ name: String, size: String) throws -> String {
    let path = fixture.directory.appendingPathComponent(name).path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    try #require(
      mount("none", path, "tmpfs", 0, "size=" + size) == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    return path
  }

  private func unmount(_ path: String) { umount2(path, Int32(MNT_DETACH)) }

  /// Fills the filesystem of `directory` to the last byte with a file named `filler`.
  private func fill(_ directory: String) async {
    let filler = directory + "/filler"
    let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    #expect(fd >= 0)
    var block = [UInt8](repeating: 0, count: 4096)
    var written = 0
    while write(fd, &block, block.count) > 0 { written += block.count }
    #expect(errno == ENOSPC && written > 0)
    close(fd)
  }

  /// Folds the store's log into its database, so that every later write of the store needs new
  /// space (SQLite reuses a log's room).
  private func checkpoint(_ store: String) async throws {
    let folded = try await Protfs.runProgram(
      "/usr/bin/sqlite3", ["-cmd", ".timeout 10000", store, "PRAGMA wal_checkpoint(TRUNCATE);"])
    #expect(folded.stdout == "0|0|0\n", "\(folded)")
  }

  /// Resumes `task` with `faults` planned on the session's threads and waits for it to settle.
  private func run(_ task: DownloadTask, _ faults: SyscallFaults? = nil) async -> DownloadState {
    if let faults { faults.during { task.resume() } } else { task.resume() }
    return await task.waitUntilSettled()
  }

  // MARK: The temp file

  @Test func aTempFileThatCannotBeMadeFailsTheTaskWithENOSPC() async throws {
    let faults = SyscallFaults()
    // The unnamed file, then a named one, as the engine tries them.
    faults.fail(.tmpfile, with: ENOSPC, times: 10)
    faults.fail(.open, with: ENOSPC, times: 10)
    let session = try faults.during { () throws(ProtFSError) in try DownloadSession(configuration: configuration()) }
    let url = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "made.bin")
    let task = try session.downloadTask(with: url)
    #expect(await run(task, faults) == .failed)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC, "\(error)")
    #expect(
      error.message.contains("No space left on device") && error.message.contains(fixture.temporaryDirectory),
      "\(error)")
    #expect(fixture.temporaryFiles.isEmpty && fixture.destinationFiles.isEmpty)
  }

  @Test func aDiskThatFillsWhileTheBodyIsWrittenFailsTheTaskWithENOSPCAndKeepsNothing() async throws {
    let full = try smallDisk("temp", size: "64k")
    defer { unmount(full) }
    var configuration = configuration()
    configuration.temporaryDirectory = full
    let session = try DownloadSession(configuration: configuration)
    // Larger than the staging buffer: written by the engine as it arrives, not at the end.
    let url = try nginx.put(Data(DownloadFixture.bytes(1 << 20)), at: "large.bin")
    let task = try session.downloadTask(with: url)
    #expect(await run(task) == .failed)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC, "\(error)")
    #expect(error.message.contains(url.absoluteString) && error.message.contains("No space left on device"), "\(error)")
    #expect(error.remedy != nil, "\(error)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: full).isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(try session.store.task(id: task.id)?.temporaryFileName == nil)
  }

  // MARK: Placement

  @Test func aFullDestinationOnAnotherFilesystemFailsTheTaskWithENOSPCAndPlacesNothing() async throws {
    let full = try smallDisk("destination", size: "64k")
    defer { unmount(full) }
    var configuration = configuration()
    configuration.destinationDirectory = full
    let session = try DownloadSession(configuration: configuration)
    let url = try nginx.put(Data(DownloadFixture.bytes(200_000)), at: "copied.bin")
    let task = try session.downloadTask(with: url)
    #expect(await run(task) == .failed)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC && error.message.contains(full), "\(error)")
    // Neither the file nor the copy that was to become it.
    #expect(try FileManager.default.contentsOfDirectory(atPath: full).isEmpty)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test(arguments: [Syscall.link, .rename])
  func aPlacementCallThatFindsTheDiskFullFailsTheTaskWithENOSPC(_ call: Syscall) async throws {
    let faults = SyscallFaults()
    faults.fail(call, with: ENOSPC, times: 10)
    // A body larger than the staging buffer is named in the temp directory and renamed into place;
    // a small one is linked there without ever being named.
    let size = call == .rename ? 1 << 20 : 10_000
    let session = try faults.during { () throws(ProtFSError) in try DownloadSession(configuration: configuration()) }
    let url = try nginx.put(Data(DownloadFixture.bytes(size)), at: "placed.bin")
    let task = try session.downloadTask(with: url)
    #expect(await run(task, faults) == .failed)
    #expect(faults.injectedCount(call) > 0)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC && error.message.contains("No space left on device"), "\(error)")
    #expect(fixture.destinationFiles.isEmpty, "\(fixture.destinationFiles)")
    #expect(fixture.temporaryFiles.isEmpty, "\(fixture.temporaryFiles)")
  }

  @Test func aLabelThePlacedFileCannotGetFailsTheTaskWithENOSPCAndPlacesNothing() async throws {
    let t = try TestDevice()
    let bundle = try BundleID("com.example.full")
    try t.device.createContainer(bundle)
    _ = try t.device.initCache(bundle, protectionClass: ProtectionClass.none)
    let container = t.device.container(bundle)
    // A destination of another class than the temp file's: placing the file relabels it.
    try t.device.setClass(.complete, of: try container.path("Documents"))
    var configuration = try t.device.downloadConfiguration(
      bundleID: bundle, identifier: "full", destination: try container.path("Documents"))
    configuration.maximumRetries = 0
    let faults = SyscallFaults()
    // The temp file's own label is written when it is made; the placed file's is the next.
    faults.pass(.setxattr, times: 1)
    faults.fail(.setxattr, with: ENOSPC, times: 10)
    let session = try faults.during { () throws(ProtFSError) in try DownloadSession(configuration: configuration) }
    let url = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "labelled.bin")
    let task = try session.downloadTask(with: url)
    #expect(await run(task, faults) == .failed)
    #expect(faults.injectedCount(.setxattr) > 0)
    let error = try #require(task.error)
    #expect(error.errno == ENOSPC && error.message.contains("No space left on device"), "\(error)")
    let documents = t.containerPath("com.example.full", "Documents")
    #expect(try FileManager.default.contentsOfDirectory(atPath: documents).isEmpty)
  }

  // MARK: The task store

  @Test func aFullStoreRefusesANewTaskWithTheStoresError() async throws {
    let full = try smallDisk("store", size: "256k")
    defer { unmount(full) }
    var configuration = configuration()
    configuration.storePath = full + "/downloads.sqlite"
    let session = try DownloadSession(configuration: configuration)
    try await checkpoint(configuration.storePath)
    await fill(full)
    let url = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "refused.bin")
    #expect {
      _ = try session.downloadTask(with: url)
    } throws: { error in
      let error = error as? ProtFSError
      return error?.message.contains("database or disk is full") == true
        && error?.message.contains(configuration.storePath) == true && error?.remedy != nil
    }
    #expect(fixture.temporaryFiles.isEmpty && fixture.destinationFiles.isEmpty)
  }

  @Test func aTaskThatEndsWhileTheStoreIsFullEndsAndIsRecordedOnceThereIsSpace() async throws {
    let full = try smallDisk("store", size: "256k")
    defer { unmount(full) }
    var configuration = configuration()
    configuration.storePath = full + "/downloads.sqlite"
    let session = try DownloadSession(configuration: configuration)
    let url = try nginx.put(Data(DownloadFixture.bytes(10_000)), at: "ended.bin")
    let task = try session.downloadTask(with: url)
    try await checkpoint(configuration.storePath)
    await fill(full)
    #expect(await run(task) == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationContents("ended.bin") == DownloadFixture.bytes(10_000))
    // The store still shows the task as it was, until it has room.
    #expect(try session.store.task(id: task.id)?.state == .suspended)
    unlink(full + "/filler")
    let recorded = await offPool { () -> DownloadState? in
      let deadline = Date() + 10
      while Date() < deadline {
        if let state = try? session.store.task(id: task.id)?.state, state != .suspended { return state }
        usleep(10_000)
      }
      return nil
    }
    #expect(recorded == .completed)
  }
}
