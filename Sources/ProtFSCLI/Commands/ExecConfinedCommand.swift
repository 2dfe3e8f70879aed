import Foundation
import ProtFS
import ProtFSLock

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
    let mount = device.isInitialized ? MountRegistry(device: device).active().first : nil
    _ = try Confinement.confine(device: device, mountpoint: mount?.mountpoint)
    let command = invocation.trailing
    var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    fflush(nil)
    execvp(command[0], &argv)
    let code = errno
    Console.err("Error: Cannot run '\(command[0])': \(String(cString: strerror(code))).")
    return code == ENOENT ? 127 : 126
  }
}
