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
  /// What `confine` did.
  public enum Outcome: Sendable, Equatable {
    /// The process is now the app user, with no capability and `no_new_privs`.
    case appUser(AppUser)
    /// The process kept its (unprivileged) identity; capabilities are gone and `no_new_privs` is set.
    case sameUser(uid_t)
  }

  /// Confines the current process; the next `execve` runs the program under it.
  ///
  /// As root, first checks, as the app user, that every directory from `/` down to the device's
  /// `Containers/` can be searched, and throws naming the first that cannot (nothing is executed
  /// then). Throws when any step fails: a half-confined process must not run the program.
  ///
  /// The corresponding C calls are `prctl(PR_CAPBSET_DROP)`, `prctl(PR_SET_NO_NEW_PRIVS)`,
  /// `setgroups(2)`, `setgid(2)`, `setuid(2)` and `capset(2)`.
  ///
  /// With `mountpoint` (an active `protfs mount` of the device) and as root, the process first
  /// enters a mount namespace of its own in which that mount covers the device's `Containers/`:
  /// the program then meets the class at every open, by the containers' usual paths, whatever
  /// the modes (docs/semantics.md §7).
  public static func confine(device: Device, user: AppUser = .standard, mountpoint: String? = nil)
    throws(ProtFSError) -> Outcome
  {
    let privileged = AppUser.canAssume
    if privileged, let mountpoint {
      let workingDirectory = FileManager.default.currentDirectoryPath
      try check("see the device's containers through its mount at '\(mountpoint)'") {
        Credentials.enterMount(mountpoint, over: device.root + "/" + Device.containersDirectoryName)
      }
      // A working directory inside the containers still names the backing directory: take it again
      // by its path, which now leads through the mount.
      _ = chdir(workingDirectory)
    }
    // Without CAP_SETPCAP the bounding set cannot shrink; no_new_privs and the empty permitted set
    // then keep the program from gaining anything through it.
    if privileged {
      try check("empty the capability bounding set") { Credentials.dropBoundingSet() }
    }
    try check("clear the ambient capabilities") { Credentials.clearAmbient() }
    try check("set no_new_privs") { Credentials.setNoNewPrivileges() }
    if privileged {
      try check("drop the supplementary groups") { Credentials.clearGroups() }
      try check("switch to the app user's group \(user.gid)") { setgid(user.gid) }
      try check("switch to the app user \(user)") { setuid(user.uid) }
    }
    // setuid from root to another uid already empties permitted and effective; inheritable stays.
    try check("drop every capability") { Credentials.clearCapabilities() }
    try verify(privileged ? user : nil)
    if privileged {
      try requireReachable(device, as: user)
      return .appUser(user)
    }
    return .sameUser(getuid())
  }

  /// Throws unless the process is exactly as confined as promised: a failed step the kernel did not
  /// report must not let the program run with more.
  private static func verify(_ user: AppUser?) throws(ProtFSError) {
    var problems: [String] = []
    if Credentials.capabilitiesAreEmpty() != 1 { problems.append("capabilities remain") }
    if Credentials.ambientIsEmpty() != 1 { problems.append("ambient capabilities remain") }
    if Credentials.noNewPrivileges() != 1 { problems.append("no_new_privs is not set") }
    if let user {
      if Credentials.idsAre(user.uid, user.gid) != 1 { problems.append("the user and group ids are not all \(user)") }
      if getgroups(0, nil) != 0 { problems.append("supplementary groups remain") }
      if Credentials.boundingSetIsEmpty() != 1 { problems.append("the bounding set is not empty") }
    }
    guard problems.isEmpty else {
      throw ProtFSError(
        .permissionDenied,
        "Cannot confine the program: \(problems.joined(separator: ", ")); it was not run.",
        remedy: .confineAsRoot)
    }
  }

  /// Throws naming the first directory on the way to the device's containers that the (already
  /// assumed) app user cannot search.
  package static func requireReachable(_ device: Device, as user: AppUser) throws(ProtFSError) {
    let target = device.root + "/" + Device.containersDirectoryName
    var ancestors = ["/"]
    var prefix = ""
    for component in target.split(separator: "/") {
      prefix += "/" + component
      ancestors.append(prefix)
    }
    for prefix in ancestors {
      // The errno is the one access(2) set, taken before any other call can overwrite it.
      guard case .failure(let reason) = valueOrErrno(.access, { access(prefix, X_OK) }) else { continue }
      if reason == .noSuchFile { return }  // the program gets its own clear error on a missing device
      var status = stat()
      let detail =
        lstat(prefix, &status) == 0
        ? " (mode 0\(String(status.st_mode & 0o7777, radix: 8)), owner \(status.st_uid):\(status.st_gid))" : ""
      throw ProtFSError(
        .permissionDenied,
        "The app user \(user) that protfs exec runs programs as cannot reach the device '\(device.root)': "
          + "it may not enter '\(prefix)'\(detail): \(reason).",
        path: prefix, errno: reason.rawValue,
        remedy: .advice(
          "let other users through with `chmod o+x '\(prefix)'`, or keep the device where every user can reach it (for example under /srv)"
        ))
    }
  }

  /// Runs one confinement step; any failure stops everything before the program runs.
  private static func check(_ operation: String, _ call: () -> Int32) throws(ProtFSError) {
    guard case .failure(let error) = valueOrErrno(.confine, call) else { return }
    throw ProtFSError(
      .permissionDenied, "Cannot \(operation) before running the program: \(error).", errno: error.rawValue,
      remedy: .confineAsRoot)
  }
}
