import Foundation
import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSSystem

/// The one way protfs starts untrusted code: `exec`, every app launch (a user's, a prewarm, and
/// the system's relaunches for fetches, pushes, tasks and session events, which run `app launch`)
/// go through `start`. A forked child takes every privilege from itself as `Confinement`
/// describes, leads a session of its own (on the relayed pseudo-terminal when there is one), gets
/// every signal at its default and the environment `ProgramEnvironment` builds, and executes the
/// program (`ConfinedLaunch`). A confinement that fails is this process's error, and a program
/// that runs is the child itself, with no second protfs started in between.
package enum ConfinedSpawn {
  /// The program could not be executed (`execve` failed in the child): `errno` says why
  /// (ENOENT: not found; anything else: found, but not executable).
  package struct ExecFailure: Error, Sendable {
    /// The program as it was named.
    package var program: String
    /// Why `execve` failed.
    package var errno: Int32
    /// The first file found that the program's user may not execute (with EACCES).
    package var file: String? = nil
    /// The directories searched for the program that its user cannot search (a `PATH` entry, or
    /// the program's own directory when it was named with a slash), in the order tried.
    package var closedDirectories: [String] = []
  }

  /// What the child gets besides its confinement.
  package struct Options {
    /// A protfs mount of the device, seen over its `Containers/` (as root only).
    package var mountpoint: String?
    /// The pseudo-terminal the child gets in place of the caller's terminal (`TerminalRelay`),
    /// when any standard stream is one.
    package var terminal: TerminalRelay?
    /// A descriptor dup2'd in the child (`from` onto `to`).
    package var descriptor: (from: Int32, to: Int32)?
    /// The variables the system sets for the program (an app's `HOME`, `PROTFS_*`), which
    /// nothing replaces. The rest of its environment is `ProgramEnvironment`'s, never the caller's.
    package var environment: [String: String] = [:]
    /// `--env`'s NAME=value pairs: what the caller passes on purpose (besides `PROTFS_CHILD_*`).
    package var passed: [(name: String, value: String)] = []
    /// Variables the system sets unless the caller passes them (`exec`'s `HOME`).
    package var defaults: [String: String] = [:]
    /// Whether the child keeps only its standard streams and `descriptor`: an app inherits nothing
    /// else of its supervisor (a mount's connection to fusermount3, which would keep the mount
    /// alive after the supervisor ended).
    package var closingOthers = false
    /// The soft descriptor limit the child takes (a supervisor serving a mount raised its own).
    package var descriptorLimit: rlim_t?
    /// The cgroup directory the child joins before anything of the program runs.
    package var cgroup: String?
    /// Whether the program is killed when this process ends, as an app ends with its system.
    package var endsWithParent = false
    /// The app (its bundle id) whose sandbox the program runs in: its processes are a Landlock
    /// domain of their own and, as root, of the device's containers it sees its own alone (through
    /// `mountpoint`, else the backing directory), of its bundles its own alone, and no protfs mount (docs/semantics.md §10).
    package var sandbox: String?

    /// Options as given; every one left out is the default.
    package init(
      mountpoint: String? = nil, terminal: TerminalRelay? = nil, descriptor: (from: Int32, to: Int32)? = nil,
      environment: [String: String] = [:], passed: [(name: String, value: String)] = [],
      defaults: [String: String] = [:], closingOthers: Bool = false, descriptorLimit: rlim_t? = nil,
      cgroup: String? = nil, endsWithParent: Bool = false, sandbox: String? = nil
    ) {
      self.mountpoint = mountpoint
      self.terminal = terminal
      self.descriptor = descriptor
      self.environment = environment
      self.passed = passed
      self.defaults = defaults
      self.closingOthers = closingOthers
      self.descriptorLimit = descriptorLimit
      self.cgroup = cgroup
      self.endsWithParent = endsWithParent
      self.sandbox = sandbox
    }
  }

  /// Starts `command` confined on `device`; returns its pid once it runs. Throws the failed step's
  /// error (`ProtFSError`), or `ExecFailure` when the program cannot be executed.
  package static func start(_ command: [String], device: Device, _ options: Options = Options()) throws -> pid_t {
    let plan = Confinement.Plan(device: device)
    let caller = ProcessEnvironment.all()
    let environment = ProgramEnvironment.build(
      caller: caller, passed: options.passed, system: options.environment, defaults: options.defaults,
      terminal: options.terminal != nil,
      protfsDirectory: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
        .map { URL(fileURLWithPath: $0).deletingLastPathComponent().path })
    // CMD is the caller's to name: it is found on the caller's PATH, though it runs with its own.
    let searchPath = caller["PATH"]
    var cgroup: Int32?
    if let directory = options.cgroup {
      cgroup = try Kernel.open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        .orThrow("open the app's cgroup", path: directory)
    }
    defer { if let cgroup { closeDescriptor(cgroup) } }
    let paths = candidates(command[0], searchPath: searchPath)
    var launch = ConfinedLaunch(paths: paths, arguments: command, environment: environment)
    if let terminal = options.terminal { launch.terminal = (terminal.slaveDescriptor, terminal.streams) }
    launch.descriptor = options.descriptor
    launch.closeFrom = options.closingOthers ? max(3, (options.descriptor?.to ?? 2) + 1) : nil
    launch.descriptorLimit = options.descriptorLimit
    launch.cgroup = cgroup
    // The copies of the app's mounts the child attaches, held until it has.
    let trees = plan.privileged ? try seeContainers(&launch, device: device, options) : []
    defer { for tree in trees { tree.close() } }
    launch.isolated = options.sandbox != nil
    launch.identity = plan.privileged ? (plan.user.uid, plan.user.gid) : nil
    launch.reachable = plan.reachable
    launch.endsWithParent = options.endsWithParent
    return try started(launch.start(), command: command, paths: paths, plan: plan, device: device)
  }

  /// What the child sees of the device's containers and bundles (as root): an app its own alone,
  /// through copies of their mounts taken now (returned, for the caller to close once the child
  /// started); a program through the device's mount when there is one.
  private static func seeContainers(_ launch: inout ConfinedLaunch, device: Device, _ options: Options) throws
    -> [FileDescriptor]
  {
    let containers = device.root + "/" + Device.containersDirectoryName
    guard let bundleID = options.sandbox else {
      if let mountpoint = options.mountpoint {
        launch.containers = (containers, .mount(source: mountpoint), FileManager.default.currentDirectoryPath)
      }
      return []
    }
    let tree = try containerTree(bundleID, mountpoint: options.mountpoint, device: device)
    var trees = [tree]
    // An app starts in its own container, wherever its launch was made: root's working
    // directory (perhaps below a directory closed to the app user) is never the app's.
    let home = containers + "/" + bundleID
    launch.containers = (containers, .sandbox(tree: tree.rawValue, point: home), home)
    if let (bundles, bundle) = try bundleTree(bundleID, device: device) {
      if let bundle { trees.append(bundle) }
      launch.bundles = (bundles, bundle?.rawValue, bundles + "/" + bundleID + AppBundle.directoryExtension)
    }
    return trees
  }

  /// The pid of a started child, or the error of the step that failed.
  private static func started(
    _ result: Result<pid_t, ConfinedLaunch.Failure>, command: [String], paths: [String], plan: Confinement.Plan,
    device: Device
  ) throws -> pid_t {
    switch result {
    case .success(let pid):
      return pid
    case .failure(let failure) where failure.step == nil:
      throw ProtFSError.system("start a process for", path: command[0], errno: failure.errno)
    case .failure(let failure) where failure.step == .exec:
      let file =
        failure.errno == EACCES && paths.indices.contains(Int(failure.detail)) ? paths[Int(failure.detail)] : nil
      var closed: [String] = []
      for index in paths.indices where index < 64 && failure.skipped & (1 << UInt64(index)) != 0 {
        let parent = Self.directory(of: paths[index])
        if !closed.contains(parent) { closed.append(parent) }
      }
      throw ExecFailure(program: command[0], errno: failure.errno, file: file, closedDirectories: closed)
    case .failure(let failure):
      throw Confinement.failure(failure, plan: plan, device: device)
    }
  }

  /// A detached copy of app `bundleID`'s container for its sandbox, taken through descriptors:
  /// through `mountpoint` (checked to be a FUSE mount) and, without one, from the backing
  /// directory, each walked without following a link at the container, so that whatever the paths
  /// lead to later, the app gets its own container.
  private static func containerTree(_ bundleID: String, mountpoint: String?, device: Device) throws(ProtFSError)
    -> FileDescriptor
  {
    let container: DirectoryHandle
    if let mountpoint {
      let mount = try DirectoryHandle(path: mountpoint)
      guard case .success(true) = ConfinedLaunch.isOnFUSE(mount.fd) else {
        throw ProtFSError(
          .io, "'\(mountpoint)' is no longer the device's mount, which the app was to see its container through.",
          path: mountpoint, remedy: .advice("launch the app again"))
      }
      container = try mount.openDirectory(bundleID)
    } else {
      container = try device.openDirectory(device.container(try BundleID(bundleID)).path)
    }
    return try ConfinedLaunch.cloneMountTree(container.fd).orThrow(
      "take a copy of the container's mount for the app's sandbox from", path: container.path)
  }

  /// The device's bundles' directory and a detached copy of app `bundleID`'s own bundle (nil when
  /// it has none) for its sandbox, taken through descriptors as `containerTree` takes the
  /// container; nil when the device has no bundles at all.
  private static func bundleTree(_ bundleID: String, device: Device) throws(ProtFSError)
    -> (String, FileDescriptor?)?
  {
    let bundles: DirectoryHandle
    do {
      bundles = try device.openRoot().openDirectory(AppBundle.directoryName)
    } catch  where error.code == .notFound {
      return nil
    }
    let path = device.root + "/" + AppBundle.directoryName
    let bundle: DirectoryHandle
    do {
      bundle = try bundles.openDirectory(bundleID + AppBundle.directoryExtension)
    } catch  where error.code == .notFound {
      return (path, nil)
    }
    let tree = try ConfinedLaunch.cloneMountTree(bundle.fd).orThrow(
      "take a copy of the bundle's mount for the app's sandbox from", path: bundle.path)
    return (path, tree)
  }

  /// The pseudo-terminal for a child started now, when any of this process's standard streams is
  /// a terminal: its slave given to the app user the child becomes (as root).
  package static func terminalForStandardStreams() throws(ProtFSError) -> TerminalRelay? {
    try TerminalRelay.forStandardStreams(owner: AppUser.canAssume ? AppUser.standard.uid : nil)
  }

  /// The directory `path` names an entry of ("/" for "/x").
  private static func directory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
  }

  /// Where `name` may be, in the order execvp tries: itself when it has a slash, else in each
  /// directory of `searchPath` (glibc's default without one).
  package static func candidates(_ name: String, searchPath: String?) -> [String] {
    if name.contains("/") { return [name] }
    return (searchPath ?? "/bin:/usr/bin").split(separator: ":", omittingEmptySubsequences: false).map {
      ($0.isEmpty ? "." : String($0)) + "/" + name
    }
  }
}
