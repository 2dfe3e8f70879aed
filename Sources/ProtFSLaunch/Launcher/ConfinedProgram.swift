import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem
import Synchronization

/// A program run confined on a device, as `protfs exec` runs one (docs/semantics.md §5): as the
/// app user, through the device's mount when it has one, in a session of its own (on a relayed
/// pseudo-terminal when the caller has a terminal), with the caller's signals passed on, while a
/// schedule locks and unlocks the device.
public struct ConfinedProgram: Sendable {
  /// The device the program runs on.
  public let device: Device
  /// The program and its arguments (looked up in the caller's `PATH`).
  public var command: [String]
  /// The device's state changes while it runs (lock, unlock, reboot; no app's step).
  public var schedule = LockSchedule(steps: [])
  /// What the caller passes to the program's environment on purpose.
  public var passedEnvironment: [LaunchPlan.Variable] = []
  /// The controller scheduled steps go through.
  public var lockController: LockController
  /// The passcode scheduled unlocks give.
  public var passcode: String?
  /// Where warnings go, one line each (nowhere by default).
  public var report: @Sendable (String) -> Void = { _ in }
  /// How an error is worded in a report.
  public var describe: @Sendable (any Error) -> String = { "\($0)" }
  /// How the program is started.
  package var spawner: any AppSpawner = ConfinedSpawner(commandName: "exec")

  /// `command`, to run confined on `device`.
  public init(_ command: [String], device: Device) {
    self.command = command
    self.device = device
    self.lockController = LockController(device: device)
  }

  /// Runs the program until it ends; its exit status (128+N when signal N ended it). Throws
  /// `UnrunnableProgram` when it cannot be executed, or the failed step's error.
  public func run() throws -> Int32 {
    // The program leads a session of its own, on a pseudo-terminal of its own when protfs has a
    // terminal (TerminalRelay): the keys typed reach it through its terminal. The signals sent to
    // protfs (a shell's Ctrl-C when protfs's input is no terminal, kill, a closed terminal's
    // SIGHUP) are passed on, so the program is never orphaned: caught from before the program
    // starts, and held until it has, so that none is lost or kills protfs in between. A window
    // size change is passed on as the terminal's own.
    let terminal = try ConfinedSpawn.terminalForStandardStreams()
    let target = SignalTarget()
    try SignalForwarding.forward([SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGWINCH]) { signal in
      if signal == SIGWINCH {
        terminal?.resize()
      } else {
        target.deliver(signal)
      }
    }
    let child: pid_t
    do {
      child = try spawn(terminal: terminal)
    } catch {
      terminal?.finish()
      throw error
    }
    DebugHold.wait("PROTFS_DEBUG_HOLD_EXEC")
    target.start(child)
    Self.passStops(terminal, to: child)
    let status = followSchedule(until: child, target: target)
    terminal?.finish()
    return status
  }

  /// Ctrl-Z while the program is in the foreground of its terminal stops it and then protfs, as
  /// it stopped both before: the program's group has no parent in its session, so its own
  /// terminal's SIGTSTP would be discarded. A shell's fg continues protfs, which continues it.
  private static func passStops(_ terminal: TerminalRelay?, to child: pid_t) {
    terminal?.start(leader: child, suspending: true) { [terminal] in
      // A program or protfs gone meanwhile has nothing left to stop or continue.
      _ = Kernel.kill(-child, SIGSTOP)
      terminal?.restoreCaller()
      _ = Kernel.kill(Kernel.getpid(), SIGSTOP)
      terminal?.makeCallerRaw()
      _ = Kernel.kill(-child, SIGCONT)
    }
  }

  /// Makes the schedule's changes while `child` runs; its exit status once it has ended.
  private func followSchedule(until child: pid_t, target: SignalTarget) -> Int32 {
    let exited = DispatchSemaphore(value: 0)
    let waiter = ChildWaiter(pid: child)
    Thread {
      waiter.wait()
      // Reaped: its pid may be another process's soon, which no signal of protfs's may reach.
      target.stop()
      exited.signal()
    }.start()
    let start = DispatchTime.now()
    for step in schedule.steps {
      let deadline = start + .nanoseconds(Int(step.offset * 1e9))
      if exited.wait(timeout: deadline) == .success {
        exited.signal()
        break
      }
      do {
        try lockController.perform(step.action, passcode: passcode)
      } catch {
        report("warning: the scheduled \(step.action.rawValue) failed: \(describe(error))")
      }
    }
    exited.wait()
    return waiter.exitStatus
  }

  /// Starts the program confined, through the device's mount when it has one (and protfs runs as
  /// root). The child inherits the environment without the passcode variables, which protfs
  /// removed when it started.
  private func spawn(terminal: TerminalRelay?) throws -> pid_t {
    let mount = device.isInitialized ? MountRegistry(device: device).deviceMounts().first : nil
    // No home of its own: "/" (which it cannot write) unless the caller passes one.
    let options = ConfinedSpawn.Options(
      mountpoint: mount?.mountpoint, terminal: terminal, passed: passedEnvironment.map { ($0.name, $0.value) },
      defaults: ["HOME": "/"])
    return try spawner.spawn(command, device: device, options: options)
  }
}

/// Waits for the child on its own thread.
///
/// `@unchecked Sendable`: `exitStatus` is written once before the semaphore is signalled and read after.
private final class ChildWaiter: @unchecked Sendable {
  let pid: pid_t
  var exitStatus: Int32 = 1

  init(pid: pid_t) { self.pid = pid }

  func wait() {
    if case .success(let status) = Kernel.waitForChild(pid) { exitStatus = status }
  }
}

/// The process signals go to once it runs, and those that came before it did.
private final class SignalTarget: Sendable {
  private let state = Mutex<(pid: pid_t, pending: [Int32])>((0, []))

  /// Passes `signal` on to the process, or holds it until there is one.
  func deliver(_ signal: Int32) {
    state.withLock { state in
      if state.pid > 0 {
        // A process that has just ended gets no signal; nothing is lost.
        _ = Kernel.kill(state.pid, signal)
      } else if state.pid == 0 {
        state.pending.append(signal)
      }
    }
  }

  /// No signal goes anywhere from now on (the process has been reaped).
  func stop() { state.withLock { $0.pid = -1 } }

  /// From now on signals go to `pid`; those held go first.
  func start(_ pid: pid_t) {
    state.withLock { state in
      state.pid = pid
      for signal in state.pending { _ = Kernel.kill(pid, signal) }
      state.pending = []
    }
  }
}
