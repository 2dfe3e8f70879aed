import Foundation
import ProtFS

/// The environment through which an app and its helper commands find the supervisor.
public enum AppEnvironment {
  /// The supervisor's socket name (`@` and an abstract name).
  public static let socket = "PROTFS_APP_SOCKET"
  /// The app's bundle id.
  public static let bundle = "PROTFS_APP_BUNDLE"
  /// The descriptor the app reads its events from.
  public static let eventsFD = "PROTFS_APP_EVENTS_FD"
  /// `available` or `unavailable`: whether protected data was available when the app started
  /// (`isProtectedDataAvailable` until the first protected-data event).
  public static let protectedData = "PROTFS_APP_PROTECTED_DATA"
  /// The session service's socket name (`SessionServiceClient.socketName(device:)`), set by the CLI.
  public static let sessionsSocket = "PROTFS_SESSIONS_SOCKET"
  /// `background` when the system launched the app in the background (for a fetch or a session's
  /// events): its `applicationState` is `.background` from the start, as on iOS; else `active`.
  public static let launchState = "PROTFS_APP_LAUNCH_STATE"
  /// `1` when the app is prewarmed (`protfs app prewarm`): ProtFSKit holds it before
  /// `UIApplicationMain` until the launch hands it its standard streams on the events descriptor
  /// (a socket then), with an `activate` line.
  public static let prewarm = "PROTFS_APP_PREWARM"
  /// The descriptor number the events come on.
  public static let eventsDescriptor: Int32 = 3

  /// The key of `bundleID` on `device`: a hash of both, so that any path length fits and two
  /// devices never share one. It names the app's cgroup and starts its supervisor's socket name
  /// (which ends in random bits: `AppRecord.supervisorSocket`).
  public static func key(device: Device, bundleID: BundleID) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(device.canonicalRoot.utf8) + [0] + Array(bundleID.rawValue.utf8) {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return String(hash, radix: 16)
  }
}
