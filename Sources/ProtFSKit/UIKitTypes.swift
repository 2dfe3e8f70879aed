import Foundation

/// A background task, as `UIApplication.beginBackgroundTask` returns it (the supervisor's task id).
public struct UIBackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
  /// The supervisor's id of the task; 0 for `invalid`.
  public var rawValue: Int
  /// Wraps a task id.
  public init(rawValue: Int) { self.rawValue = rawValue }
  /// No task: what `beginBackgroundTask` returns when the system refuses one.
  public static let invalid = UIBackgroundTaskIdentifier(rawValue: 0)
}

/// What a background fetch found, passed to `performFetchWithCompletionHandler`'s handler.
public enum UIBackgroundFetchResult: Int, Sendable {
  /// New data was downloaded.
  case newData
  /// There was nothing new.
  case noData
  /// The fetch failed.
  case failed

  /// The word the supervisor's `fetchCompleted` request carries.
  var protocolName: String {
    switch self {
    case .newData: "newData"
    case .noData: "noData"
    case .failed: "failed"
    }
  }
}

extension UIApplication {
  /// Where the app is in its life, as on iOS.
  public enum State: Int, Sendable {
    /// In the foreground and receiving events.
    case active
    /// In the foreground but not receiving events (while it returns from the background).
    case inactive
    /// In the background.
    case background
  }

  /// The keys of `application(_:didFinishLaunchingWithOptions:)`'s options (none are sent today).
  public struct LaunchOptionsKey: RawRepresentable, Hashable, Sendable {
    /// The key's name.
    public var rawValue: String
    /// Wraps a key name.
    public init(rawValue: String) { self.rawValue = rawValue }
  }

  /// The smallest fetch interval the system allows: fetch as often as it is willing to.
  public nonisolated static let backgroundFetchIntervalMinimum: TimeInterval = 0
  /// A fetch interval that means never: the default, as on iOS.
  public nonisolated static let backgroundFetchIntervalNever: TimeInterval = .greatestFiniteMagnitude

  /// Posted when the app entered the background, after the delegate was told.
  public nonisolated static let didEnterBackgroundNotification = Notification.Name(
    "UIApplicationDidEnterBackgroundNotification")
  /// Posted when the app is about to return to the foreground.
  public nonisolated static let willEnterForegroundNotification = Notification.Name(
    "UIApplicationWillEnterForegroundNotification")
  /// Posted when the app is about to be terminated.
  public nonisolated static let willTerminateNotification = Notification.Name(
    "UIApplicationWillTerminateNotification")
  /// Posted when the device is locking and protected files are about to become unreadable.
  public nonisolated static let protectedDataWillBecomeUnavailableNotification = Notification.Name(
    "UIApplicationProtectedDataWillBecomeUnavailable")
  /// Posted when the device unlocked and protected files are readable again.
  public nonisolated static let protectedDataDidBecomeAvailableNotification = Notification.Name(
    "UIApplicationProtectedDataDidBecomeAvailable")
}

/// What the app is told of its life. Every method has a default that does nothing (as Objective-C
/// optional methods), except the fetch, whose default completes with `.noData` so that an app
/// without a fetch handler is not killed for never completing one.
@MainActor
public protocol UIApplicationDelegate: AnyObject {
  /// The app started, in the foreground; the place to set the fetch interval. Return value ignored.
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool
  /// The app entered the background: begin a background task here to keep working.
  func applicationDidEnterBackground(_ application: UIApplication)
  /// The app is about to return to the foreground.
  func applicationWillEnterForeground(_ application: UIApplication)
  /// The app is about to be terminated; the process exits when this returns.
  func applicationWillTerminate(_ application: UIApplication)
  /// A background fetch started: call `completionHandler` (from any thread) within the fetch time.
  func application(
    _ application: UIApplication,
    performFetchWithCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void)
  /// The device is locking: protected files become unreadable.
  func applicationProtectedDataWillBecomeUnavailable(_ application: UIApplication)
  /// The device unlocked: protected files are readable again.
  func applicationProtectedDataDidBecomeAvailable(_ application: UIApplication)
  /// The app was launched or woken because background session `identifier` has events waiting:
  /// recreate the session, keep `completionHandler` and call it from
  /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
  func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler: @escaping () -> Void)
}

extension UIApplicationDelegate {
  /// Does nothing and returns true.
  public func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool { true }
  /// Does nothing.
  public func applicationDidEnterBackground(_ application: UIApplication) {}
  /// Does nothing.
  public func applicationWillEnterForeground(_ application: UIApplication) {}
  /// Does nothing.
  public func applicationWillTerminate(_ application: UIApplication) {}
  /// Completes with `.noData`.
  public func application(
    _ application: UIApplication,
    performFetchWithCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void
  ) { completionHandler(.noData) }
  /// Does nothing.
  public func applicationProtectedDataWillBecomeUnavailable(_ application: UIApplication) {}
  /// Does nothing.
  public func applicationProtectedDataDidBecomeAvailable(_ application: UIApplication) {}
  /// Calls the handler.
  public func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler: @escaping () -> Void
  ) { completionHandler() }
}
