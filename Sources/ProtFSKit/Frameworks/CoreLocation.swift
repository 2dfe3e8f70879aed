import Foundation
import ProtFSApp
import Synchronization

/// A latitude and longitude in degrees, as CoreLocation's.
public struct CLLocationCoordinate2D: Sendable, Equatable {
  /// -90 to 90.
  public var latitude: Double
  /// -180 to 180.
  public var longitude: Double
  /// Makes a coordinate.
  public init(latitude: Double, longitude: Double) {
    self.latitude = latitude
    self.longitude = longitude
  }
}

/// A location the device reported (`protfs app location`).
public final class CLLocation: Sendable, CustomStringConvertible {
  /// Where.
  public let coordinate: CLLocationCoordinate2D
  /// When.
  public let timestamp: Date
  /// Makes a location at `latitude`, `longitude`, now.
  public init(latitude: Double, longitude: Double) {
    coordinate = CLLocationCoordinate2D(latitude: latitude, longitude: longitude)
    timestamp = Date()
  }
  /// `<+48.85840000,+2.29450000>`, as CoreLocation describes one.
  public var description: String {
    String(format: "<%+.8f,%+.8f>", coordinate.latitude, coordinate.longitude)
  }
}

/// Authorization to use the location, as CoreLocation names it: granted here on request.
public enum CLAuthorizationStatus: Int32, Sendable {
  /// Not asked yet.
  case notDetermined = 0
  /// Not allowed by a policy.
  case restricted = 1
  /// Refused by the user.
  case denied = 2
  /// Allowed, also in the background.
  case authorizedAlways = 3
  /// Allowed while the app is in use.
  case authorizedWhenInUse = 4
}

/// What a location manager tells its delegate, on the main thread.
@preconcurrency @MainActor
public protocol CLLocationManagerDelegate: AnyObject {
  /// New locations, the newest last.
  func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation])
}

extension CLLocationManagerDelegate {
  /// Does nothing, as an Objective-C optional method not implemented.
  public func locationManager(_ manager: CLLocationManager, didUpdateLocations locations: [CLLocation]) {}
}

/// CoreLocation's manager, as far as it decides an app's life (docs/semantics.md §8): updates
/// started with `startUpdatingLocation()` deliver the locations `protfs app location` sets; with
/// `allowsBackgroundLocationUpdates` and `location` in the Info.plist's `UIBackgroundModes`, they
/// keep the app running in the background until `stopUpdatingLocation()`.
@preconcurrency @MainActor
public final class CLLocationManager {
  /// The delegate (held weakly, as CoreLocation's).
  public weak var delegate: (any CLLocationManagerDelegate)?
  /// Whether updates go on in the background (the `location` mode is needed too).
  public var allowsBackgroundLocationUpdates = false
  /// Whether the system may pause updates (kept, not acted on).
  public var pausesLocationUpdatesAutomatically = true
  /// The accuracy wanted, in meters (kept, not acted on).
  public var desiredAccuracy: Double = -1
  /// The last location delivered.
  public private(set) var location: CLLocation?
  /// Whether updates were started.
  private var updating = false

  /// The managers updating, which get each location.
  private static var updatingManagers: [ObjectIdentifier: CLLocationManager] = [:]

  /// Makes a manager.
  public init() {}

  /// The app's authorization: always granted once asked.
  public private(set) var authorizationStatus: CLAuthorizationStatus = .notDetermined
  /// Asks for authorization while in use: granted.
  public func requestWhenInUseAuthorization() { authorizationStatus = .authorizedWhenInUse }
  /// Asks for authorization always: granted.
  public func requestAlwaysAuthorization() { authorizationStatus = .authorizedAlways }

  /// Starts delivering locations.
  public func startUpdatingLocation() {
    updating = true
    Self.updatingManagers[ObjectIdentifier(self)] = self
    Self.tellSupervisor()
  }

  /// Stops delivering them.
  public func stopUpdatingLocation() {
    updating = false
    Self.updatingManagers[ObjectIdentifier(self)] = nil
    Self.tellSupervisor()
  }

  /// Tells the supervisor how the app updates its location now.
  private static func tellSupervisor() {
    let managers = updatingManagers.values
    let state: AppRequest.LocationUpdates =
      managers.isEmpty ? .stop : managers.contains { $0.allowsBackgroundLocationUpdates } ? .background : .foreground
    _ = Supervisor.send(.locationUpdates(state))
  }

  /// A location arrived (`didUpdateLocations`): every updating manager's delegate gets it.
  static func deliver(latitude: Double, longitude: Double) {
    let location = CLLocation(latitude: latitude, longitude: longitude)
    for manager in updatingManagers.values {
      manager.location = location
      manager.delegate?.locationManager(manager, didUpdateLocations: [location])
    }
  }
}
