import Foundation
import ProtFS
import ProtFSSystem

extension MountDaemon {
  /// Starts `executable` with `arguments` (`arguments[0]` its name) as a mount daemon: standard
  /// input from /dev/null, standard output and error copies of `output` and `errors`, in a process
  /// group of its own (`PlainLaunch`). Returns its pid.
  package static func startProcess(
    _ executable: String, arguments: [String], environment: [String: String], output: Int32, errors: Int32
  ) throws(ProtFSError) -> pid_t {
    var launch = PlainLaunch(
      path: executable, arguments: arguments, environment: environment.map { "\($0.key)=\($0.value)" })
    guard case .success(let null) = Kernel.open("/dev/null", O_RDONLY | O_CLOEXEC) else {
      throw ProtFSError(.io, "Cannot open /dev/null to start the mount daemon.")
    }
    defer { closeDescriptor(null) }
    (launch.input, launch.output, launch.error) = (null, output, errors)
    switch launch.start() {
    case .success(let pid): return pid
    case .failure(let e): throw ProtFSError.system("start the mount daemon", path: executable, errno: e)
    }
  }
}
