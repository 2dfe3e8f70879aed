import ProtFS
import ProtFSApp
import ProtFSMount
import ProtFSSessions

/// What a command that rewrites the device as a whole (`erase`, `seal`) refuses to run beside: an app
/// running, an active mount, the session service. Each writes the device's files behind its back.
enum DeviceInUse {
  /// Throws the first use of `invocation`'s device found, said with `consequence` ("the device
  /// cannot be sealed") after the use, when given, and the way to end it.
  static func refuse(_ invocation: Invocation, consequence: String? = nil) throws {
    let device = invocation.device
    let so = consequence.map { ", so \($0)" } ?? ""
    if let app = try AppStore(device: device).records().first(where: \.isSupervised) {
      let terminate = invocation.spelling.command("app terminate \(app.bundleID)")
      throw ExitStatus(code: 1, message: "The app \(app.bundleID) is running\(so); terminate it first (\(terminate)).")
    }
    if let mount = MountRegistry(device: device).active().first {
      let unmount = invocation.spelling.command("unmount \(mount.mountpoint)")
      throw ExitStatus(
        code: 1, message: "The device is mounted at '\(mount.mountpoint)'\(so); unmount it first (\(unmount)).")
    }
    if let pid = SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: device)) {
      throw ExitStatus(
        code: 1,
        message:
          "The device's session service (pid \(pid)) is running\(so); wait until its tasks finish and it ends, "
          + "or end it (kill \(pid)).")
    }
  }
}
