import Foundation
import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSMount
import ProtFSSystem

/// `protfs __exec-confined CMD…`: the hidden second half of `exec`. Takes every privilege from
/// itself (as root: becomes the app user), then replaces itself with CMD.
package enum ExecConfinedCommand {
  package static let command = Command(
    name: "__exec-confined",
    abstract: "Become the app user without capabilities, then execute a command (used by exec).",
    takesTrailingCommand: true,
    isHidden: true,
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    let parent = getppid()
    // An app runs through the mount its supervisor serves for it, when there is one (named in the
    // environment by the supervisor, and believed only as an active mount of this device).
    let registry = MountRegistry(device: device)
    let wanted = ProcessInfo.processInfo.environment[HostedMount.variable]
    unsetenv(HostedMount.variable)
    HostedMount.restoreDescriptorLimit()
    let mount =
      !device.isInitialized
      ? nil
      : wanted.flatMap { name in registry.active().first { $0.mountpoint == name } } ?? registry.deviceMounts().first
    // An app's first process joins the app's cgroup before anything of the app runs, so every
    // process the app ever starts is held with it (while still root: the cgroup is root's).
    if let cgroup = ProcessInfo.processInfo.environment[AppProcesses.joinVariable] {
      try AppProcesses.join(cgroup)
      unsetenv(AppProcesses.joinVariable)
    }
    _ = try Confinement.confine(device: device, mountpoint: mount?.mountpoint)
    // An app ends with its supervisor (`protfs app launch`), killed or not, as an iOS app ends with
    // the system: set after the identity change, which clears the parent-death signal, and
    // inherited through exec. A supervisor already gone by now is caught by the parent check.
    if ProcessInfo.processInfo.environment[AppEnvironment.socket] != nil {
      if Credentials.killWhenParentDies() != 0 || getppid() != parent {
        Console.err("Error: The app's supervisor ended before the app started.")
        return 1
      }
    }
    let command = invocation.trailing
    var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    fflush(nil)
    execvp(command[0], &argv)
    var code = errno
    // ETXTBSY: some process holds the program open for writing. Most often that is a moment's
    // state, not the user's (a fork made by another thread of whatever wrote the file holds a copy
    // of its descriptor until its own exec): the exec is tried again for up to two seconds.
    let deadline = Date().addingTimeInterval(2)
    while code == ETXTBSY, Date() < deadline {
      usleep(10_000)
      execvp(command[0], &argv)
      code = errno
    }
    Console.err("Error: Cannot run '\(command[0])': \(String(cString: strerror(code))).")
    return code == ENOENT ? 127 : 126
  }
}
