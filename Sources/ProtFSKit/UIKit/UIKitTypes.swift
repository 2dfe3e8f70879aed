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

/// Whether the user lets apps refresh in the background, as UIKit's `UIBackgroundRefreshStatus`.
public enum UIBackgroundRefreshStatus: Int, Sendable {
  /// Not allowed, and the user cannot allow it (parental controls).
  case restricted
  /// Turned off by the user.
  case denied
  /// Allowed.
  case available
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

  /// The keys of `application(_:didFinishLaunchingWithOptions:)`'s options, with Apple's names.
  /// As on iOS, a launch by the user and a background launch for a session's events or a fetch
  /// carry no options (nil): the delegate learns why it runs from `applicationState` and the call
  /// that follows (`handleEventsForBackgroundURLSession`, `performFetchWithCompletionHandler`).
  public struct LaunchOptionsKey: RawRepresentable, Hashable, Sendable {
    /// The key's name.
    public var rawValue: String
    /// Wraps a key name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The app was launched to open a URL.
    public static let url = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsURLKey")
    /// The bundle id of the app that asked for the URL.
    public static let sourceApplication = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsSourceApplicationKey")
    /// The app was launched for a remote (push) notification; the value is its payload.
    public static let remoteNotification = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsRemoteNotificationKey")
    /// The app was launched for a location event.
    public static let location = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsLocationKey")
    /// The app was launched from a Home Screen quick action.
    public static let shortcutItem = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsShortcutItemKey")
    /// The app was launched to continue a user activity of this type.
    public static let userActivityType = LaunchOptionsKey(rawValue: "UIApplicationLaunchOptionsUserActivityTypeKey")
  }

  /// The smallest fetch interval the system allows: fetch as often as it is willing to.
  public nonisolated static let backgroundFetchIntervalMinimum: TimeInterval = 0
  /// A fetch interval that means never: the default, as on iOS.
  public nonisolated static let backgroundFetchIntervalNever: TimeInterval = .greatestFiniteMagnitude

  /// Posted when the app finished launching, after `didFinishLaunchingWithOptions` returned.
  public nonisolated static let didFinishLaunchingNotification = Notification.Name(
    "UIApplicationDidFinishLaunchingNotification")
  /// Posted when the app became active, after the delegate was told.
  public nonisolated static let didBecomeActiveNotification = Notification.Name(
    "UIApplicationDidBecomeActiveNotification")
  /// Posted when the app is about to stop being active, after the delegate was told.
  public nonisolated static let willResignActiveNotification = Notification.Name(
    "UIApplicationWillResignActiveNotification")
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

/// What the app is told of its life, in iOS's order: `didFinishLaunchingWithOptions`, then
/// `applicationDidBecomeActive` (not for a background launch); leaving the foreground,
/// `applicationWillResignActive` then `applicationDidEnterBackground`; returning,
/// `applicationWillEnterForeground` then `applicationDidBecomeActive`; `applicationWillTerminate`
/// only when the app is terminated while it runs (a suspended app is killed without a call).
///
/// Every method has a default that does nothing (as Objective-C optional methods), except the
/// fetch, whose default completes with `.noData` so that an app without a fetch handler is not
/// killed for never completing one. `@preconcurrency` as UIKit's is to Swift 5 code.
@preconcurrency @MainActor
public protocol UIApplicationDelegate: AnyObject {
  /// The app is starting, before its state is restored; `didFinishLaunchingWithOptions` follows.
  /// Return value ignored.
  func application(
    _ application: UIApplication, willFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool
  /// The app started (state `inactive`, or `background` for a background launch); the place to
  /// set the fetch interval. Return value ignored.
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool
  /// The app became active: it is in the foreground and receives events.
  func applicationDidBecomeActive(_ application: UIApplication)
  /// The app is about to stop being active (it leaves the foreground, or is terminated there).
  func applicationWillResignActive(_ application: UIApplication)
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
  /// A remote notification arrived (`protfs app push`): handle `userInfo`, its payload, and call
  /// `completionHandler` (from any thread) within the background time; a silent one
  /// (`content-available` 1) woke the app in the background for it.
  func application(
    _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
    fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void)
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
  /// The configuration of the scene being connected (iOS 13): its name picks the Info.plist's
  /// entry (`UIApplicationSceneManifest`), which names the scene delegate's class.
  func application(
    _ application: UIApplication, configurationForConnecting connectingSceneSession: UISceneSession,
    options: UIScene.ConnectionOptions
  ) -> UISceneConfiguration
  /// The user discarded scene sessions (never here: the one scene stays).
  func application(_ application: UIApplication, didDiscardSceneSessions sceneSessions: Set<UISceneSession>)
  /// `registerForRemoteNotifications()` succeeded: `deviceToken` is the app's.
  func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data)
  /// `registerForRemoteNotifications()` failed (never here).
  func application(_ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error)
  /// `registerUserNotificationSettings(_:)` was answered: `notificationSettings` are allowed.
  func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings)
}

extension UIApplicationDelegate {
  /// Does nothing and returns true.
  public func application(
    _ application: UIApplication, willFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool { true }
  /// Does nothing and returns true.
  public func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool { true }
  /// Does nothing.
  public func applicationDidBecomeActive(_ application: UIApplication) {}
  /// Does nothing.
  public func applicationWillResignActive(_ application: UIApplication) {}
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
  /// Completes with `.noData`.
  public func application(
    _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
    fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void
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
  /// The Info.plist's first configuration for the session's role, if it declares scenes.
  public func application(
    _ application: UIApplication, configurationForConnecting connectingSceneSession: UISceneSession,
    options: UIScene.ConnectionOptions
  ) -> UISceneConfiguration {
    let configuration = UISceneConfiguration(name: nil, sessionRole: connectingSceneSession.role)
    configuration.isDefault = true
    return configuration
  }
  /// Does nothing.
  public func application(_ application: UIApplication, didDiscardSceneSessions sceneSessions: Set<UISceneSession>) {}
  /// Does nothing.
  public func application(
    _ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data
  ) {}
  /// Does nothing.
  public func application(
    _ application: UIApplication, didFailToRegisterForRemoteNotificationsWithError error: any Error
  ) {}
  /// Does nothing.
  public func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings) {}
}

/// UIKit's responder base class, here so that an app delegate declared as Xcode's template
/// declares it (`class AppDelegate: UIResponder, UIApplicationDelegate`) compiles and can be made
/// by `UIApplicationMain` from its class name. There are no events to respond to.
@preconcurrency @MainActor
open class UIResponder: NSObject, NSKeyValueObserving {
  /// A responder (required: `UIApplicationMain` makes the delegate from its class).
  public required override init() { super.init() }

  /// Called when a value this responder observes (`addObserver(_:forKeyPath:options:context:)`)
  /// changed; a subclass overrides it, as on iOS. Not overridden, it ends the app with
  /// `NSInternalInconsistencyException`, as `NSObject`'s does.
  nonisolated open func observeValue(
    forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
    context: UnsafeMutableRawPointer?
  ) {
    KeyValueObservers.unhandled(
      by: self, key: keyPath, of: object, change: change, context: UInt(bitPattern: context))
  }
}

/// A window, so that an app delegate's `var window: UIWindow?` compiles. There is no screen: it
/// shows nothing, and nothing makes one.
@preconcurrency @MainActor
open class UIWindow: UIResponder {}

/// The size of a transfer whose length is not known (no `Content-Length`), as Foundation's
/// `countOfBytesExpectedToReceive` and `totalBytesExpectedToWrite` report it.
public let NSURLSessionTransferSizeUnknown: Int64 = -1
