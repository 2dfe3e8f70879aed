import Foundation
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSDownloads
@testable import ProtFSFoundation
@testable import ProtFSSystem

/// Error paths that error injection (`SyscallFaults`) reaches since their calls go through the
/// syscall layer (issue 30): each failure leaves nothing half-done.
@Suite struct RoutedSyscallFaultTests {
  let app = "com.example.app"

  /// The names in the directory at `path`, hidden ones included.
  private func names(_ path: String) throws -> Set<String> {
    Set(try FileManager.default.contentsOfDirectory(atPath: path))
  }

  @Test(arguments: [Syscall.fsync, .rename])
  func anAtomicWriteThatCannotSyncOrRenameKeepsTheOldFileAndNoTempFile(_ call: Syscall) throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let documents = t.containerPath(app, "Documents")
    let path = documents + "/note.txt"
    try fm.write(Data("old".utf8), toPath: path, options: .atomic)
    let before = try names(documents)
    let faults = SyscallFaults()
    faults.fail(call, with: EIO)
    #expect(throws: (any Error).self) {
      try faults.during { () throws in try fm.write(Data("new".utf8), toPath: path, options: .atomic) }
    }
    #expect(faults.injectedCount(call) == 1)
    #expect(try fm.contents(ofItemAtPath: path) == Data("old".utf8))
    #expect(try names(documents) == before)
  }

  @Test func anAtomicWriteWhoseDirectorySyncFailsStillStands() throws {
    let t = try TestDevice(containers: [app])
    let fm = ProtectedFileManager(device: t.device)
    let path = t.containerPath(app, "Documents/note.txt")
    let faults = SyscallFaults()
    // The file's fsync passes; the directory's, after the rename, fails: the rename is done, so
    // the write reports success (as Foundation's does) rather than a file it did write.
    faults.pass(.fsync, times: 1)
    faults.fail(.fsync, with: EIO)
    try faults.during { () throws in try fm.write(Data("new".utf8), toPath: path, options: .atomic) }
    #expect(faults.injectedCount(.fsync) == 1)
    #expect(try fm.contents(ofItemAtPath: path) == Data("new".utf8))
  }

  @Test func aLabelledDirectoryThatCannotBeRenamedIntoPlaceLeavesNoTemporaryDirectory() throws {
    let t = try TestDevice(containers: [app])
    let documents = t.containerPath(app, "Documents")
    let before = try names(documents)
    let faults = SyscallFaults()
    faults.fail(.rename, with: ENOSPC)
    let error = #expect(throws: ProtFSError.self) {
      try faults.during { () throws(ProtFSError) in
        try t.device.createDirectory(DevicePath("Containers/\(app)/Documents/new"), protectionClass: .complete)
      }
    }
    #expect(faults.injectedCount(.rename) == 1 && error?.errno == ENOSPC)
    #expect(try names(documents) == before)
  }

  @Test func aTempFileThatCannotBeReadAgainIsOneErrorNamingIt() throws {
    let t = try TestDevice()
    let path = t.path("partial")
    try t.writeFile(path, String(repeating: "x", count: 4096))
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    defer { close(fd) }
    let faults = SyscallFaults()
    faults.fail(.read, with: EIO)
    let error = faults.during {
      TemporaryFile.hashPrefix(fd: fd, count: 4096, into: SHA256Digest(), path: path)
    }
    #expect(faults.injectedCount(.read) == 1)
    #expect(error?.errno == EIO && error?.path == path)
    #expect(error?.message.contains(path) == true)
    // Without the fault the same bytes hash through.
    #expect(TemporaryFile.hashPrefix(fd: fd, count: 4096, into: SHA256Digest(), path: path) == nil)
  }

  @Test func aTempFileWhoseLockCannotBeTakenIsHeld() throws {
    let t = try TestDevice()
    let directory = try DirectoryHandle(path: t.root)
    try t.writeFile(t.path("temp"))
    #expect(!TemporaryFileLock.isHeld("temp", in: directory))
    let faults = SyscallFaults()
    faults.fail(.flock, with: EWOULDBLOCK)
    #expect(faults.during { TemporaryFileLock.isHeld("temp", in: directory) })
    #expect(faults.injectedCount(.flock) == 1)
  }

  @Test func aCloseThatFailsReportsItsErrnoOnceAndAnEINTRIsNoFailure() throws {
    let t = try TestDevice()
    try t.writeFile(t.path("file"))
    let faults = SyscallFaults()
    faults.fail(.close, with: EIO)
    faults.fail(.close, with: EINTR)
    // The descriptor is closed either way (as Linux closes it); a second close of the same number
    // is never tried here, as another test's thread may hold that number by then.
    let results = faults.during {
      [EIO, EINTR].map { _ in closeDescriptor(open(t.path("file"), O_RDONLY | O_CLOEXEC)) }
    }
    #expect(faults.injectedCount(.close) == 2)
    guard case .failure(let e) = results[0], case .success = results[1] else {
      Issue.record("\(results)")
      return
    }
    #expect(e == Errno(EIO))
  }
}
