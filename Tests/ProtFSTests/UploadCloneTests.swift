import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// Where the file system clones (XFS with reflinks here), an upload's snapshot is a clone of the
/// app's file: no byte copied, the extents shared until either file is written, each file keeping
/// its own class (docs/semantics.md §5).
@Suite(.timeLimit(.minutes(2))) struct UploadCloneTests {
  let app = UploadTests().app

  /// A device on a new XFS, with the app's cache initialised (its Uploads directory then has class
  /// none) and `bytes` in Documents/report.bin, of class complete.
  func setUp(_ fileSystem: ReflinkFileSystem, bytes: [UInt8]) throws -> (TestDevice, DownloadSession, String) {
    let t = try TestDevice(directory: fileSystem.mountpoint)
    let (session, path) = try UploadTests().setUp(t, bytes: bytes)
    _ = try t.device.initCache(try BundleID(app))
    try t.device.setClass(.complete, of: try t.device.resolve(path))
    return (t, session, path)
  }

  /// The snapshots in the app's Uploads directory, as absolute paths.
  func snapshots(_ t: TestDevice) -> [String] {
    UploadTests().snapshots(t).map {
      t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Uploads/\(app)/\($0)")
    }
  }

  @Test func theSnapshotIsACloneThatKeepsTheUploadsClassAndWhatTheFileWasWhenTheTaskWasMade() async throws {
    let fileSystem = try await ReflinkFileSystem.make()
    defer { fileSystem.remove() }
    let server = try UploadServer()
    defer { server.stop() }
    // Larger than the threshold above which a copy would run on a thread while the task sends.
    let original = UploadSnapshotTests.large(0x33)
    let (t, session, path) = try setUp(fileSystem, bytes: original)
    defer { session.invalidate() }
    // A copy calls this hook after each of its passes; a clone makes none.
    let passes = Mutex(0)
    UploadSnapshot.passHooks.withLock { $0[path] = { _ in passes.withLock { $0 += 1 } } }
    defer { _ = UploadSnapshot.passHooks.withLock { $0.removeValue(forKey: path) } }
    let task = try session.uploadTask(with: UploadRequest(url: server.url("put")), fromFile: path)
    let snapshot = try #require(snapshots(t).first, "no snapshot in the Uploads directory")
    #expect(try await ReflinkFileSystem.sharesAllExtents(snapshot), "the snapshot is not a clone of \(path)")
    #expect(try await ReflinkFileSystem.sharesAllExtents(path))
    #expect(t.rawClass(snapshot) == "NSFileProtectionNone")
    #expect(t.rawClass(path) == "NSFileProtectionComplete")
    #expect(t.mode(snapshot) == 0o600)
    #expect(task.countOfBytesExpectedToSend == Int64(original.count))
    // The app rewrites its file before the task runs: its blocks are copied on write, and the
    // snapshot keeps what the file was.
    let changed = UploadSnapshotTests.large(0x44)
    UploadSnapshotTests.rewrite(path, with: changed)
    // XFS copies on write at write-back: the file's new blocks exist once it is synced.
    let fd = open(path, O_RDONLY)
    #expect(fd >= 0 && fsync(fd) == 0)
    close(fd)
    #expect(try await !ReflinkFileSystem.sharesAllExtents(snapshot))
    task.resume()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    let reply = try JSONDecoder().decode(UploadTests.Reply.self, from: try #require(task.responseBody))
    #expect(reply.received == original.count && reply.sha256 == UploadTests.hex(original))
    #expect(passes.withLock { $0 } == 0, "the snapshot was copied, not cloned")
    #expect(snapshots(t).isEmpty)
    #expect(t.rawClass(path) == "NSFileProtectionComplete")
  }

  #if DEBUG
    @Test func aCloneThatFailsForAnotherReasonThanTheFileSystemFailsTheTaskAndLeavesNothing() async throws {
      let fileSystem = try await ReflinkFileSystem.make()
      defer { fileSystem.remove() }
      let (t, session, path) = try setUp(fileSystem, bytes: DownloadFixture.bytes(300_000))
      defer { session.invalidate() }
      let faults = SyscallFaults()
      faults.fail(.cloneFile, with: EIO)
      let error = #expect(throws: ProtFSError.self) {
        try faults.during { () throws(ProtFSError) in
          try session.uploadTask(with: UploadRequest(url: URL(string: "http://127.0.0.1:9/")!), fromFile: path)
        }
      }
      #expect(faults.injectedCount(.cloneFile) == 1)
      #expect(error?.errno == EIO && error?.message.contains(path) == true, "\(String(describing: error))")
      #expect(snapshots(t).isEmpty && session.allTasks.isEmpty)
    }

    @Test func whereTheCloneIsRefusedTheSnapshotIsCopied() async throws {
      let fileSystem = try await ReflinkFileSystem.make()
      defer { fileSystem.remove() }
      let (t, session, path) = try setUp(fileSystem, bytes: DownloadFixture.bytes(300_000))
      defer { session.invalidate() }
      let faults = SyscallFaults()
      faults.fail(.cloneFile, with: EOPNOTSUPP)
      let task = try faults.during { () throws(ProtFSError) in
        try session.uploadTask(with: UploadRequest(url: URL(string: "http://127.0.0.1:9/")!), fromFile: path)
      }
      // (On XFS, copy_file_range clones too; on ext4 it copies.)
      #expect(faults.injectedCount(.cloneFile) == 1)
      let snapshot = try #require(snapshots(t).first)
      #expect(try Data(contentsOf: URL(fileURLWithPath: snapshot)) == Data(DownloadFixture.bytes(300_000)))
      #expect(t.rawClass(snapshot) == "NSFileProtectionNone")
      task.cancel()
    }
  #endif
}
