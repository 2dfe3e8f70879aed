import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// What the machine gives protfs (`protfs doctor`): FUSE, extended attributes where the device
/// is, the cgroup v2 freezer, the app user's way to the device and to the programs of `PATH`,
/// `dev.tty.legacy_tiocsti`, and the kernel calls protfs prefers.
///
/// Each check is a function of what it reads, so that tests can give it any machine; `checks()`
/// reads this one.
package struct Doctor: Sendable {
  /// The device's root (it need not exist yet).
  package var deviceRoot: String
  /// The search path of the programs protfs runs (`exec`'s and `app launch`'s command is found
  /// on the caller's).
  package var searchPath: String
  /// The user programs run as: the app user when protfs runs as root.
  package var user: AppUser

  /// A doctor for the device at `deviceRoot`, programs found on `searchPath`, run as `user`.
  package init(deviceRoot: String, searchPath: String, user: AppUser) {
    self.deviceRoot = deviceRoot
    self.searchPath = searchPath
    self.user = user
  }

  /// Every check, on this machine, in the order printed.
  package func checks() -> [DoctorCheck] {
    [
      Self.fuse(),
      Self.extendedAttributes(near: deviceRoot),
      Self.cgroupFreezer(in: AppProcesses.ownCgroup()),
      Self.deviceAccess(deviceRoot, user: user),
      Self.pathAccess(searchPath, user: user),
      Self.tiocsti(setting: Self.kernelSetting("/proc/sys/dev/tty/legacy_tiocsti")),
      Self.kernelCalls(getxattrat: Kernel.hasXattrAt, fchmodat2: Kernel.hasFchmodat2, openat2: Kernel.hasOpenat2),
    ]
  }

  /// FUSE (`protfs mount`, an app's own mount): `device` can be opened for reading and writing,
  /// and `fusermount3` is one of `helpers` (an unprivileged unmount and an app's mount ending with
  /// it need it).
  package static func fuse(
    device: String = "/dev/fuse", helpers: [String] = ["/usr/bin/fusermount3", "/bin/fusermount3"]
  ) -> DoctorCheck {
    let title = "FUSE"
    switch Kernel.open(device, O_RDWR | O_CLOEXEC) {
    case .success(let fd):
      _ = closeDescriptor(fd)
    case .failure(let e):
      return DoctorCheck(
        name: "fuse", title: title, level: .warning,
        detail: "'\(device)' cannot be opened (\(e.description)): protfs mount and apps' mounts are unavailable; "
          + "everything else works on the backing tree.",
        fix: "load the fuse module (modprobe fuse); in a container, pass /dev/fuse in")
    }
    guard
      let helper = helpers.first(where: { path in (try? Kernel.access(path, X_OK).get()) != nil })
    else {
      return DoctorCheck(
        name: "fuse", title: title, level: .warning,
        detail: "'\(device)' opens, but fusermount3 is not installed (looked for \(helpers.joined(separator: ", "))).",
        fix: "install fuse3 (apt-get install fuse3)")
    }
    return DoctorCheck(name: "fuse", title: title, level: .ok, detail: "'\(device)' opens; fusermount3 is \(helper).")
  }

  /// Extended attributes (`user.protfs.*`, where every class is kept) on the file system of the
  /// device: set and removed on its directory, or on its nearest existing parent when there is no
  /// device yet, as `init` tries them (`Device.checkExtendedAttributes`).
  package static func extendedAttributes(near deviceRoot: String) -> DoctorCheck {
    let title = "Extended attributes"
    let directory = nearestExistingDirectory(deviceRoot)
    do {
      try Device.checkExtendedAttributes(DirectoryHandle(path: directory))
    } catch  where error.code == .xattrUnsupported {
      return DoctorCheck(
        name: "xattr", title: title, level: .error,
        detail: "The file system of '\(directory)' has no user extended attributes: classes cannot be kept there.",
        fix: "keep the device on a file system with user extended attributes (ext4, xfs, btrfs, tmpfs)")
    } catch {
      return DoctorCheck(
        name: "xattr", title: title, level: .warning,
        detail: "Could not try an attribute on '\(directory)': \(error.message)",
        fix: "run protfs doctor as root, or as the device's owner")
    }
    return DoctorCheck(
      name: "xattr", title: title, level: .ok,
      detail: "The file system of '\(directory)' keeps user.protfs.* attributes.")
  }

  /// The cgroup v2 freezer where protfs puts apps (below `cgroup`, this process's own cgroup, nil
  /// when there is no writable cgroup v2 one): a cgroup made there and removed again must have a
  /// writable `cgroup.freeze`.
  package static func cgroupFreezer(in cgroup: String?) -> DoctorCheck {
    let title = "cgroup v2 freezer"
    let fallback =
      "apps are suspended with SIGSTOP instead, which a process of theirs can undo (SIGCONT), and a process "
      + "that leaves their process group escapes termination"
    guard let cgroup else {
      return DoctorCheck(
        name: "cgroup-freezer", title: title, level: .warning,
        detail: "No writable cgroup v2 directory of this process's: \(fallback).",
        fix: "run protfs as root on a host with the unified cgroup v2 hierarchy (systemd's default), "
          + "or delegate a cgroup to it")
    }
    let probe = cgroup + "/protfs-app.doctor-\(Kernel.getpid())"
    guard case .success = Kernel.mkdir(probe, 0o755) else {
      return DoctorCheck(
        name: "cgroup-freezer", title: title, level: .warning,
        detail: "Cannot make a cgroup in '\(cgroup)' (\(Errno(errno).description)): \(fallback).",
        fix: "run protfs as root, or delegate the cgroup to its user")
    }
    defer { _ = Kernel.rmdir(probe) }
    guard case .success = Kernel.access(probe + "/cgroup.freeze", W_OK) else {
      return DoctorCheck(
        name: "cgroup-freezer", title: title, level: .warning,
        detail: "A cgroup in '\(cgroup)' has no writable cgroup.freeze (Linux 5.2 and later have it): \(fallback).",
        fix: "use a kernel with the cgroup v2 freezer (5.2 or later)")
    }
    return DoctorCheck(
      name: "cgroup-freezer", title: title, level: .ok, detail: "Apps' cgroups in '\(cgroup)' can be frozen.")
  }

  /// Whether `user` can search every directory from `/` to the device (and its `Containers/`),
  /// which `exec` and every app launch need.
  package static func deviceAccess(_ deviceRoot: String, user: AppUser) -> DoctorCheck {
    let title = "App user's access to the device"
    let containers = deviceRoot + "/" + Device.containersDirectoryName
    let target = FileManager.default.fileExists(atPath: containers) ? containers : deviceRoot
    if let closed = user.firstClosedDirectory(to: target, includingLast: true) {
      return DoctorCheck(
        name: "device-access", title: title, level: .error,
        detail: "uid \(user.uid) cannot search '\(closed)', on the way to '\(target)': "
          + "exec and app launch fail there.",
        fix: "let other users through (chmod o+x '\(closed)'), or keep the device elsewhere (--device, $PROTFS_DEVICE)")
    }
    return DoctorCheck(
      name: "device-access", title: title, level: .ok,
      detail: "uid \(user.uid) can search every directory to '\(target)'.")
  }

  /// Whether `user` can search each directory of `searchPath`: a program in one it cannot is not
  /// found for it (exec skips the directory).
  package static func pathAccess(_ searchPath: String, user: AppUser) -> DoctorCheck {
    let title = "App user's access to PATH"
    var seen = Set<String>()
    let directories = searchPath.split(separator: ":").map(String.init).filter {
      $0.hasPrefix("/") && seen.insert($0).inserted
    }
    let closed = directories.filter { user.firstClosedDirectory(to: $0, includingLast: true) != nil }
    if closed.isEmpty {
      return DoctorCheck(
        name: "path-access", title: title, level: .ok,
        detail: "uid \(user.uid) can search every directory of PATH that exists.")
    }
    return DoctorCheck(
      name: "path-access", title: title, level: .warning,
      detail: "uid \(user.uid) cannot search \(closed.map { "'\($0)'" }.joined(separator: ", ")): "
        + "exec and app launch skip them, so their programs are not found.",
      fix: "move the programs apps run to a directory other users can enter (/usr/local/bin), or give their full path")
  }

  /// `dev.tty.legacy_tiocsti` (`setting`, nil when the kernel has none, before Linux 6.2): 0 keeps
  /// any program from typing into a terminal with TIOCSTI.
  package static func tiocsti(setting: String?) -> DoctorCheck {
    let title = "dev.tty.legacy_tiocsti"
    let fix = "sysctl -w dev.tty.legacy_tiocsti=0 (and set it in /etc/sysctl.d to keep it)"
    switch setting?.trimmingCharacters(in: .whitespacesAndNewlines) {
    case "0":
      return DoctorCheck(
        name: "tiocsti", title: title, level: .ok, detail: "0: no program can type into a terminal (TIOCSTI).")
    case nil:
      return DoctorCheck(
        name: "tiocsti", title: title, level: .warning,
        detail: "The kernel has no such setting (before Linux 6.2): TIOCSTI is allowed; protfs still runs every "
          + "program in a session and on a terminal of its own.",
        fix: "use Linux 6.2 or later and set dev.tty.legacy_tiocsti=0")
    case let value?:
      return DoctorCheck(
        name: "tiocsti", title: title, level: .warning,
        detail: "\(value): a program on a terminal may type into it (TIOCSTI); protfs still runs every program in a "
          + "session and on a terminal of its own.",
        fix: fix)
    }
  }

  /// The kernel calls protfs prefers, each with the fallback it takes without it.
  package static func kernelCalls(getxattrat: Bool, fchmodat2: Bool, openat2: Bool) -> DoctorCheck {
    let title = "Kernel calls"
    let missing = [
      ("getxattrat", getxattrat, "attributes through /proc/self/fd"),
      ("fchmodat2", fchmodat2, "fchmodat after a check for symlinks"),
      ("openat2", openat2, "paths opened one component at a time"),
    ].filter { !$0.1 }
    if missing.isEmpty {
      return DoctorCheck(
        name: "kernel-calls", title: title, level: .ok, detail: "getxattrat, fchmodat2 and openat2 are there.")
    }
    return DoctorCheck(
      name: "kernel-calls", title: title, level: .warning,
      detail: "Missing: " + missing.map { "\($0.0) (protfs uses \($0.2))" }.joined(separator: ", ") + ".",
      fix:
        "use Linux 6.13 or later (getxattrat), 6.6 (fchmodat2), 5.6 (openat2), without a seccomp filter refusing them")
  }

  /// The nearest directory that exists at or above `path`.
  static func nearestExistingDirectory(_ path: String) -> String {
    var directory = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    var isDirectory: ObjCBool = false
    while directory != "/",
      !(FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue)
    {
      directory = (directory as NSString).deletingLastPathComponent
    }
    return directory
  }

  /// A kernel setting's text (a /proc/sys file), nil when there is none.
  static func kernelSetting(_ path: String) -> String? {
    Kernel.readKernelFile(path).map { String(decoding: $0, as: UTF8.self) }
  }
}
