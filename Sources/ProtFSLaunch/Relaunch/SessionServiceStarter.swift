import Foundation
import ProtFS
import ProtFSSessions
import ProtFSSystem

/// Starts the device's session service when it does not run: `protfs --device D sessions start
/// --foreground`, detached (a session of its own, /dev/null streams, no inherited descriptor).
package enum SessionServiceStarter {
  /// The pid of the device's running service, started now if needed; waits (≤ 10 s) until it answers.
  @discardableResult
  package static func ensureRunning(_ device: Device, idleExit: String? = nil) throws -> Int32 {
    try device.requireInitialized()
    let name = SessionServiceClient.socketName(device: device)
    if let pid = SessionServiceClient.ping(socketName: name) { return pid }
    if let squatter = SessionServiceClient.untrustedHolder(of: name) { throw squatter }
    var arguments = ["--device", device.root, "sessions", "start", "--foreground"]
    if let idleExit { arguments += ["--idle-exit", idleExit] }
    let child = try DetachedLaunch.start(arguments)
    do {
      try SessionServiceClient.waitUntilListening(name, timeout: 10)
    } catch {
      // A child that lost the race to bind exits; one that answers nothing in 10 s is not kept.
      // Ended if it still runs, reaped if it has ended: what fails here is already gone.
      if ProcessIdentity.isRunning(child) { _ = Kernel.kill(child, SIGTERM) }
      _ = Kernel.reapChildIfEnded(child)
      throw ProtFSError(
        .io, "The session service of '\(device.root)' did not start.", path: device.root,
        remedy: .advice("run the device's session service in the foreground (sessions start --foreground) to see why"))
    }
    guard let pid = SessionServiceClient.ping(socketName: name) else {
      throw SessionServiceClient.untrustedHolder(of: name)
        ?? ProtFSError(.io, "The session service of '\(device.root)' did not start.", path: device.root)
    }
    return pid
  }
}
