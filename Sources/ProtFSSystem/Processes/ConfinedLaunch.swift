import CProtFSSys
import Foundation

/// A program started by a forked child that confines itself first (`protfs_spawn_confined`): the
/// child runs C alone, system calls only, between the fork and the exec, and reports a failed
/// step through a close-on-exec pipe. The child leads a session of its own, so that no terminal of
/// the caller's is its controlling terminal (none can be typed into with `TIOCSTI`). What the steps
/// mean for the lock is `Confinement`'s (ProtFSLock); this is the system call layer's half.
package struct ConfinedLaunch {
  /// Where the program may be, tried in order by the child (as its new identity) the way execvp
  /// tries the directories of `PATH`.
  package var paths: [String]
  /// Its arguments, `arguments[0]` included.
  package var arguments: [String]
  /// Its environment, "NAME=value" entries.
  package var environment: [String]
  /// A pseudo-terminal's slave that becomes the child's session's controlling terminal, and the
  /// standard streams (0, 1, 2) that are dup2'd from it (`TerminalRelay`).
  package var terminal: (slave: Int32, streams: [Int32])?
  /// A descriptor dup2'd in the child (`from` onto `to`).
  package var descriptor: (from: Int32, to: Int32)?
  /// Every descriptor from here on is closed in the child.
  package var closeFrom: Int32?
  /// The soft descriptor limit the child takes.
  package var descriptorLimit: rlim_t?
  /// An open descriptor of the cgroup directory the child starts in.
  package var cgroup: Int32?
  /// The containers as the child shows them to the program, in a mount namespace of its own: the
  /// containers' directory (`Containers/`), what is seen there, and the working directory entered
  /// again after (so that it leads through what is seen). That namespace takes no later mount from
  /// the system's, and every other protfs mount leaves it (lazily): a copy kept there would show
  /// other containers, and keep another mount's daemon serving after that mount's own unmount.
  package var containers: (directory: String, view: ContainersView, workingDirectory: String)?

  /// What the program sees at the containers' directory.
  package enum ContainersView {
    /// A protfs mount, bound over it from its mountpoint (`protfs exec`): every container through
    /// the mount.
    case mount(source: String)
    /// An app's sandbox: a read-only tmpfs holding `tree` (a detached copy of the app's container,
    /// through the protfs mount or the backing directory: `cloneMountTree`) alone, at `point`
    /// (the directory's `BUNDLE-ID`); the protfs mount the container was taken from leaves too.
    case sandbox(tree: Int32, point: String)
  }
  /// With an app's sandbox, the device's bundles as the app sees them: the bundles' directory
  /// (`Bundles/`) a read-only tmpfs holding `tree` (a detached copy of the app's own bundle,
  /// `cloneMountTree`) alone at `point` (its `BUNDLE-ID.app`), or nothing when `tree` is nil.
  package var bundles: (directory: String, tree: Int32?, point: String)?
  /// Whether the child enters a Landlock domain of its own (where the kernel has Landlock): no
  /// ptrace access and, with Landlock ABI 6, no signal of its processes reaches one outside it.
  package var isolated = false
  /// The identity the child takes (it drops the bounding set and supplementary groups first);
  /// nil keeps the caller's (an unprivileged protfs).
  package var identity: (uid: uid_t, gid: gid_t)?
  /// Directories the child, as its new identity, must be able to search.
  package var reachable: [String] = []
  /// Whether the child is killed when the calling thread ends, and refused if it already has.
  package var endsWithParent = false

  /// A launch of the first of `paths` that runs, with `arguments` and `environment`.
  package init(paths: [String], arguments: [String], environment: [String]) {
    self.paths = paths
    self.arguments = arguments
    self.environment = environment
  }

  /// The child's steps, in its order.
  package enum Step: Int32, Sendable {
    case signals = 1, sandbox, session, terminal, descriptors, descriptorLimit, cgroup, mount, boundingSet,
      ambient,
      noNewPrivileges, groups, gid, uid, capabilities, domain, verify, reach, parent, exec
  }

  /// The checks after the drop that found more than promised.
  package struct Checks: OptionSet, Sendable {
    package let rawValue: Int32
    package init(rawValue: Int32) { self.rawValue = rawValue }
    package static let capabilities = Checks(rawValue: 1)
    package static let ambient = Checks(rawValue: 2)
    package static let noNewPrivileges = Checks(rawValue: 4)
    package static let ids = Checks(rawValue: 8)
    package static let groups = Checks(rawValue: 16)
    package static let boundingSet = Checks(rawValue: 32)
  }

  /// Why the program did not run: the failed step (nil when the fork itself failed), its errno
  /// (0 for a failed check) and the step's detail (the failed `Checks`, the index in `reachable`,
  /// for `exec` with EACCES the index in `paths` of the first file found that may not be executed).
  package struct Failure: Error, Sendable {
    package var step: Step?
    package var errno: Int32
    package var detail: Int32
    /// For `exec`: a bit for each of the first 64 `paths` passed over because a directory on the
    /// way is closed to the child's identity.
    package var skipped: UInt64 = 0
  }

  /// A detached copy of the mount `directory` is on, from `directory` down (`open_tree(2)`,
  /// `OPEN_TREE_CLONE`): the sandbox's `tree`, which the child puts in place without resolving a
  /// path. The corresponding C function is `open_tree(2)`.
  package static func cloneMountTree(_ directory: Int32) -> Result<FileDescriptor, Errno> {
    valueOrErrno(.openTree) { protfs_clone_mount_tree(directory) }.map { FileDescriptor(owning: $0) }
  }

  /// Whether `fd` is on a FUSE file system (`fstatfs(2)`).
  package static func isOnFUSE(_ fd: Int32) -> Result<Bool, Errno> {
    valueOrErrno(.statfs) { protfs_is_on_fuse(fd) }.map { $0 == 1 }
  }

  /// Forks the child; returns its pid once the program runs.
  package func start() -> Result<pid_t, Failure> {
    let strings = CStrings()
    defer { strings.free() }
    var failure = protfs_spawn_failure()
    var spawn = protfs_spawn()
    spawn.paths = strings.constArray(paths)
    spawn.path_count = Int32(paths.count)
    spawn.argv = strings.array(arguments)
    spawn.envp = strings.array(environment)
    // What execvp does with a file the kernel cannot execute: run it as a shell script (the
    // child puts the path it found in place of the "-").
    spawn.shell_argv = strings.mutableArray(["/bin/sh", "-"] + arguments.dropFirst())
    spawn.terminal = terminal?.slave ?? -1
    spawn.terminal_streams = terminal?.streams.reduce(0) { $0 | (1 << $1) } ?? 0
    spawn.descriptor_from = descriptor?.from ?? -1
    spawn.descriptor_to = descriptor?.to ?? -1
    spawn.close_from = closeFrom ?? -1
    spawn.descriptor_limit = descriptorLimit.map { Int64($0) } ?? -1
    spawn.cgroup = cgroup ?? -1
    spawn.sandbox_tree = -1
    if let containers {
      spawn.mount_target = strings.pointer(containers.directory)
      spawn.working_directory = strings.pointer(containers.workingDirectory)
      switch containers.view {
      case .mount(let source): spawn.mount_source = strings.pointer(source)
      case .sandbox(let tree, let point):
        spawn.sandbox_tree = tree
        spawn.sandbox_point = strings.pointer(point)
      }
    }
    spawn.bundle_tree = -1
    if let bundles, case .sandbox = containers?.view {
      spawn.bundles_target = strings.pointer(bundles.directory)
      spawn.bundle_tree = bundles.tree ?? -1
      spawn.bundle_point = strings.pointer(bundles.point)
    }
    spawn.isolated = isolated ? 1 : 0
    spawn.privileged = identity == nil ? 0 : 1
    spawn.uid = identity?.uid ?? 0
    spawn.gid = identity?.gid ?? 0
    spawn.reachable = strings.constArray(reachable)
    spawn.reachable_count = Int32(reachable.count)
    spawn.parent = endsWithParent ? getpid() : 0
    let pid = protfs_spawn_confined(&spawn, &failure)
    guard pid < 0 else { return .success(pid) }
    return .failure(
      Failure(
        step: Step(rawValue: failure.step), errno: failure.error, detail: failure.detail,
        skipped: UInt64(failure.skipped)))
  }
}

/// C strings and NULL-terminated arrays of them that live until `free()`: the child of a fork may
/// not allocate, so everything it reads is made before.
final class CStrings {
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

  /// The same array, for C's `char **` (the child writes one entry of its own copy).
  func mutableArray<S: Collection<String>>(_ texts: S) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> {
    UnsafeMutablePointer(mutating: array(texts))
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
