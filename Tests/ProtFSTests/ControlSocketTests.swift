import Foundation
import ProtFSSystem
import Testing

/// The services' socket layer.
@Suite struct ControlSocketTests {
  @Test func writingToAPeerThatWentAwayFailsWithoutASignal() throws {
    var ends: [Int32] = [0, 0]
    #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
    let ours = FileDescriptor(owning: ends[0])
    close(ends[1])
    // Without MSG_NOSIGNAL this write raises SIGPIPE, which ends the process hosting a service
    // (a test process included) instead of failing the write.
    #expect(!ControlSocket.writeLine(ours, String(repeating: "x", count: 100_000)))
  }

  @Test func aLineLongerThanTheLimitIsNoLine() throws {
    var ends: [Int32] = [0, 0]
    #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
    let reader = FileDescriptor(owning: ends[0])
    let writer = FileDescriptor(owning: ends[1])
    let sender = Thread {
      _ = ControlSocket.writeLine(writer, String(repeating: "y", count: ControlSocket.maximumLine + 10))
      writer.close()
    }
    sender.start()
    #expect(ControlSocket.readLine(reader) == nil)
  }
}
