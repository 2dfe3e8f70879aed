import Foundation
import ProtFS
import ProtFSDoctor
import ProtFSSystem

/// `protfs doctor`: what this machine gives protfs, one line per check.
package enum DoctorCommand {
  package static let command = Command(
    name: "doctor",
    abstract: "Check what this machine gives protfs: FUSE, xattrs, the cgroup freezer, the app user's access.",
    discussion: """
      One line per check, ok, warning or error, with a fix when it is not ok: FUSE
      (/dev/fuse and fusermount3, for protfs mount and apps' mounts), extended attributes
      (user.protfs.class, tried on a temporary file where the device is, or in its nearest parent
      when there is none yet), the cgroup v2 freezer where apps' cgroups go (without it, apps are
      suspended with SIGSTOP), the app user's access (uid 501 when run as root) to every directory
      down to the device and to each directory of PATH, dev.tty.legacy_tiocsti (0: no program
      can type into a terminal), and the kernel calls protfs prefers (getxattrat, fchmodat2,
      openat2; without them it takes slower fallbacks). Run it as root, as protfs runs apps. The
      exit status is 1 when any check is an error (warnings do not fail), else 0. With --json: an
      object with checks (each with name, title, level, detail and fix), errors and warnings.
      """,
    options: [CommonOptions.json],
    run: run
  )

  /// `--json`'s document.
  struct Report: Encodable {
    var checks: [DoctorCheck]
    var errors: Int
    var warnings: Int
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let user = AppUser.canAssume ? AppUser.standard : AppUser(uid: Kernel.getuid(), gid: Kernel.getgid())
    let doctor = Doctor(
      deviceRoot: invocation.device.root, searchPath: ProcessEnvironment.value("PATH") ?? "/usr/bin:/bin", user: user)
    let checks = doctor.checks()
    let errors = checks.filter { $0.level == .error }.count
    let warnings = checks.filter { $0.level == .warning }.count
    if invocation.flag(CommonOptions.json) {
      try Console.json(Report(checks: checks, errors: errors, warnings: warnings))
    } else {
      for check in checks {
        Console.out(
          pad(check.level.rawValue, 9) + "\(check.title): \(check.detail)" + (check.fix.map { " Fix: \($0)." } ?? ""))
      }
      Console.out(
        "\(checks.count) checks: \(checks.count - errors - warnings) ok, "
          + "\(warnings) \(warnings == 1 ? "warning" : "warnings"), \(errors) \(errors == 1 ? "error" : "errors").")
    }
    return errors > 0 ? 1 : 0
  }

  private static func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
  }
}
