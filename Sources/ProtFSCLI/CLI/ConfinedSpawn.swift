import Foundation
import ProtFS
import ProtFSSystem

/// Starts `protfs __exec-confined --device ROOT -- CMD…`, the half of `exec` and `app launch` that
/// confines itself and then becomes CMD.
enum ConfinedSpawn {
  /// The signals a Swift process changes (SIGPIPE is ignored by the runtime) or a test runner may
  /// have blocked or ignored: the child starts with their default handlers and none blocked.
  static let resetSignals = [SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2]

  /// Starts the confined half for `command` and returns its pid. `alsoResetting` adds signals to
  /// `resetSignals`; `newProcessGroup` makes the child the leader of a group of its own;
  /// `descriptor` is dup2'd in the child (`from` onto `to`); `environment` ("NAME=value" entries)
  /// replaces the inherited one when given. With `closingOthers`, the child keeps only its standard
  /// streams and `descriptor`: an app inherits nothing else of its supervisor (a mount's
  /// connection to fusermount3, which would keep the mount alive after the supervisor ended).
  static func start(
    _ command: [String], device: Device, alsoResetting: [Int32] = [], newProcessGroup: Bool = false,
    descriptor: (from: Int32, to: Int32)? = nil, environment: [String]? = nil, closingOthers: Bool = false
  ) throws -> pid_t {
    let arguments = ["protfs", ExecConfinedCommand.command.name, "--device", device.root, "--"] + command
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
    defer { for pointer in envp ?? [] { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let descriptor { posix_spawn_file_actions_adddup2(&actions, descriptor.from, descriptor.to) }
    if closingOthers {
      _ = Kernel.spawnClosing(from: max(3, (descriptor?.to ?? 2) + 1), &actions)
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in resetSignals + alsoResetting { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    if newProcessGroup {
      posix_spawnattr_setpgroup(&attributes, 0)
      flags |= POSIX_SPAWN_SETPGROUP
    }
    posix_spawnattr_setflags(&attributes, Int16(flags))
    var pid: pid_t = 0
    let status =
      envp == nil
      ? posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, &argv, environ)
      : posix_spawn(&pid, "/proc/self/exe", &actions, &attributes, &argv, &envp!)
    guard status == 0 else { throw ProtFSError.system("run", path: command[0], errno: status) }
    return pid
  }
}
