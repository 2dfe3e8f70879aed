import CProtFSSys
import Foundation

/// Makes permission bits bind the current process and whatever it executes, even as root (SPEC §4).
public enum Confinement {
  /// The capabilities that let root ignore permission bits: CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH.
  static let overrides: [Int32] = [1, 2]

  /// Removes CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding and inheritable sets and
  /// clears the ambient set, so that after `execve` the program cannot hold them
  /// (what `setpriv --bounding-set=-dac_override,-dac_read_search` does).
  ///
  /// The corresponding C calls are `prctl(PR_CAPBSET_DROP)`, `capset(2)` and `prctl(PR_CAP_AMBIENT)`.
  public static func dropPermissionOverrides() throws(ProtFSError) {
    for cap in overrides {
      // An unprivileged caller holds neither capability and may not shrink its bounding set
      // (that needs CAP_SETPCAP): permission bits already bind it, so there is nothing to drop.
      if protfs_capbset_read(cap) == 1, protfs_capbset_drop(cap) != 0, protfs_cap_effective(cap) == 1 {
        throw ProtFSError(
          .permissionDenied,
          "Cannot drop capability \(cap) from the bounding set: \(String(cString: strerror(errno))).", errno: errno,
          hint: "run protfs exec as root, or with CAP_SETPCAP")
      }
      _ = protfs_cap_inheritable_drop(cap)
    }
    _ = protfs_cap_ambient_clear()
  }
}
