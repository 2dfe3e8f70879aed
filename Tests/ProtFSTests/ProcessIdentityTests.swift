import Foundation
import ProtFSMount
import ProtFSTestSupport
import Testing

@testable import ProtFS
@testable import ProtFSSystem

/// The one alive check, `ProcessIdentity.isRunning`: a zombie is not alive.
@Suite(.timeLimit(.minutes(1))) struct ProcessIdentityTests {
  /// Waits (≤ 10 s) until the child `pid` has ended without reaping it: it is then a zombie.
  private func waitUntilZombie(_ pid: pid_t) -> Bool {
    var info = siginfo_t()
    return waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == 0
  }

  @Test func aZombieIsNotAlive() throws {
    let child = try ChildWaitTests.spawn("exit 0")
    defer { _ = Kernel.waitForChild(child) }
    #expect(waitUntilZombie(child))
    #expect(kill(child, 0) == 0)  // what the other checks were fooled by
    #expect(!ProcessIdentity.isRunning(child))
    #expect(ProcessIdentity(pid: child) == nil)
  }

  @Test func aLiveProcessIsAliveAndNoPidBelowOneIs() throws {
    #expect(ProcessIdentity.isRunning(getpid()) && ProcessIdentity.current.isAlive)
    #expect(!ProcessIdentity.isRunning(0) && !ProcessIdentity.isRunning(-1))
    #expect(!ProcessIdentity.isStopped(getpid()))
  }

  @Test func aStoppedProcessIsStopped() throws {
    let child = try ChildWaitTests.spawn("sleep 30")
    defer {
      kill(child, SIGKILL)
      _ = Kernel.waitForChild(child)
    }
    kill(child, SIGSTOP)
    let deadline = Date().addingTimeInterval(10)
    while !ProcessIdentity.isStopped(child), Date() < deadline { usleep(1_000) }
    #expect(ProcessIdentity.isStopped(child) && ProcessIdentity.isRunning(child))
  }

  @Test func theMountsOfADaemonThatIsAZombieAreDropped() throws {
    let t = try TestDevice()
    let registry = MountRegistry(device: t.device)
    let child = try ChildWaitTests.spawn("exit 0")
    defer { _ = Kernel.waitForChild(child) }
    #expect(waitUntilZombie(child))
    try registry.register(MountRecord(mountpoint: t.directory + "/mnt", pid: child, since: Date()))
    #expect(registry.records().count == 1)
    #expect(registry.active().isEmpty)
    // Reading changes nothing (the model's reader writes no state); the next daemon to register
    // removes the dead one's entry, and keeps its own.
    #expect(registry.records().map(\.pid) == [child])
    try registry.register(MountRecord(mountpoint: t.directory + "/mnt2", pid: getpid(), since: Date()))
    #expect(registry.records().map(\.pid) == [getpid()])
    registry.remove(pid: getpid())
    #expect(registry.records().isEmpty)
  }
}
