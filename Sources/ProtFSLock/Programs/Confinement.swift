import Foundation
import ProtFS
import ProtFSSystem

/// Takes every privilege from the current process before it executes a program "on the device",
/// so the program meets the lock as an app does and cannot undo it.
///
/// As root the process becomes the app user (`AppUser.standard`): no supplementary groups, every
/// capability set empty (bounding and ambient included) and `no_new_privs`. Permission bits then
/// bind it, and as it owns no locked item and nothing in `.protfs/`, it cannot chmod a locked item
/// back or rewrite protfs's state; a user namespace (`unshare -r`) gives it no power over inodes
/// it does not own. Run by another user, protfs cannot change identity: the program keeps that
/// user's identity, without capabilities and with `no_new_privs`.
public enum Confinement {
  /// What the child of a confined start does before it executes the program, and what a failed
  /// step of it means (`ConfinedSpawn` forks the child; the steps are C between fork and exec).
  ///
  /// As root the child becomes `user`: no supplementary groups, every capability set empty
  /// (bounding and ambient included) and `no_new_privs`, then checks, as the user, that every
  /// directory from `/` down to the device's `Containers/` can be searched. Any failed step stops
  /// everything before the program runs: a half-confined process must not run it. The C calls are
  /// `prctl(PR_CAPBSET_DROP)`, `prctl(PR_SET_NO_NEW_PRIVS)`, `setgroups(2)`, `setresgid(2)`,
  /// `setresuid(2)` and `capset(2)`.
  ///
  /// With a mountpoint (an active protfs mount of the device) and as root, the child first enters
  /// a mount namespace of its own in which that mount covers the device's `Containers/`: the
  /// program then meets the class at every open, by the containers' usual paths, whatever the
  /// modes (docs/semantics.md §7).
  public struct Plan: Sendable, Equatable {
    /// Whether the child changes identity (protfs runs as root).
    public var privileged: Bool
    /// The identity it takes then.
    public var user: AppUser
    /// The directories the user must be able to search, `/` first, down to the device's
    /// `Containers/` (checked only when privileged).
    public var reachable: [String]

    /// The plan for a program on `device`: as `user` when this process may assume it.
    public init(device: Device, user: AppUser = .standard) {
      privileged = AppUser.canAssume
      self.user = user
      var ancestors = ["/"]
      var prefix = ""
      for component in (device.root + "/" + Device.containersDirectoryName).split(separator: "/") {
        prefix += "/" + component
        ancestors.append(prefix)
      }
      reachable = privileged ? ancestors : []
    }
  }

  /// The error for the child's failed step on `device`.
  package static func failure(_ failure: ConfinedLaunch.Failure, plan: Plan, device: Device) -> ProtFSError {
    let error = Errno(failure.errno)
    func refused(_ operation: String) -> ProtFSError {
      ProtFSError(
        .permissionDenied, "Cannot \(operation) before running the program: \(error).", errno: failure.errno,
        remedy: .confineAsRoot)
    }
    switch failure.step {
    case .signals: return refused("reset the signal handlers")
    case .session: return refused("start a session of its own")
    case .terminal: return refused("give the program a terminal of its own")
    case .descriptors: return refused("pass on the descriptors")
    case .descriptorLimit: return refused("restore the descriptor limit")
    case .cgroup: return refused("join the app's cgroup")
    case .mount: return refused("see the device's containers through its mount")
    case .sandbox: return refused("keep the app to its own container")
    case .boundingSet: return refused("empty the capability bounding set")
    case .ambient: return refused("clear the ambient capabilities")
    case .noNewPrivileges: return refused("set no_new_privs")
    case .groups: return refused("drop the supplementary groups")
    case .gid: return refused("switch to the app user's group \(plan.user.gid)")
    case .uid: return refused("switch to the app user \(plan.user)")
    case .capabilities: return refused("drop every capability")
    case .domain: return refused("give the app a Landlock domain of its own")
    case .verify:
      let failed = ConfinedLaunch.Checks(rawValue: failure.detail)
      let checks: [(ConfinedLaunch.Checks, String)] = [
        (.capabilities, "capabilities remain"), (.ambient, "ambient capabilities remain"),
        (.noNewPrivileges, "no_new_privs is not set"), (.ids, "the user and group ids are not all \(plan.user)"),
        (.groups, "supplementary groups remain"), (.boundingSet, "the bounding set is not empty"),
      ]
      let problems = checks.filter { failed.contains($0.0) }.map(\.1)
      return ProtFSError(
        .permissionDenied, "Cannot confine the program: \(problems.joined(separator: ", ")); it was not run.",
        remedy: .confineAsRoot)
    case .reach where plan.reachable.indices.contains(Int(failure.detail)):
      return unreachable(device, plan.reachable[Int(failure.detail)], error, as: plan.user)
    case .parent:
      return ProtFSError(.io, "The app's supervisor ended before the app started.", errno: failure.errno)
    case .reach, .exec, nil:
      return refused("start the program")
    }
  }

  /// The first directory from `/` down to `device`'s root that `user` may not search, by its
  /// permission bits (ACLs aside), as the error `protfs exec` would fail with; nil when every
  /// one lets the user through, or when this process cannot assume the user (it then runs
  /// programs as itself). `init` warns with it, before exec or an app launch meets it.
  public static func unreachableDirectory(_ device: Device, user: AppUser = .standard) -> ProtFSError? {
    guard AppUser.canAssume else { return nil }
    var prefix = ""
    for component in [""] + device.root.split(separator: "/").map(String.init) {
      prefix += component.isEmpty ? "" : "/" + component
      let path = prefix.isEmpty ? "/" : prefix
      var status = stat()
      guard case .success = Kernel.stat(path, &status) else { return nil }
      let bit: mode_t = status.st_uid == user.uid ? 0o100 : status.st_gid == user.gid ? 0o010 : 0o001
      if status.st_mode & bit == 0 {
        return unreachable(device, path, Errno(EACCES, call: .stat), as: user)
      }
    }
    return nil
  }

  /// The error for a directory on the way to the device's containers that the app user cannot
  /// search.
  package static func unreachable(_ device: Device, _ prefix: String, _ reason: Errno, as user: AppUser)
    -> ProtFSError
  {
    var status = stat()
    let detail =
      (try? Kernel.lstat(prefix, &status).get()) != nil
      ? " (mode 0\(String(status.st_mode & 0o7777, radix: 8)), owner \(status.st_uid):\(status.st_gid))" : ""
    return ProtFSError(
      .permissionDenied,
      "The app user \(user) that protfs exec and app launch run programs as cannot reach the device '\(device.root)': "
        + "it may not enter '\(prefix)'\(detail): \(reason).",
      path: prefix, syscall: reason.call, errno: reason.rawValue,
      remedy: .advice(
        "keep the device where every user can reach it, with --device DIR or $PROTFS_DEVICE (for example under /srv), or let other users through with `chmod o+x '\(prefix)'`"
      ))
  }
}
