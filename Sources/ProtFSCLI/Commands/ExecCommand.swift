import Foundation
import ProtFS
import ProtFSLaunch
import ProtFSLock
import ProtFSSystem

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
      containers' usual paths, and a locked item fails with "Operation not permitted". On a sealed
      device that is not mounted, CMD reads its files' ciphertext: exec says so. Every directory from / to the device must let other users through (o+x); exec
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
    var program = ConfinedProgram(invocation.trailing, device: invocation.device)
    program.schedule = try schedule(invocation)
    program.passedEnvironment = try passedEnvironment(invocation)
    program.lockController = invocation.lockController
    if !program.schedule.steps.isEmpty { try program.device.requireInitialized() }
    // Read before CMD starts, and never from a prompt: the terminal belongs to CMD.
    if program.schedule.steps.contains(where: { $0.action == .unlock }) {
      program.passcode = try invocation.passcode(Self.passcode, prompt: nil)
    }
    warnOfWeakConfinement(invocation)
    program.report = { Console.err($0) }
    program.describe = AppLaunchCommand.describer(invocation)
    return try runReportingUnrunnable { try program.run() }
  }

  /// `--schedule`'s steps, which may not include an app's.
  private static func schedule(_ invocation: Invocation) throws -> LockSchedule {
    guard let text = invocation.value(Self.schedule) else { return LockSchedule(steps: []) }
    let schedule: LockSchedule
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
    return schedule
  }

  /// Says when CMD is confined less than fully (protfs not run as root), and when it reads a
  /// sealed device's ciphertext (no mount serves its plaintext).
  private static func warnOfWeakConfinement(_ invocation: Invocation) {
    let device = invocation.device
    if device.isSealed, MountRegistry(device: device).deviceMounts().isEmpty {
      Console.err(
        "note: the device '\(device.root)' is sealed and not mounted: \(invocation.trailing[0]) reads its files' "
          + "ciphertext; \(invocation.spelling.command("mount MOUNTPOINT")) serves their plaintext.")
    }
    guard !AppUser.canAssume else { return }
    if device.isInitialized, let mount = MountRegistry(device: device).deviceMounts().first {
      Console.err(
        "warning: the device is mounted at \(mount.mountpoint), but only root can run a program through the mount; "
          + "\(invocation.trailing[0]) uses the backing tree.")
    }
    Console.err(
      "warning: protfs exec confines a program fully only when run as root: \(invocation.trailing[0]) runs as uid "
        + "\(Kernel.getuid()) (without capabilities) and can chmod back any locked item that uid owns.")
  }

  /// `body`'s exit status; a program that could not be executed is said as a shell says it, and
  /// its status (126 or 127) returned.
  static func runReportingUnrunnable(_ body: () throws -> Int32) throws -> Int32 {
    do {
      return try body()
    } catch let failure as UnrunnableProgram {
      for line in failure.lines { Console.err(line) }
      return failure.status
    }
  }

  /// `--env`'s NAME=VALUE pairs (`exec`'s and `app launch`'s); a value that names no variable is a
  /// usage error.
  static func passedEnvironment(_ invocation: Invocation) throws -> [LaunchPlan.Variable] {
    do {
      return try ProgramEnvironment.parse(passed: invocation.values(environment)).map {
        LaunchPlan.Variable(name: $0.name, value: $0.value)
      }
    } catch {
      throw invocation.usageError(invocation.describe(error))
    }
  }
}
