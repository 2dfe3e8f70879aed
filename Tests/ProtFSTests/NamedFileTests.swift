import Foundation
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `Kernel.readNamedFile`, which reads the files users name (an Info.plist, a payload, a list):
/// a FIFO is read as `cat` reads one, once a writer comes, and never keeps a command for ever.
@Suite struct NamedFileTests {
  @Test func aRegularFileIsReadWholeAndOneOverTheLimitIsRefused() throws {
    let directory = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(directory) }
    try Data("0123456789".utf8).write(to: URL(fileURLWithPath: directory + "/ten"))
    #expect(Kernel.readNamedFile(directory + "/ten", limit: 10) == .success(Array("0123456789".utf8)))
    #expect(Kernel.readNamedFile(directory + "/ten", limit: 9) == .failure(.tooLarge(limit: 9)))
    #expect(Kernel.readNamedFile(directory + "/none", limit: 9) == .failure(.unreadable(Errno(ENOENT))))
    #expect(Kernel.readNamedFile(directory, limit: 9) == .failure(.unreadable(Errno(EISDIR))))
  }

  /// A writer that opens the FIFO only after the read began is waited for; one that opens it and
  /// leaves without a byte ends the read, empty.
  @Test func aFIFOIsReadOnceItsWriterComesAndEndsWhenItLeaves() async throws {
    let directory = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(directory) }
    let fifo = directory + "/fifo"
    #expect(mkfifo(fifo, 0o600) == 0)
    for text in ["late words\n", ""] {
      // The writer opens the FIFO a moment after the reader's open returned (it does not wait
      // for a writer), so the reader must wait for it.
      let writer = Thread {
        usleep(200_000)
        let fd = open(fifo, O_WRONLY | O_CLOEXEC)
        if fd >= 0 {
          _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }
          close(fd)
        }
      }
      writer.start()
      let read = await offPool { Kernel.readNamedFile(fifo, limit: 1 << 10) }
      #expect(read == .success(Array(text.utf8)), "\(text)")
    }
  }

  /// A FIFO that gives a byte now and then and never ends keeps no command for longer than the
  /// whole read's bound (a user's trickle would otherwise hold root's command for days).
  @Test func aFIFOThatTricklesForEverIsGivenUpOnInTime() async throws {
    let directory = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(directory) }
    let fifo = directory + "/fifo"
    #expect(mkfifo(fifo, 0o600) == 0)
    let stop = DispatchSemaphore(value: 0)
    let writer = Thread {
      // Read-write: the FIFO always has a reader, so a write after the read gave up raises no
      // SIGPIPE (which would end the test process).
      let fd = open(fifo, O_RDWR | O_CLOEXEC)
      guard fd >= 0 else { return }
      var byte: UInt8 = 0x41
      while stop.wait(timeout: .now() + .milliseconds(200)) == .timedOut { _ = write(fd, &byte, 1) }
      close(fd)
    }
    writer.start()
    defer { stop.signal() }
    let read = await offPool { Kernel.readNamedFile(fifo, limit: 1 << 20, within: 1) }
    #expect(read == .failure(.unending(seconds: 1)))
  }
}
