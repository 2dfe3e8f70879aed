import Foundation
import ProtFSDownloads
import ProtFSLock
import ProtFSTestSupport
import Testing

@testable import ProtFS

/// A download's directories swapped for symbolic links while it runs or waits: nothing lands
/// outside the device and the task fails naming the directory. And the files a download makes
/// carry their own class (and the container owner's uid and gid when protfs runs as root).
@Suite(.timeLimit(.minutes(1))) struct DownloadsContainmentTests {
  let app = "com.example.app"

  /// A session downloading from `server` into Documents, and an empty directory outside the device.
  func setUp(
    _ t: TestDevice, defaultClass: ProtectionClass? = nil, downloadsClass: ProtectionClass? = nil,
    usesOpenat2: Bool = true
  ) throws -> (configuration: DownloadSessionConfiguration, outside: String) {
    let bundle = try BundleID(app)
    try t.device.createContainer(bundle, defaultClass: defaultClass)
    if let downloadsClass { _ = try t.device.initCache(bundle, protectionClass: downloadsClass) }
    var configuration = try t.device.downloadConfiguration(
      bundleID: bundle, identifier: "containment", destination: try t.device.container(bundle).path("Documents"))
    configuration.maximumRetries = 0
    configuration.fileSystem = DeviceDownloadFileSystem(device: t.device, usesOpenat2: usesOpenat2)
    let outside = try TestDevice.makeTemporaryDirectory(prefix: "protfs-outside")
    return (configuration, outside)
  }

  /// Starts downloading `data.bin` (`bytes` long) from a fault server in `mode` and returns once
  /// 100,000 bytes arrived; the caller invalidates the session, then stops the server.
  func startTransfer(_ configuration: DownloadSessionConfiguration, bytes: Int, mode: FaultServer.Mode)
    async throws -> (server: FaultServer, session: DownloadSession, task: DownloadTask)
  {
    let server = try FaultServer(body: DownloadFixture.bytes(bytes), mode: mode)
    let session: DownloadSession
    do {
      session = try DownloadSession(configuration: configuration)
    } catch {
      server.stop()
      throw error
    }
    let task: DownloadTask
    do {
      task = try session.downloadTask(with: server.url("data.bin"))
    } catch {
      session.invalidate()
      server.stop()
      throw error
    }
    task.resume()
    await session.waitForProgress(of: task, atLeast: 100_000)
    return (server, session, task)
  }

  /// Every regular file below `directory`.
  func files(below directory: String) -> [String] {
    let walker = FileManager.default.enumerator(atPath: directory)
    var found: [String] = []
    while let name = walker?.nextObject() as? String {
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory),
        !isDirectory.boolValue
      {
        found.append(name)
      }
    }
    return found
  }

  /// Moves `path` into `outside` and puts a symlink to `outside/target` in its place.
  func swapForSymlink(_ path: String, outside: String) throws {
    try FileManager.default.createDirectory(atPath: outside + "/target", withIntermediateDirectories: true)
    try #require(rename(path, outside + "/moved") == 0)
    try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: outside + "/target")
  }

  /// With `openat2` and with the component walk that stands in for it on older kernels.
  @Test(arguments: [true, false])
  func theDestinationSwappedForASymlinkMidDownloadFailsTheTask(usesOpenat2: Bool) async throws {
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t, usesOpenat2: usesOpenat2)
    defer { TestDevice.removeTree(outside) }
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 400_000, mode: .gateAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    let documents = t.containerPath(app, "Documents")
    try swapForSymlink(documents, outside: outside)
    server.openGate()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(files(below: outside).isEmpty, "\(files(below: outside))")
    let message = task.error?.description ?? ""
    #expect(message.contains(documents) && message.contains("symbolic link"), "\(message)")
    // The temp file went with the failed task.
    #expect(files(below: configuration.temporaryDirectory).isEmpty)
  }

  /// The session holds the destination it opened for an earlier file: moved out of the device
  /// afterwards, it is where the next renames land. The check after them takes every such file
  /// back out (several finishing together are checked as one batch) and fails their tasks; a file
  /// of a later batch, after the check dropped the moved directory, meets the symlink at its path
  /// and is refused there. Either way nothing stays outside.
  @Test func aHeldDestinationMovedOutOfTheDeviceGetsNoneOfTheNextFiles() async throws {
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t)
    defer { TestDevice.removeTree(outside) }
    let server = try FaultServer(body: DownloadFixture.bytes(400_000))
    defer { server.stop() }
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let first = try session.downloadTask(with: server.url("first.bin"))
    first.resume()
    #expect(await first.waitUntilSettled() == .completed)
    server.setMode(.gateAfter(bytes: 100_000))
    var tasks: [DownloadTask] = []
    for name in ["a.bin", "b.bin", "c.bin"] {
      let task = try session.downloadTask(with: server.url(name))
      task.resume()
      tasks.append(task)
    }
    for task in tasks { await session.waitForProgress(of: task, atLeast: 100_000) }
    let documents = t.containerPath(app, "Documents")
    try swapForSymlink(documents, outside: outside)
    server.openGate()
    var messages: [String] = []
    for task in tasks {
      #expect(await task.waitUntilSettled() == .failed)
      let message = task.error?.description ?? ""
      #expect(
        message.contains(documents) && (message.contains("was moved") || message.contains("symbolic link")),
        "\(message)")
      messages.append(message)
    }
    // The first to finish lands in the held directory, and the check takes it back out.
    #expect(messages.contains { $0.contains("was moved") }, "\(messages)")
    // Only the file placed before the move went with the directory.
    #expect(files(below: outside) == ["moved/first.bin"], "\(files(below: outside))")
    #expect(files(below: configuration.temporaryDirectory).isEmpty)
  }

  @Test(arguments: [true, false])
  func theTempDirectorySwappedForASymlinkMidDownloadFailsTheTask(usesOpenat2: Bool) async throws {
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t, usesOpenat2: usesOpenat2)
    defer { TestDevice.removeTree(outside) }
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 400_000, mode: .gateAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    // The Downloads directory, with the open temp file in it, leaves the device; a link takes its place.
    try swapForSymlink(configuration.temporaryDirectory, outside: outside)
    server.openGate()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(files(below: outside).isEmpty, "\(files(below: outside))")
    #expect(files(below: t.containerPath(app, "Documents")).isEmpty)
    let message = task.error?.description ?? ""
    #expect(message.contains(configuration.temporaryDirectory) && message.contains("symbolic link"), "\(message)")
  }

  @Test func aStalledTransferStopsAsSoonAsItsTempDirectoryIsSwapped() async throws {
    let t = try TestDevice()
    var (configuration, outside) = try setUp(t)
    defer { TestDevice.removeTree(outside) }
    configuration.accessCheckInterval = .milliseconds(10)
    // The server never sends the rest: only the swap can end this transfer.
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 400_000, mode: .stallAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    try swapForSymlink(configuration.temporaryDirectory, outside: outside)
    #expect(await task.waitUntilSettled() == .failed)
    #expect(files(below: outside).isEmpty, "\(files(below: outside))")
    let message = task.error?.description ?? ""
    #expect(message.contains("stopped") && message.contains(configuration.temporaryDirectory), "\(message)")
  }

  @Test func aTempFileHardLinkedOutsideStopsTheTransferAndIsNotPlaced() async throws {
    let t = try TestDevice()
    var (configuration, outside) = try setUp(t)
    defer { TestDevice.removeTree(outside) }
    configuration.accessCheckInterval = .milliseconds(10)
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 400_000, mode: .stallAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    let temporary = try #require(task.temporaryLocation?.path)
    try #require(link(temporary, outside + "/linked") == 0)
    #expect(await task.waitUntilSettled() == .failed)
    let message = task.error?.description ?? ""
    #expect(message.contains("hard link") && message.contains(temporary), "\(message)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(app, "Documents/data.bin")))
    // The outside name is the linker's: it keeps the bytes written before the link, no more.
    let size = (try? FileManager.default.attributesOfItem(atPath: outside + "/linked")[.size] as? Int) ?? 0
    #expect(size < 400_000)
  }

  @Test func theDestinationOfATaskWaitingForUnlockSwappedBeforeUnlockFailsTheTask() async throws {
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t, defaultClass: .complete, downloadsClass: ProtectionClass.none)
    defer { TestDevice.removeTree(outside) }
    let server = try FaultServer(body: DownloadFixture.bytes(50_000))
    defer { server.stop() }
    _ = try LockController(device: t.device).lock()
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: server.url("data.bin"))
    task.resume()
    #expect(await task.waitUntilSettled() == .waitingForUnlock)
    session.invalidate()
    let documents = t.containerPath(app, "Documents")
    try swapForSymlink(documents, outside: outside)
    _ = try LockController(device: t.device).unlock()
    let settled = try t.device.completeWaitingDownloads()
    #expect(settled.map(\.state) == [.failed])
    #expect(files(below: outside).isEmpty, "\(files(below: outside))")
    let message = settled.first?.errorMessage ?? ""
    #expect(message.contains(documents) && message.contains("symbolic link"), "\(message)")
    #expect(files(below: configuration.temporaryDirectory).isEmpty)
  }

  @Test func theTempFileAndThePlacedFileCarryTheirDirectoriesClasses() async throws {
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t, defaultClass: .complete, downloadsClass: ProtectionClass.none)
    TestDevice.removeTree(outside)
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 300_000, mode: .gateAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    let temporary = try #require(task.temporaryLocation?.path)
    #expect(t.rawClass(temporary) == "NSFileProtectionNone")
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(t.rawClass(t.containerPath(app, "Documents/data.bin")) == "NSFileProtectionComplete")
  }

  @Test func smallFilesMadeAheadAndLinkedIntoPlaceCarryTheirDestinationsClassAndOwner() async throws {
    // Temp files made in batches by the finisher (labelled none, as their Downloads directory) and
    // linked straight into Documents (complete), placed in batches: each gets Documents' class.
    let t = try TestDevice()
    var (configuration, outside) = try setUp(t, defaultClass: .complete, downloadsClass: ProtectionClass.none)
    TestDevice.removeTree(outside)
    configuration.maximumConnectionsPerHost = 8
    let asRoot = geteuid() == 0
    if asRoot { #expect(chown(t.containerPath(app), 4321, 4322) == 0) }
    let server = try FaultServer(body: DownloadFixture.bytes(10_000), mode: .normal)
    defer { server.stop() }
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let tasks = try (0..<120).map { try session.downloadTask(with: server.url("small-\($0).bin")) }
    for task in tasks { task.resume() }
    for task in tasks { #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))") }
    #expect(session.core.engine.temporaryFiles.taken > 0)
    for index in 0..<120 {
      let path = t.containerPath(app, "Documents/small-\(index).bin")
      #expect(t.rawClass(path) == "NSFileProtectionComplete", "\(path)")
      var status = stat()
      #expect(lstat(path, &status) == 0 && status.st_nlink == 1)
      if asRoot { #expect(status.st_uid == 4321 && status.st_gid == 4322, "\(path)") }
    }
  }

  @Test func asRootTheFilesBelongToTheContainersOwner() async throws {
    try #require(geteuid() == 0, "needs root to hand files to another user")
    let t = try TestDevice()
    let (configuration, outside) = try setUp(t)
    TestDevice.removeTree(outside)
    #expect(chown(t.containerPath(app), 4321, 4322) == 0)
    let (server, session, task) = try await startTransfer(
      configuration, bytes: 300_000, mode: .gateAfter(bytes: 100_000))
    defer {
      session.invalidate()
      server.stop()
    }
    let temporary = try #require(task.temporaryLocation?.path)
    var status = stat()
    #expect(lstat(temporary, &status) == 0 && status.st_uid == 4321 && status.st_gid == 4322)
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(lstat(t.containerPath(app, "Documents/data.bin"), &status) == 0)
    #expect(status.st_uid == 4321 && status.st_gid == 4322)
  }
}
