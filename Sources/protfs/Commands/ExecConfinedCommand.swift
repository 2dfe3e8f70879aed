import Foundation
import ProtFS

/// `protfs __exec-confined CMD…`: the hidden second half of `exec`. Drops the capabilities that
/// override permission bits, then replaces itself with CMD.
enum ExecConfinedCommand {
  static let command = Command(
    name: "__exec-confined",
    abstract: "Drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH, then execute a command (used by exec).",
    takesTrailingCommand: true,
    isHidden: true,
    run: run
  )

  static func run(_ invocation: Invocation) throws -> Int32 {
    try Confinement.dropPermissionOverrides()
    let command = invocation.trailing
    var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
    fflush(nil)
    execvp(command[0], &argv)
    let code = errno
    Console.err("Error: Cannot run '\(command[0])': \(String(cString: strerror(code))).")
    return code == ENOENT ? 127 : 126
  }
}
