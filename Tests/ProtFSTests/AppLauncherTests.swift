import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSLock
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// `AppLauncher` unit-tested behind its spawner: a fake sees what the app would be given and runs
/// a plain shell in its place (no confinement, no mount), so that the launch's own decisions are
/// checked without the kernel's sandbox.
@Suite struct AppLauncherTests {
  /// What the launcher asked the spawner to start.
  struct Spawned: Sendable {
    var command: [String]
    var environment: [String: String]
    var passed: [String]
    var sandbox: String?
    var mountpoint: String?
    var closingOthers: Bool
    var endsWithParent: Bool
  }

  /// Records every spawn and runs `script` with `/bin/sh` instead, its standard input `input`;
  /// throws `failure` instead when one is given.
  final class FakeSpawner: AppSpawner, @unchecked Sendable {
    // `@unchecked Sendable`: `spawned` is behind its Mutex; the rest is set before the launch.
    let spawned = Mutex<[Spawned]>([])
    /// Signalled at each spawn: the supervisor has claimed the app by then.
    let spawning = DispatchSemaphore(value: 0)
    var script = "exit 3"
    var input: Int32 = STDIN_FILENO
    var failure: (any Error)?

    func spawn(_ command: [String], device: Device, options: ConfinedSpawn.Options) throws -> pid_t {
      spawned.withLock {
        $0.append(
          Spawned(
            command: command, environment: options.environment, passed: options.passed.map { "\($0.name)=\($0.value)" },
            sandbox: options.sandbox, mountpoint: options.mountpoint, closingOthers: options.closingOthers,
            endsWithParent: options.endsWithParent))
      }
      spawning.signal()
      if let failure { throw failure }
      var launch = PlainLaunch(path: "/bin/sh", arguments: ["sh", "-c", script], environment: [])
      launch.input = input
      return try launch.start().get()
    }
  }

  static let bundleID = "com.example.launched"

  /// A plan on a fresh device with the app's container, served no mount of its own.
  static func plan(_ t: TestDevice) throws -> LaunchPlan {
    var plan = LaunchPlan(bundleID: try BundleID(bundleID), command: ["/bin/true", "argument"])
    plan.servesMount = false
    return plan
  }

  @Test func aPlanRunsItsCommandAsTheAppAndReturnsItsStatus() throws {
    let t = try TestDevice(containers: [Self.bundleID])
    let spawner = FakeSpawner()
    var plan = try Self.plan(t)
    plan.passedEnvironment = [LaunchPlan.Variable(name: "GREETING", value: "hello")]
    let status = try AppLauncher(device: t.device, spawner: spawner).run(plan)
    #expect(status == 3)
    let spawned = try #require(spawner.spawned.withLock { $0 }.first)
    // Not a Swift program: it runs from its own path, with its arguments.
    #expect(spawned.command == ["/bin/true", "argument"])
    #expect(spawned.sandbox == Self.bundleID)
    #expect(spawned.closingOthers && spawned.endsWithParent)
    #expect(spawned.mountpoint == nil)
    #expect(spawned.passed == ["GREETING=hello"])
    #expect(spawned.environment["PROTFS_DEVICE"] == t.device.root)
    #expect(spawned.environment["HOME"] == t.containerPath(Self.bundleID))
    #expect(spawned.environment[AppEnvironment.socket]?.hasPrefix("@protfs-app.") == true)
    // The record keeps the launch's command, which the system's relaunches run again.
    let record = try #require(try AppStore(device: t.device).record(BundleID(Self.bundleID)))
    #expect(record.lastLaunchCommand == ["/bin/true", "argument"])
    #expect(!record.isSupervised)
  }

  @Test func aProgramThatCannotStartLeavesTheAppFreeForTheNextLaunch() throws {
    let t = try TestDevice(containers: [Self.bundleID])
    let failing = FakeSpawner()
    failing.failure = UnrunnableProgram(status: 127, lines: ["protfs: app launch: nope: command not found"])
    #expect(throws: UnrunnableProgram.self) { try AppLauncher(device: t.device, spawner: failing).run(Self.plan(t)) }
    // No claim, socket or record left saying it runs: the next launch is not "already running".
    let spawner = FakeSpawner()
    spawner.script = "exit 0"
    #expect(try AppLauncher(device: t.device, spawner: spawner).run(Self.plan(t)) == 0)
  }

  @Test func aSecondLaunchWhileTheAppRunsIsRefused() throws {
    let t = try TestDevice(containers: [Self.bundleID])
    let (read, write) = try FileDescriptor.pipe().get()
    let spawner = FakeSpawner()
    spawner.script = "read line"
    spawner.input = read.rawValue
    let ended = DispatchSemaphore(value: 0)
    Thread {
      // The first launch's own outcome is not what this test checks.
      _ = try? AppLauncher(device: t.device, spawner: spawner).run(Self.plan(t))
      ended.signal()
    }.start()
    #expect(spawner.spawning.wait(timeout: .now() + 60) == .success)
    let second = FakeSpawner()
    let error = #expect(throws: ProtFSError.self) {
      try AppLauncher(device: t.device, spawner: second).run(Self.plan(t))
    }
    #expect(error?.code == .alreadyExists)
    #expect(second.spawned.withLock { $0.isEmpty })
    write.close()
    #expect(ended.wait(timeout: .now() + 60) == .success)
  }

  @Test func aScheduledLockGoesThroughTheLaunchersController() throws {
    let t = try TestDevice(containers: [Self.bundleID])
    let (read, write) = try FileDescriptor.pipe().get()
    let spawner = FakeSpawner()
    // The app runs until the lock has been made: its input closes then.
    spawner.script = "read line; exit 5"
    spawner.input = read.rawValue
    var launcher = AppLauncher(device: t.device, spawner: spawner)
    let commits = Mutex(0)
    launcher.lockController.afterCommit = { _ in
      commits.withLock { $0 += 1 }
      write.close()
    }
    var plan = try Self.plan(t)
    plan.schedule = try LockSchedule(parsing: "lock@0s")
    #expect(try launcher.run(plan) == 5)
    #expect(commits.withLock { $0 } == 1)
  }

  @Test func aSwiftProgramLaunchesAnAppThroughTheLibraryAlone() throws {
    let t = try TestDevice(containers: [Self.bundleID])
    // Only the public API, as a program that depends on the ProtFS library writes it: the real
    // confined spawn, as the app user, in the app's sandbox.
    var plan = LaunchPlan(
      bundleID: try BundleID(Self.bundleID), command: ["/bin/sh", "-c", "test \"$HOME\" = \"$PWD\" && exit 4"])
    plan.servesMount = false
    let status = try AppLauncher(device: t.device).run(plan)
    #expect(status == 4)
    #expect(try AppStore(device: t.device).record(BundleID(Self.bundleID))?.lastLaunchCommand == plan.command)
  }
}
