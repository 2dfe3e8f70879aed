import CProtFSSys
import Foundation
import ProtFS
import ProtFSLock
import ProtFSSystem

/// Starts a program confined, for `exec` and `app launch`: a forked child takes every privilege
/// from itself as `Confinement` describes and executes the program. The child runs C alone
/// (`protfs_spawn_confined`), system calls only, and reports a failed step through a pipe; so a
/// confinement that fails is this process's error, and a program that runs is the child itself,
/// with no second protfs started in between.
enum ConfinedSpawn {
  /// The signals a Swift process changes (SIGPIPE is ignored by the runtime) or a test runner may
  /// have blocked or ignored: the child starts with their default handlers and none blocked.
  static let resetSignals = [SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2]

  /// What the child gets besides its confinement.
  struct Options {
    /// A protfs mount of the device, seen over its `Containers/` (as root only).
    var mountpoint: String?
    /// Signals reset besides `resetSignals`.
    var alsoResetting: [Int32] = []
    /// Whether the child leads a process group of its own.
    var newProcessGroup = false
    /// A descriptor dup2'd in the child (`from` onto `to`).
    var descriptor: (from: Int32, to: Int32)?
    /// "NAME=value" entries replacing the inherited environment.
    var environment: [String]?
    /// Whether the child keeps only its standard streams and `descriptor`: an app inherits nothing
    /// else of its supervisor (a mount's connection to fusermount3, which would keep the mount
    /// alive after the supervisor ended).
    var closingOthers = false
    /// The soft descriptor limit the child takes (a supervisor serving a mount raised its own).
    var descriptorLimit: rlim_t?
    /// The cgroup directory the child joins before anything of the program runs.
    var cgroup: String?
    /// Whether the program is killed when this process ends, as an app ends with its system.
    var endsWithParent = false
  }

  /// Starts `command` confined on `device`; returns its pid once it runs. Throws the failed step's
  /// error, or an `ExitStatus` of 127 (not found) or 126 when the program cannot be executed.
  static func start(_ command: [String], device: Device, _ options: Options = Options()) throws -> pid_t {
    let plan = Confinement.Plan(device: device)
    let environment = options.environment ?? currentEnvironment()
    let searchPath = environment.last { $0.hasPrefix("PATH=") }.map { String($0.dropFirst(5)) }
    guard let path = programPath(command[0], searchPath: searchPath) else {
      throw ExitStatus(code: 127, message: "Cannot run '\(command[0])': \(Errno(ENOENT)).")
    }
    var cgroupDirectory: Int32 = -1
    if let cgroup = options.cgroup {
      cgroupDirectory = try valueOrErrno(.open) { open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        .orThrow("open the app's cgroup", path: cgroup)
    }
    defer { if cgroupDirectory >= 0 { close(cgroupDirectory) } }
    let mountTarget = device.root + "/" + Device.containersDirectoryName
    let mounted = plan.privileged ? options.mountpoint : nil
    let strings = CStrings()
    defer { strings.free() }
    let signals = Self.resetSignals + options.alsoResetting
    var failure = protfs_spawn_failure()
    let pid = signals.withUnsafeBufferPointer { signalBuffer in
      var spawn = protfs_spawn()
      spawn.path = strings.pointer(path)
      spawn.argv = strings.array(command)
      spawn.envp = strings.array(environment)
      spawn.shell_argv = strings.array(["/bin/sh", path] + command.dropFirst())
      spawn.default_signals = signalBuffer.baseAddress
      spawn.default_signal_count = Int32(signalBuffer.count)
      spawn.new_process_group = options.newProcessGroup ? 1 : 0
      spawn.descriptor_from = options.descriptor?.from ?? -1
      spawn.descriptor_to = options.descriptor?.to ?? -1
      spawn.close_from = options.closingOthers ? max(3, (options.descriptor?.to ?? 2) + 1) : -1
      spawn.descriptor_limit = options.descriptorLimit.map { Int64($0) } ?? -1
      spawn.cgroup = cgroupDirectory
      spawn.mount_source = mounted.map { strings.pointer($0) }
      spawn.mount_target = mounted.map { _ in strings.pointer(mountTarget) }
      spawn.working_directory = mounted.map { _ in strings.pointer(FileManager.default.currentDirectoryPath) }
      spawn.privileged = plan.privileged ? 1 : 0
      spawn.uid = plan.user.uid
      spawn.gid = plan.user.gid
      spawn.reachable = strings.constArray(plan.reachable)
      spawn.reachable_count = Int32(plan.reachable.count)
      spawn.parent = options.endsWithParent ? getpid() : 0
      return protfs_spawn_confined(&spawn, &failure)
    }
    guard pid < 0 else { return pid }
    switch UInt32(failure.step) {
    case 0:
      throw ProtFSError.system("start a process for", path: command[0], errno: failure.error)
    case PROTFS_SPAWN_EXEC.rawValue:
      throw ExitStatus(
        code: failure.error == ENOENT ? 127 : 126, message: "Cannot run '\(command[0])': \(Errno(failure.error)).")
    default:
      throw Confinement.failure(
        step: UInt32(failure.step), code: failure.error, detail: failure.detail, plan: plan, device: device)
    }
  }

  /// The file `name` runs, looked up in `searchPath` as execvp does when it has no slash: the
  /// first executable regular file of that name.
  static func programPath(_ name: String, searchPath: String?) -> String? {
    if name.contains("/") { return name }
    for directory in (searchPath ?? "/usr/bin:/bin").split(separator: ":", omittingEmptySubsequences: false) {
      let path = (directory.isEmpty ? "." : String(directory)) + "/" + name
      var status = stat()
      if stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG, status.st_mode & 0o111 != 0 { return path }
    }
    return nil
  }

  /// This process's environment as "NAME=value" entries.
  private static func currentEnvironment() -> [String] {
    var entries: [String] = []
    var index = 0
    while let entry = environ[index] {
      entries.append(String(cString: entry))
      index += 1
    }
    return entries
  }
}

/// C strings and NULL-terminated arrays of them that live until `free()`: the child of a fork may
/// not allocate, so everything it reads is made before.
///
/// `@unchecked Sendable` is not claimed: one caller uses it on one thread.
private final class CStrings {
  private var strings: [UnsafeMutablePointer<CChar>] = []
  private var arrays: [UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>] = []

  /// A copy of `text`.
  func pointer(_ text: String) -> UnsafePointer<CChar> { UnsafePointer(copy(text)) }

  /// A NULL-terminated array of copies of `texts` (C's `char *const *`).
  func array<S: Collection<String>>(_ texts: S) -> UnsafePointer<UnsafeMutablePointer<CChar>?> {
    let array = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: texts.count + 1)
    for (index, text) in texts.enumerated() { array[index] = copy(text) }
    array[texts.count] = nil
    arrays.append(array)
    return UnsafePointer(array)
  }

  /// The same array, typed as C's `const char *const *`.
  func constArray(_ texts: [String]) -> UnsafePointer<UnsafePointer<CChar>?> {
    UnsafeRawPointer(array(texts)).assumingMemoryBound(to: UnsafePointer<CChar>?.self)
  }

  private func copy(_ text: String) -> UnsafeMutablePointer<CChar> {
    let copy = strdup(text)!
    strings.append(copy)
    return copy
  }

  /// Frees every string and array made.
  func free() {
    for string in strings { Glibc.free(string) }
    for array in arrays { array.deallocate() }
    strings = []
    arrays = []
  }
}
