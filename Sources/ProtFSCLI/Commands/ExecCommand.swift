import Foundation
import ProtFS
import ProtFSLock
import ProtFSRuntime
import ProtFSSystem
import Synchronization

/// `protfs exec -- CMD`: runs a program as an app runs on a phone, so that it meets the lock and
/// cannot undo it, optionally changing the lock state while it runs.
package enum ExecCommand {
  package static let command = Command(
    name: "exec",
    abstract: "Run a program on the device as an app: it meets the lock and cannot undo it.",
    discussion: """
      Run as root, protfs runs CMD as the app user 501:501 (the owner of every container protfs
      creates), with no supplementary group, no capability at all and no_new_privs, and without
      the passcode in its environment. It can read and write its containers while their data is
      available, but cannot open a locked item, chmod it back, or touch the device's .protfs/
      state. CMD leads a session of its own: when protfs has a terminal, CMD gets a
      pseudo-terminal of its own that protfs relays (as sudo's use_pty does), so it never holds
      the caller's terminal and cannot type into the caller's shell; window sizes, Ctrl-C and
      job control work through it, and Ctrl-Z stops CMD and protfs together. CMD's environment
      is built for it, never the caller's (which holds root's tokens, key agent and home): PATH
      /usr/local/bin:/usr/bin:/bin and protfs's own directory, HOME /, the caller's LANG, TERM when it has a terminal, and
      only what the caller passes on purpose: each $PROTFS_CHILD_NAME as NAME, and each --env
      NAME=VALUE (which wins). CMD itself is found on the caller's PATH, searched as the app user
      searches it: a directory closed to it is skipped, and a CMD found nowhere else ends exec
      with 127 ("command not found") and the directories skipped; one found that it may not
      execute, with 126. When the device is mounted (protfs mount), CMD runs in a mount namespace of its own
      where the mount covers the device's Containers/: the class then decides every open by the
      containers' usual paths, and a locked item fails with "Operation not permitted". Every directory from / to the device must let other users through (o+x); exec
      checks that first. Run by another user, CMD keeps that user's identity (no capabilities,
      no_new_privs), which protects nothing that user owns: exec warns then. --schedule changes
      the state while CMD runs, for example lock@2s,unlock@5s (actions lock, inactive, unlock,
      reboot; times in ms, s or m after CMD started). The exit status is CMD's (128+N when a
      signal N ended it).
      """,
    options: [schedule, environment] + passcode.options,
    takesTrailingCommand: true,
    run: run
  )

  /// `--env NAME=VALUE`, repeatable: a variable of CMD's environment, which is otherwise built for
  /// it (`ProgramEnvironment`).
  package static let environment = Option.value(
    "env", "name=value", help: "Set NAME=VALUE in CMD's environment (repeatable); so does $PROTFS_CHILD_NAME.")

  /// `--schedule STEPS`.
  package static let schedule = Option.value(
    "schedule", "steps", help: "State changes while CMD runs, for example lock@2s,unlock@5s.")
  /// `--passcode` and `--passcode-file`: the passcode scheduled unlocks give (never prompted for).
  package static let passcode = PasscodeOption(
    "passcode", "The passcode for scheduled unlocks", environmentKey: "PROTFS_PASSCODE", prompts: false)

  package static func run(_ invocation: Invocation) throws -> Int32 {
    var schedule = LockSchedule(steps: [])
    if let text = invocation.value(Self.schedule) {
      do {
        schedule = try LockSchedule(parsing: text)
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
      if let step = schedule.steps.first(where: { $0.action.isAppAction }) {
        throw invocation.usageError(
          "The step \(step.action.rawValue) needs an app: run the program with \(invocation.spelling.command("app launch BUNDLE-ID -- CMD")) instead."
        )
      }
    }
    let passed = try passedEnvironment(invocation)
    let controller = invocation.lockController
    if !schedule.steps.isEmpty { try controller.device.requireInitialized() }
    // Read before CMD starts, and never from a prompt: the terminal belongs to CMD.
    var passcode: String?
    if schedule.steps.contains(where: { $0.action == .unlock }) {
      passcode = try invocation.passcode(Self.passcode, prompt: nil)
    }
    if !AppUser.canAssume, controller.device.isInitialized,
      let mount = MountRegistry(device: controller.device).deviceMounts().first
    {
      Console.err(
        "warning: the device is mounted at \(mount.mountpoint), but only root can run a program through the mount; "
          + "\(invocation.trailing[0]) uses the backing tree.")
    }
    if !AppUser.canAssume {
      Console.err(
        "warning: protfs exec confines a program fully only when run as root: \(invocation.trailing[0]) runs as uid "
          + "\(getuid()) (without capabilities) and can chmod back any locked item that uid owns.")
    }
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
      child = try spawnConfined(invocation.trailing, invocation: invocation, terminal: terminal, passed: passed)
    } catch {
      terminal?.finish()
      throw error
    }
    DebugHold.wait("PROTFS_DEBUG_HOLD_EXEC")
    target.start(child)
    // Ctrl-Z while the program is in the foreground of its terminal stops it and then protfs, as
    // it stopped both before: the program's group has no parent in its session, so its own
    // terminal's SIGTSTP would be discarded. A shell's fg continues protfs, which continues it.
    terminal?.start(leader: child, suspending: true) { [terminal] in
      _ = valueOrErrno(.kill) { kill(-child, SIGSTOP) }
      terminal?.restoreCaller()
      _ = valueOrErrno(.kill) { kill(getpid(), SIGSTOP) }
      terminal?.makeCallerRaw()
      _ = valueOrErrno(.kill) { kill(-child, SIGCONT) }
    }
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
      if let failure = perform(step.action, controller, passcode: passcode) {
        Console.err("warning: the scheduled \(step.action.rawValue) failed: \(invocation.describe(failure))")
      }
    }
    exited.wait()
    terminal?.finish()
    return waiter.exitStatus
  }

  /// `--env`'s NAME=VALUE pairs (`exec`'s and `app launch`'s); a value that names no variable is a
  /// usage error.
  static func passedEnvironment(_ invocation: Invocation) throws -> [(name: String, value: String)] {
    do {
      return try ProgramEnvironment.parse(passed: invocation.values(environment))
    } catch {
      throw invocation.usageError(invocation.describe(error))
    }
  }

  /// Makes one scheduled change; returns the error instead of throwing, as the program keeps running.
  private static func perform(_ action: LockSchedule.Action, _ controller: LockController, passcode: String?)
    -> ProtFSError?
  {
    do {
      switch action {
      case .lock: try controller.lock()
      case .inactive: try controller.lock(inactive: true)
      case .unlock: try controller.unlock(passcode: passcode)
      case .reboot: try controller.reboot()
      // Refused before the program started.
      case .background, .foreground, .fetch, .terminate, .push, .refresh, .process: break
      }
      return nil
    } catch {
      return error
    }
  }

  /// Starts CMD confined, through the device's mount when it has one (and protfs runs as root).
  /// The child inherits the environment without the passcode variables, which protfs removed
  /// when it started.
  private static func spawnConfined(
    _ command: [String], invocation: Invocation, terminal: TerminalRelay?, passed: [(name: String, value: String)]
  ) throws -> pid_t {
    let device = invocation.device
    let mount = device.isInitialized ? MountRegistry(device: device).deviceMounts().first : nil
    // No home of its own: "/" (which it cannot write) unless the caller passes one.
    let options = ConfinedSpawn.Options(
      mountpoint: mount?.mountpoint, terminal: terminal, passed: passed, defaults: ["HOME": "/"])
    return try ConfinedSpawn.startCommand(command, device: device, options, by: "exec")
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
        _ = valueOrErrno(.kill) { kill(state.pid, signal) }
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
      for signal in state.pending { _ = valueOrErrno(.kill) { kill(pid, signal) } }
      state.pending = []
    }
  }
}
