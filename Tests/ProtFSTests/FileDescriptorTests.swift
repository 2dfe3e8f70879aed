import Foundation
import ProtFSDownloads
import ProtFSFoundation
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFS

/// The descriptors this process holds on paths starting with `prefix`, read from /proc/self/fd.
/// Other tests run in parallel, so callers look for their own unique paths, never at counts.
func descriptors(on prefix: String) -> [Int32] {
  guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return [] }
  return names.compactMap { name in
    guard let fd = Int32(name),
      let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
      target.hasPrefix(prefix)
    else { return nil }
    return fd
  }
}

/// Whether `fd` is open and on the same file as `other`.
func isOpen(_ fd: Int32, sameFileAs other: Int32) -> Bool {
  var a = stat()
  var b = stat()
  return fstat(fd, &a) == 0 && fstat(other, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino
}

/// The descriptor a test opened from inside a hook.
final class Opened {
  /// The descriptor, or -1 before the hook ran.
  var fd: Int32 = -1
}

/// Each descriptor is closed exactly once, by its owner, on every path, including failures half way.
@Suite("File descriptor ownership")
struct FileDescriptorTests {
  let app = "com.example.app"

  @Test func closesOnceAndThenReportsMinusOne() throws {
    let t = try TestDevice(containers: [app])
    let directory = try DirectoryHandle(path: t.containerPath(app, "Documents"))
    let file = try directory.openDescriptor("once.txt", flags: O_WRONLY | O_CREAT)
    let raw = file.rawValue
    #expect(file.isOpen)
    #expect(descriptors(on: directory.pathOf("once.txt")) == [raw])
    #expect(throws: Never.self) { try file.close().get() }
    #expect(descriptors(on: directory.pathOf("once.txt")).isEmpty)
    #expect(file.rawValue == -1)
    // A second close touches nothing, whatever now holds the number.
    let other = try directory.openDescriptor("other.txt", flags: O_WRONLY | O_CREAT)
    #expect(throws: Never.self) { try file.close().get() }
    #expect(fcntl(other.rawValue, F_GETFD) != -1)
  }

  @Test func closesWhenItGoesAwayAndTakeHandsItOn() throws {
    let t = try TestDevice(containers: [app])
    let directory = try DirectoryHandle(path: t.containerPath(app, "Documents"))
    do {
      let file = try directory.openDescriptor("scoped.txt", flags: O_WRONLY | O_CREAT)
      #expect(descriptors(on: directory.pathOf("scoped.txt")) == [file.rawValue])
    }
    #expect(descriptors(on: directory.pathOf("scoped.txt")).isEmpty)
    let raw: Int32
    do {
      let file = try directory.openDescriptor("taken.txt", flags: O_WRONLY | O_CREAT)
      raw = file.take()
      #expect(file.rawValue == -1)
    }
    #expect(descriptors(on: directory.pathOf("taken.txt")) == [raw])
    close(raw)
  }

  /// An atomic write whose rename fails closed its temp file twice: the second close could shut a
  /// descriptor another thread had just been given the same number. The test opens one in that
  /// window; the kernel gives it the lowest free number, the temp file's, unless a test running in
  /// parallel takes that first, so the scenario repeats.
  @Test func failedAtomicRenameClosesTheTempFileOnce() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let documents = t.containerPath(app, "Documents")
    let sentinel = open("/dev/null", O_RDONLY | O_CLOEXEC)
    defer { close(sentinel) }
    for attempt in 0..<5 {
      let name = "target-\(attempt).txt"
      let opened = Opened()
      fm.beforeAtomicRename = { parent, _, final in
        // A non-empty directory takes the name: renaming the file over it fails (EISDIR).
        mkdirat(parent.fd, final, 0o755)
        close(openat(parent.fd, final + "/inside", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644))
        opened.fd = fcntl(sentinel, F_DUPFD_CLOEXEC, 0)
      }
      #expect(throws: CocoaError.self) {
        try fm.write(Data("new".utf8), toPath: documents + "/" + name, options: .atomic)
      }
      let mine = opened.fd
      #expect(mine >= 0)
      #expect(isOpen(mine, sameFileAs: sentinel), "the failed write closed a descriptor it did not own")
      close(mine)
      // The temp file is gone, and no descriptor is left on it.
      #expect(descriptors(on: documents + "/.\(name).protfs-").isEmpty)
      #expect(try FileManager.default.contentsOfDirectory(atPath: documents).allSatisfy { !$0.hasPrefix(".") })
    }
  }

  /// A temp file that fails its checks after it was opened is closed before the error goes out.
  @Test func temporaryFileFailingItsChecksIsClosed() throws {
    let t = try TestDevice(containers: [app])
    let path = t.containerPath(app, "Documents")
    let directory = try DirectoryHandle(path: path)
    // An existing temp file with a second link is refused after the open.
    let name = "CFNetworkDownload_linked.tmp"
    _ = FileManager.default.createFile(atPath: directory.pathOf(name), contents: Data("x".utf8))
    #expect(link(directory.pathOf(name), directory.pathOf("elsewhere")) == 0)
    #expect(throws: ProtFSError.self) {
      _ = try TemporaryFile.open(
        in: directory, existingName: name, canContinue: true, unnamed: false, accepts: { _, _ in true }, label: { _ in }
      )
    }
    #expect(descriptors(on: directory.pathOf(name)).isEmpty)
    // A label that fails: the new file is removed and closed.
    let refusing: (Int32) throws(ProtFSError) -> Void = { _ throws(ProtFSError) in
      throw ProtFSError(.io, "no label")
    }
    #expect(throws: ProtFSError.self) {
      _ = try TemporaryFile.open(
        in: directory, existingName: nil, canContinue: false, unnamed: false, accepts: { _, _ in true }, label: refusing
      )
    }
    // An unnamed one (O_TMPFILE, which /proc shows as `DIR/#INODE (deleted)`) is closed too.
    #expect(throws: ProtFSError.self) {
      _ = try TemporaryFile.open(
        in: directory, existingName: nil, canContinue: false, unnamed: true, accepts: { _, _ in true }, label: refusing)
    }
    #expect(descriptors(on: directory.pathOf("#")).isEmpty)
    #expect(throws: ProtFSError.self) {
      _ = try TemporaryFile.open(
        in: directory, existingName: "elsewhere", canContinue: false, unnamed: false, accepts: { _, _ in true },
        label: refusing)
    }
    #expect(descriptors(on: directory.pathOf("CFNetworkDownload_")).isEmpty)
    #expect(descriptors(on: directory.pathOf("elsewhere")).isEmpty)
    // One that passes is handed over open.
    unlink(directory.pathOf(name))
    let opened = try TemporaryFile.open(
      in: directory, existingName: nil, canContinue: false, unnamed: false, accepts: { _, _ in true }, label: { _ in })
    #expect(descriptors(on: directory.pathOf(opened.name)) == [opened.file.rawValue])
    let unnamed = try TemporaryFile.open(
      in: directory, existingName: nil, canContinue: false, unnamed: true, accepts: { _, _ in true }, label: { _ in })
    #expect(!unnamed.isNamed && descriptors(on: directory.pathOf("#")) == [unnamed.file.rawValue])
  }

  /// Failed and finished downloads leave no descriptor on their temp or destination files.
  @Test func downloadsLeaveNoDescriptorBehind() async throws {
    let fixture = try DownloadFixture()
    let body = DownloadFixture.bytes(300_000)
    let failing = try FaultServer(body: body, mode: .alwaysStatus(404))
    defer { failing.stop() }
    let working = try FaultServer(body: body, mode: .normal)
    defer { working.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    let failed = try session.downloadTask(with: failing.url())
    failed.resume()
    #expect(await failed.waitUntilSettled() == .failed)
    let done = try session.downloadTask(with: working.url("done.bin"))
    done.resume()
    #expect(await done.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("done.bin") == body)
    #expect(descriptors(on: fixture.temporaryDirectory + "/").isEmpty)
    #expect(descriptors(on: fixture.destinationDirectory + "/").isEmpty)
  }
}
