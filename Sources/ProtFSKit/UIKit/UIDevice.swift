import Foundation
import ProtFSApp
import ProtFSSystem

/// The device, as UIKit's `UIDevice`: an iPhone running iOS, as the app sees the one protfs
/// simulates. `identifierForVendor` is stable for a bundle id's vendor (its first two components)
/// on this machine, as iOS keeps it across launches.
@preconcurrency @MainActor
public final class UIDevice {
  /// The device.
  public static let current = UIDevice()

  /// The kind of interface.
  public enum UserInterfaceIdiom: Int, Sendable {
    case unspecified = -1
    case phone = 0
    case pad = 1
    case tv = 2
    case carPlay = 3
    case mac = 5
    case vision = 6
  }

  /// The battery's state (not monitored here: unknown).
  public enum BatteryState: Int, Sendable {
    case unknown = 0
    case unplugged = 1
    case charging = 2
    case full = 3
  }

  /// The device's orientation (an iPhone held upright).
  public enum Orientation: Int, Sendable {
    case unknown = 0
    case portrait = 1
    case portraitUpsideDown = 2
    case landscapeLeft = 3
    case landscapeRight = 4
    case faceUp = 5
    case faceDown = 6
  }

  private init() {}

  /// The operating system's name.
  public var systemName: String { "iOS" }
  /// The version of iOS whose behaviour protfs follows.
  public var systemVersion: String { "18.0" }
  /// The kind of device.
  public var model: String { "iPhone" }
  /// As `model`.
  public var localizedModel: String { "iPhone" }
  /// The device's name.
  public var name: String { "iPhone" }
  /// A phone.
  public var userInterfaceIdiom: UserInterfaceIdiom { .phone }
  /// Upright.
  public var orientation: Orientation { .portrait }
  /// Whether the app may run in the background: yes.
  public var isMultitaskingSupported: Bool { true }
  /// Whether the battery is watched (kept; there is no battery to read).
  public var isBatteryMonitoringEnabled = false
  /// -1: not known.
  public var batteryLevel: Float { -1 }
  /// Not known.
  public var batteryState: BatteryState { .unknown }

  /// An identifier of the app's vendor on this device: the same for the bundle ids that share
  /// their first two components, and for every launch.
  public var identifierForVendor: UUID? {
    let bundle = ProcessEnvironment.value(AppEnvironment.bundle) ?? Bundle.main.bundleIdentifier ?? ""
    let vendor = bundle.split(separator: ".").prefix(2).joined(separator: ".")
    return Self.uuid(from: "protfs-vendor:" + vendor)
  }

  /// A version-4-shaped UUID made from `text`'s FNV-1a hashes (stable, not secret).
  static func uuid(from text: String) -> UUID {
    var bytes = [UInt8](repeating: 0, count: 16)
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for (index, byte) in (Array(text.utf8) + Array(text.utf8.reversed())).enumerated() {
      hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
      bytes[index % 16] ^= UInt8(truncatingIfNeeded: hash >> 24)
    }
    bytes[6] = (bytes[6] & 0x0F) | 0x40
    bytes[8] = (bytes[8] & 0x3F) | 0x80
    return UUID(
      uuid: (
        bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9], bytes[10],
        bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
      ))
  }
}

extension ProcessInfo {
  /// Runs `block` on a background queue as iOS's `performExpiringActivity`: in an app, under a
  /// background task, so the app is not suspended while it runs; when the background time runs
  /// out first, `block` is called again, with `true`, and the first call must stop. Outside an
  /// app it simply runs.
  public func performExpiringActivity(withReason reason: String, using block: @escaping @Sendable (Bool) -> Void) {
    let isApp = ProcessEnvironment.value(AppEnvironment.socket) != nil
    DispatchQueue.main.async {
      MainActor.assumeIsolated {
        let app = isApp ? UIApplication.shared : nil
        let task = app?.beginBackgroundTask(withName: reason) {
          DispatchQueue.global().async { block(true) }
        }
        DispatchQueue.global().async {
          block(false)
          DispatchQueue.main.async {
            MainActor.assumeIsolated { if let task { app?.endBackgroundTask(task) } }
          }
        }
      }
    }
  }
}

extension UIApplication {
  /// Registers for remote notifications, as iOS: the delegate's
  /// `didRegisterForRemoteNotificationsWithDeviceToken` follows on the main thread with the app's
  /// token (32 bytes, the same for the app on this machine). `protfs app push` reaches the app by
  /// its bundle id: the token is for code that sends it to its server.
  public func registerForRemoteNotifications() {
    registeredForRemoteNotifications = true
    let bundle = ProcessEnvironment.value(AppEnvironment.bundle) ?? ""
    let first = UIDevice.uuid(from: "protfs-apns:" + bundle)
    let second = UIDevice.uuid(from: "protfs-apns-2:" + bundle)
    let token = withUnsafeBytes(of: first.uuid) { Data($0) } + withUnsafeBytes(of: second.uuid) { Data($0) }
    DispatchQueue.main.async {
      MainActor.assumeIsolated {
        let app = UIApplication.shared
        app.delegate?.application(app, didRegisterForRemoteNotificationsWithDeviceToken: token)
      }
    }
  }

  /// Stops remote notifications (`isRegisteredForRemoteNotifications` becomes false).
  public func unregisterForRemoteNotifications() { registeredForRemoteNotifications = false }

  /// Whether the app registered for remote notifications.
  public var isRegisteredForRemoteNotifications: Bool { registeredForRemoteNotifications }
}
