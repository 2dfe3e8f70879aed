import Foundation
import ProtFS
import ProtFSLock
import ProtFSTestSupport
import Synchronization
import Testing

/// The lock library, used without the command line, meets the device's mounts after every
/// transition (docs/semantics.md §7): no page read before a lock is served through a mount once
/// `lock()` returns.
@Suite(.serialized) struct LockMountSyncTests {
  @Test func aTransitionReturnsOnlyOnceTheMountEnforcesItsState() async throws {
    let m = try await MountedDevice { t in
      for index in 0..<400 { try MountedDevice.file(t, "Documents/f\(index).txt", .complete) }
    }
    // The daemon knows every file, so that taking a new state costs it more than a glance.
    #expect(try await m.sh("ls -l '\(m.documents)' > /dev/null").status == 0)
    let mountpoint = m.mountpoint
    let reported = Mutex<[String?]>([])
    var controller = LockController(device: m.t.device)
    // Called once the transition is done: what the mount reports then is what it enforces.
    controller.afterCommit = { _ in
      reported.withLock { $0.append(TestDevice.rawAttribute(mountpoint, AttributeName.mountState)) }
    }
    try await offPool { [controller] in try controller.lock() }
    let locked = String(decoding: try controller.record().protection.mountStateValue(), as: UTF8.self)
    #expect(reported.withLock { $0 } == [locked])
    try await offPool { [controller] in try controller.unlock() }
    let unlocked = String(decoding: try controller.record().protection.mountStateValue(), as: UTF8.self)
    #expect(reported.withLock { $0 } == [locked, unlocked])
  }

  @Test func aMountThatLagsIsNamedAndMountSyncNoneDoesNotWait() async throws {
    let m = try await MountedDevice()
    let daemon = MountRegistry(device: m.t.device).records()[0].pid
    let lagging = Mutex<[String]>([])
    var controller = LockController(device: m.t.device)
    controller.mountSync = MountSync(timeout: 0.5) { mountpoint in lagging.withLock { $0.append(mountpoint) } }
    #expect(kill(daemon, SIGSTOP) == 0)
    try await offPool { [controller] in try controller.lock() }
    #expect(lagging.withLock { $0 } == [m.mountpoint])
    controller.mountSync = .none
    controller.mountSync.lagging = { mountpoint in lagging.withLock { $0.append(mountpoint) } }
    try await offPool { [controller] in try controller.unlock() }
    #expect(lagging.withLock { $0 } == [m.mountpoint])
    #expect(kill(daemon, SIGCONT) == 0)
    // The daemon catches up with the state it missed.
    #expect(try await m.protfs(["lock", "--grace", "0"]).stderr.isEmpty)
  }
}
