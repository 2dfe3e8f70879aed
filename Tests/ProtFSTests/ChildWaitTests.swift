import Foundation
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// The one `waitpid`: `Kernel.waitForChild` and `Kernel.reapChildIfEnded`.
@Suite(.timeLimit(.minutes(1))) struct ChildWaitTests {
  /// Starts `/bin/sh -c script` as a child of this process; returns its pid.
  static func spawn(_ script: String) throws -> pid_t {
    var pid: pid_t = 0
    let arguments = ["/bin/sh", "-c", script]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let status = posix_spawn(&pid, "/bin/sh", nil, nil, &argv, environ)
    try #require(status == 0)
    return pid
  }

  @Test func waitingGivesTheExitCodeOr128PlusTheSignal() throws {
    #expect(Kernel.waitForChild(try Self.spawn("exit 3")) == .success(3))
    #expect(Kernel.waitForChild(try Self.spawn("kill -9 $$")) == .success(128 + SIGKILL))
    #expect(Kernel.waitForChild(getpid()) == .failure(Errno(ECHILD)))
  }

  @Test func reapingWithoutWaitingAnswersNilWhileTheChildRuns() throws {
    let child = try Self.spawn("sleep 30")
    defer { kill(child, SIGKILL) }
    #expect(Kernel.reapChildIfEnded(child) == .success(nil))
    kill(child, SIGTERM)
    let deadline = Date().addingTimeInterval(10)
    var status: Int32?
    while status == nil, Date() < deadline {
      status = try Kernel.reapChildIfEnded(child).get()
      usleep(1_000)
    }
    #expect(status == 128 + SIGTERM)
    #expect(Kernel.reapChildIfEnded(child) == .failure(Errno(ECHILD)))
  }

  @Test func aWaitInterruptedIsRetried() throws {
    let child = try Self.spawn("exit 7")
    let faults = SyscallFaults()
    faults.fail(.wait, with: EINTR, times: 2)
    #expect(faults.during { Kernel.waitForChild(child) } == .success(7))
    #expect(faults.injectedCount(.wait) == 2)
  }
}
