import Foundation
import ProtFS
import ProtFSSystem

/// A background mount: `start` runs this program as the daemon and returns once the mount answers;
/// the daemon, told by `notifyKey`, serves with `serveDetached`, which reports readiness on its
/// standard output (`ready PID`, a line for `start` alone) and then detaches.
extension MountDaemon {
  /// Set to "1" in the environment of the daemon `start` starts.
  package static let notifyKey = "PROTFS_MOUNT_NOTIFY"

  /// A daemon that ended before its mount answered: what it wrote on standard error (its own
  /// `Error: …` lines, to be passed on as they are), and the status to exit with, never 0: its own,
  /// or 1 when it exited with 0.
  package struct StartFailure: Error, Equatable {
    /// What the daemon wrote on standard error.
    package var errors: String
    /// Its exit status (128 + the signal that killed it), or 1 in place of 0.
    package var status: Int32
  }

  /// Starts this program as the mount daemon of `device` at `mountpoint` (`--device D mount
  /// MOUNTPOINT`, with `environment` and `notifyKey`) and returns the daemon's pid once it reports
  /// that the mount answers. Throws `StartFailure` when the daemon ends first, a `ProtFSError` when
  /// it cannot be started.
  package static func start(device: Device, at mountpoint: String, environment: [String: String]) throws -> pid_t {
    let executable =
      (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var environment = environment
    environment[notifyKey] = "1"
    return try start(
      executable, arguments: [executable, "--device", device.root, "mount", mountpoint], environment: environment)
  }

  /// Starts `executable` with `arguments` (`startProcess`) and waits until it writes its readiness
  /// line, `ready PID`, on standard output: returns PID. A daemon whose standard output ends
  /// without it is reaped, and its standard error and status thrown as a `StartFailure`.
  package static func start(_ executable: String, arguments: [String], environment: [String: String]) throws
    -> pid_t
  {
    let output = Pipe()
    let errors = Pipe()
    let daemon = try startProcess(
      executable, arguments: arguments, environment: environment, output: output.fileHandleForWriting.fileDescriptor,
      errors: errors.fileHandleForWriting.fileDescriptor)
    // Only the daemon holds the writing ends now: its exit ends both streams.
    try? output.fileHandleForWriting.close()
    try? errors.fileHandleForWriting.close()
    var received = Data()
    while !received.contains(UInt8(ascii: "\n")) {
      let chunk = output.fileHandleForReading.availableData
      if chunk.isEmpty { break }
      received += chunk
    }
    let line = String(decoding: received, as: UTF8.self)
    guard line.hasPrefix("ready ") else {
      let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      let status = (try? Kernel.waitForChild(daemon).get()) ?? 1
      throw StartFailure(errors: message, status: status == 0 ? 1 : status)
    }
    return pid_t(String(line.dropFirst(6).prefix { $0.isNumber })) ?? daemon
  }

  /// The daemon side of `start`: a session of its own, `ready PID` on standard output once the
  /// mount answers, then standard output and error go to /dev/null; serves until unmounted.
  package static func serveDetached(device: Device, at mountpoint: String) throws(ProtFSError) {
    _ = Kernel.setsid()
    _ = Kernel.chdir("/")
    try serve(device: device, at: mountpoint) {
      let line = "ready \(Kernel.getpid())\n"
      _ = line.withCString { text in Kernel.write(1, text, strlen(text)) }
      if case .success(let null) = Kernel.open("/dev/null", O_RDWR) {
        _ = Kernel.dup2(null, 1)
        _ = Kernel.dup2(null, 2)
        closeDescriptor(null)
      }
    }
  }

  /// Starts `executable` with `arguments` (`arguments[0]` its name) as a mount daemon: standard
  /// input from /dev/null, standard output and error copies of `output` and `errors`, in a process
  /// group of its own (`PlainLaunch`). Returns its pid.
  private static func startProcess(
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
