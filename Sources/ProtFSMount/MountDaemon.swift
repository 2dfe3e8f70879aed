import CFuse3
import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// Mounting and unmounting a device (docs/semantics.md §7): the libfuse session, its
/// multithreaded loop, the readiness check, and the registry entry while it runs.
package enum MountDaemon {
  /// The `f_type` statfs(2) reports for a FUSE filesystem.
  static let fuseMagic = 0x6573_5546

  /// The mountpoint `path` made absolute against the current directory.
  package static func mountpoint(_ path: String) -> String {
    Device.normalize(path, relativeTo: FileManager.default.currentDirectoryPath)
  }

  /// Throws one clear error unless this process can mount: `/dev/fuse` present and openable, and
  /// root (who alone can let other users into the mount and hand new items to their creators).
  package static func checkAvailable() throws(ProtFSError) {
    guard Kernel.geteuid() == 0 else {
      throw ProtFSError(
        .permissionDenied, "Cannot mount: only root can serve a device to every user and process.",
        errno: EPERM, remedy: .runAsRoot(orChown: false))
    }
    switch Kernel.open("/dev/fuse", O_RDWR | O_CLOEXEC) {
    case .success(let fd): closeDescriptor(fd)
    case .failure(let e):
      throw ProtFSError(
        .io, "Cannot mount: FUSE is not available here ('/dev/fuse': \(e.description)).",
        path: "/dev/fuse", syscall: e.call, errno: e.rawValue, remedy: .enableFuse)
    }
  }

  /// Checks that `mountpoint` is an empty-or-not directory outside the device (or, for an app's
  /// own mount, its directory in the device's state), not mounted already.
  package static func checkMountpoint(_ mountpoint: String, device: Device, forApp: String? = nil)
    throws(ProtFSError)
  {
    var s = stat()
    guard case .success = Kernel.stat(mountpoint, &s), s.st_mode & S_IFMT == S_IFDIR else {
      throw ProtFSError(
        .notFound, "Cannot mount at '\(mountpoint)': it is not a directory.", path: mountpoint, errno: ENOTDIR,
        remedy: .advice("create the directory first (mkdir -p)"))
    }
    let appMount = forApp.map { mountpoint == HostedMount.mountpoint(of: $0, on: device) } ?? false
    if !appMount && (device.contains(mountpoint) || Device(root: mountpoint).contains(device.root)) {
      throw ProtFSError(
        .invalidArgument, "Cannot mount the device '\(device.root)' at '\(mountpoint)': one is inside the other.",
        path: mountpoint, remedy: .advice("choose a mountpoint outside the device"))
    }
    if MountRegistry.protfsMountpoints().contains(mountpoint) {
      throw ProtFSError(
        .alreadyExists, "'\(mountpoint)' is already a protfs mount.", path: mountpoint, errno: EBUSY,
        remedy: .unmount(mountpoint: mountpoint))
    }
  }

  /// Mounts `device` at `mountpoint` and serves it until it is unmounted (or the process gets
  /// SIGINT, SIGTERM or SIGHUP). `ready` runs once the mount answers, on another thread.
  package static func serve(device: Device, at mountpoint: String, ready: @escaping @Sendable () -> Void)
    throws(ProtFSError)
  {
    try serve(device: device, at: mountpoint, forApp: nil, handlingSignals: true, ready: ready)
  }

  /// As `serve(device:at:ready:)`; `forApp` names the app whose supervisor serves the mount for its
  /// app alone (kept in the registry), and without `handlingSignals` the process's signals stay its
  /// own: the loop ends when the mount is unmounted (`HostedMount.stop()`).
  static func serve(
    device: Device, at mountpoint: String, forApp: String?, handlingSignals: Bool,
    ready: @escaping @Sendable () -> Void
  ) throws(ProtFSError) {
    try checkAvailable()
    try checkMountpoint(mountpoint, device: device, forApp: forApp)
    raiseDescriptorLimit()
    // A supervisor's memory is the app's system's, not a daemon's to tune.
    if handlingSignals { protfs_mount_tune_memory() }
    let fs = try MountFileSystem(device: device)
    var ops = MountOperations.table()
    // nosuid, nodev: a container holds data; no program in it gains rights, no node in it opens a device.
    var options = "allow_other,default_permissions,nosuid,nodev,fsname=protfs,subtype=protfs"
    // An app's mount ends with its supervisor, also one killed with SIGKILL: fusermount3 watches
    // the connection and unmounts when it closes.
    if !handlingSignals { options += ",auto_unmount" }
    let arguments = ["protfs", "-o", options]
    var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
    defer { for pointer in argv { free(pointer) } }
    let userdata = Unmanaged.passUnretained(fs).toOpaque()
    guard let session = protfs_fuse_session_new(Int32(argv.count), &argv, &ops, userdata) else {
      throw ProtFSError(
        .io, "Cannot start the FUSE session for '\(mountpoint)'.", path: mountpoint, remedy: .enableFuse)
    }
    defer { fuse_session_destroy(session) }
    fs.session.withLock { $0 = UInt(bitPattern: session) }
    defer { fs.session.withLock { $0 = 0 } }
    if handlingSignals { try handleSignals(session, mountpoint: mountpoint) }
    defer { if handlingSignals { fuse_remove_signal_handlers(session) } }
    guard fuse_session_mount(session, mountpoint) == 0 else {
      throw ProtFSError(
        .permissionDenied, "Cannot mount the device at '\(mountpoint)' (libfuse printed why above).",
        path: mountpoint, remedy: .enableFuse)
    }
    let registry = MountRegistry(device: device)
    let pid = Kernel.getpid()
    defer { registry.remove(pid: pid) }
    // An app's mount is its supervisor's, which starts the app once the mount answers: it is
    // ready as soon as the kernel's connection is set up, and recorded after (only `status` reads
    // an app mount's record; one of a mount gone by then is passed over). The device's mount is
    // ready once it is recorded, since `exec` finds it there.
    if forApp != nil { fs.onConnected.withLock { $0 = ready } }
    let unregistered = Mutex<ProtFSError?>(nil)
    Thread.detachNewThread {
      record(in: registry, mountpoint: mountpoint, pid: pid, forApp: forApp, ready: ready) { error in
        unregistered.withLock { $0 = error }
      }
    }
    MountStateWatcher.start(fs)
    _ = protfs_fuse_loop_mt(session, 16)
    fuse_session_unmount(session)
    withExtendedLifetime(fs) {}
    if let error = unregistered.withLock({ $0 }) { throw error }
  }

  /// Lets SIGINT, SIGTERM and SIGHUP end `session`'s loop, through libfuse's handlers.
  private static func handleSignals(_ session: OpaquePointer, mountpoint: String) throws(ProtFSError) {
    // A parent may have left these blocked (a spawned child inherits its signal mask): then
    // Ctrl-C or a `kill` would never reach libfuse's handlers, which end the loop.
    var signals = sigset_t()
    sigemptyset(&signals)
    for signal in [SIGINT, SIGTERM, SIGHUP] { sigaddset(&signals, signal) }
    Kernel.pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    guard fuse_set_signal_handlers(session) == 0 else {
      throw ProtFSError(.io, "Cannot install the FUSE signal handlers.", path: mountpoint)
    }
  }

  /// Records the mount at `mountpoint` in `registry` once it serves, then (for the device's mount)
  /// calls `ready`. A device's mount that cannot be recorded is given to `unrecorded`, then
  /// unmounted (so the loop finds the error once it ends).
  private static func record(
    in registry: MountRegistry, mountpoint: String, pid: Int32, forApp: String?, ready: () -> Void,
    unrecorded: (ProtFSError) -> Void
  ) {
    // statfs is answered by the loop: once it reports FUSE, the mount is up and serving.
    guard protfs_filesystem_type(mountpoint) == fuseMagic else { return }
    var record = MountRecord(mountpoint: mountpoint, pid: pid, since: Date())
    record.forApp = forApp
    do throws(ProtFSError) {
      try registry.register(record)
    } catch {
      // `lock` waits only for the mounts it finds recorded: one it cannot find could serve pages
      // read before a lock. The device's mount is not started; an app's, already serving its
      // app, is reported on the supervisor's standard error.
      if forApp == nil {
        unrecorded(error)
        _ = Kernel.umount2(mountpoint, Int32(PROTFS_MOUNT_MNT_DETACH))
      } else {
        let line = "protfs app: the app's mount is not recorded, so `lock` does not wait for it: \(error.message)\n"
        FileHandle.standardError.write(Data(line.utf8))
      }
      return
    }
    if forApp == nil { ready() }
  }

  /// Lifts the descriptor limit: the daemon holds one descriptor per item the kernel knows.
  static func raiseDescriptorLimit() {
    var limit = rlimit()
    guard Kernel.getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    var wanted = rlimit(rlim_cur: 1 << 20, rlim_max: max(limit.rlim_max, 1 << 20))
    if Kernel.setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &wanted) != 0 {
      limit.rlim_cur = limit.rlim_max
      _ = Kernel.setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    }
  }

  /// How an unmount went.
  package enum UnmountOutcome: Sendable, Equatable {
    /// Unmounted; its daemon has ended.
    case unmounted
    /// Files were still open: detached now, the daemon ends when the last one closes.
    case detached
  }

  /// Unmounts the protfs mount at `mountpoint`, also when its daemon was killed ("Transport
  /// endpoint is not connected"), and waits for the daemon recorded for it in `device` to end.
  package static func unmount(_ mountpoint: String, device: Device) throws(ProtFSError) -> UnmountOutcome {
    guard MountRegistry.protfsMountpoints().contains(mountpoint) else {
      throw ProtFSError(
        .notFound, "'\(mountpoint)' is not a protfs mount.", path: mountpoint, errno: EINVAL,
        remedy: .advice("list the device's mounts with its status"))
    }
    var outcome = UnmountOutcome.unmounted
    switch Kernel.umount2(mountpoint, 0) {
    case .success: break
    case .failure(let e) where e.rawValue == EBUSY:
      _ = try Kernel.umount2(mountpoint, Int32(PROTFS_MOUNT_MNT_DETACH)).orThrow(
        "unmount", path: mountpoint)
      outcome = .detached
    case .failure(let e) where e == .notPermitted:
      try fusermount(mountpoint)
    case .failure(let e):
      throw ProtFSError.system("unmount", path: mountpoint, errno: e)
    }
    let registry = MountRegistry(device: device)
    for record in registry.records() where record.mountpoint == mountpoint {
      if outcome == .unmounted, Kernel.waitForExit(of: record.pid, milliseconds: 10_000) {
        registry.remove(pid: record.pid)
      }
    }
    return outcome
  }

  /// `fusermount3 -u -z`, for a user who may not call umount2 but mounted through fusermount3.
  private static func fusermount(_ mountpoint: String) throws(ProtFSError) {
    let program = "/usr/bin/fusermount3"
    let launch = PlainLaunch(
      path: program, arguments: [program, "-u", "-z", mountpoint], environment: ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"])
    guard case .success(let pid) = launch.start() else {
      throw ProtFSError(
        .io, "Cannot run fusermount3 to unmount '\(mountpoint)'.", path: mountpoint, remedy: .enableFuse)
    }
    guard case .success(0) = Kernel.waitForChild(pid) else {
      throw ProtFSError(
        .permissionDenied, "fusermount3 could not unmount '\(mountpoint)'.", path: mountpoint, errno: EPERM,
        remedy: .runAsRoot(orChown: false))
    }
  }
}
