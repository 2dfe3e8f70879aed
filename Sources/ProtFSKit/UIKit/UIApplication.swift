import Foundation
import ProtFSApp
import ProtFSSystem
import Synchronization

/// The running app, shaped like UIKit's: background tasks, background time, the app's state and
/// protected-data availability (docs/semantics.md §8). Only a program that `protfs app launch`
/// runs has one: its supervisor's socket and event descriptor come from the environment.
///
/// Main-actor isolated, as on iOS. Its state changes only when events arrive, which
/// `UIApplication.main(delegate:)` delivers on the main thread. `@preconcurrency`, as UIKit is to
/// Swift 5 code: reading `backgroundTimeRemaining` from a `DispatchQueue.global()` closure is a
/// warning there, not an error.
@preconcurrency @MainActor
public final class UIApplication {
  /// The app. Outside `protfs app launch` touching it stops the program with a message naming the
  /// missing environment variable.
  public static let shared = UIApplication()

  /// The delegate `main(delegate:)` was given (held strongly: nothing else keeps it).
  public internal(set) var delegate: (any UIApplicationDelegate)?
  /// Foreground (`active`), entering or leaving it (`inactive`: also while a foreground launch
  /// runs `didFinishLaunchingWithOptions`, as on iOS), or `background`.
  public private(set) var applicationState: State = .inactive
  /// Whether protected files are readable: false between the device locking and unlocking. An
  /// app starts with the device's state at its launch (a fetch may launch it while locked).
  public private(set) var isProtectedDataAvailable: Bool
  /// The interval last given to `setMinimumBackgroundFetchInterval(_:)`.
  public private(set) var minimumBackgroundFetchInterval = UIApplication.backgroundFetchIntervalNever
  /// Whether the user lets the app refresh in the background (Settings, Background App Refresh):
  /// `.available`, since a device here has no such switch; what the app declares decides, as
  /// `UIBackgroundModes` and the fetch interval do.
  public var backgroundRefreshStatus: UIBackgroundRefreshStatus { .available }
  /// Whether the status bar's network activity indicator shows: kept as set, and shown nowhere,
  /// as on iOS 13 and later (where it does nothing and apps still set it).
  @available(*, deprecated, message: "Provide a custom network activity UI in your app if desired.")
  public var isNetworkActivityIndicatorVisible = false

  /// The supervisor's abstract socket name, without its `@`.
  let socketName: String
  /// The descriptor the events arrive on.
  let eventsDescriptor: Int32
  /// The expiration handlers of the open tasks, by task id.
  private var expirationHandlers: [Int: (@MainActor @Sendable () -> Void)?] = [:]
  /// The app's scene, once connected (an app that uses scenes, in the foreground once).
  var scene: UIScene?
  /// Whether the app was asked for its scene configuration (once: an app without scenes is not
  /// asked again).
  var scenesChecked = false
  /// Whether the app registered for remote notifications.
  var registeredForRemoteNotifications = false

  private init() {
    guard let socket = ProcessEnvironment.value(AppEnvironment.socket), socket.hasPrefix("@"), socket.count > 1 else {
      fatalError(Self.missing(AppEnvironment.socket))
    }
    guard let events = ProcessEnvironment.value(AppEnvironment.eventsFD).flatMap({ Int32($0) }), events >= 0 else {
      fatalError(Self.missing(AppEnvironment.eventsFD))
    }
    socketName = String(socket.dropFirst())
    eventsDescriptor = events
    isProtectedDataAvailable = ProcessEnvironment.value(AppEnvironment.protectedData) != "unavailable"
    if ProcessEnvironment.value(AppEnvironment.launchState) == "background" { applicationState = .background }
  }

  /// The message of a program that is not run as an app.
  private static func missing(_ variable: String) -> String {
    "UIApplication: $\(variable) is not set, so this program is not running as an app; "
      + "run it with `protfs app launch BUNDLE-ID -- PROGRAM`."
  }

  /// Begins a background task named `taskName`, which keeps the app running in the background
  /// until it ends or the background time runs out. `handler` is called on the main queue shortly
  /// before the time runs out and must end the task; a task still open then gets the app killed.
  /// Returns `.invalid` when the system refuses (no background time left). Without a name, the
  /// task is named as iOS names one, after its caller: `Called by APP` (iOS adds the calling
  /// function, `, from FUNCTION`, which an app's stripped symbols do not tell here).
  public func beginBackgroundTask(
    withName taskName: String?, expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil
  ) -> UIBackgroundTaskIdentifier {
    let name = taskName ?? "Called by \(ProcessInfo.processInfo.processName)"
    guard let reply = send(.beginTask(name: name)), let id = reply.flatMap({ Int($0) }) else {
      return .invalid
    }
    expirationHandlers[id] = handler
    return UIBackgroundTaskIdentifier(rawValue: id)
  }

  /// Begins an unnamed background task; see `beginBackgroundTask(withName:expirationHandler:)`.
  public func beginBackgroundTask(
    expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil
  ) -> UIBackgroundTaskIdentifier {
    beginBackgroundTask(withName: nil, expirationHandler: handler)
  }

  /// Ends the background task `identifier` (ending `.invalid` or an ended task does nothing).
  public func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier) {
    guard identifier != .invalid, expirationHandlers.removeValue(forKey: identifier.rawValue) != nil else { return }
    _ = send(.endTask(id: identifier.rawValue))
  }

  /// The background time left, in seconds; `.greatestFiniteMagnitude` in the foreground, as on iOS.
  public var backgroundTimeRemaining: TimeInterval {
    // In the foreground there is no budget to ask about (the supervisor would answer the same).
    guard applicationState == .background else { return .greatestFiniteMagnitude }
    guard let reply = send(.timeRemaining), let text = reply else { return 0 }
    guard let value = TimeInterval(text), value.isFinite else { return .greatestFiniteMagnitude }
    return value
  }

  /// Asks to be woken for background fetches no more often than every
  /// `minimumBackgroundFetchInterval` seconds (`backgroundFetchIntervalMinimum`: as often as the
  /// system allows; `backgroundFetchIntervalNever`, the default: never). As on iOS the system
  /// fetches only for an app whose Info.plist lists `fetch` in `UIBackgroundModes`, and only while
  /// it is in the background or suspended.
  public func setMinimumBackgroundFetchInterval(_ minimumBackgroundFetchInterval: TimeInterval) {
    self.minimumBackgroundFetchInterval = minimumBackgroundFetchInterval
    let never =
      !minimumBackgroundFetchInterval.isFinite || minimumBackgroundFetchInterval >= Self.backgroundFetchIntervalNever
    _ = send(.setFetchInterval(seconds: never ? nil : max(0, minimumBackgroundFetchInterval)))
  }

  /// Sends `request` to the supervisor; the reply's value, or nil when it refused or is gone.
  func send(_ request: AppRequest) -> String?? {
    Self.send(request, to: socketName)
  }

  /// Sends `request` to the supervisor at `socketName`, from any thread.
  nonisolated static func send(_ request: AppRequest, to socketName: String) -> String?? {
    guard let reply = try? AppClient.send(request, to: socketName), reply.error == nil else { return nil }
    return .some(reply.value)
  }
}

// MARK: - Events

extension UIApplication {
  /// Acts on one event from the supervisor: updates the state, tells the delegate, posts the
  /// notification (iOS's order), or calls a task's expiration handler.
  func handle(_ event: AppEventLine) {
    let center = NotificationCenter.default
    switch AppEvent(rawValue: event.event) {
    case .didEnterBackground:
      enterBackground()
    case .willEnterForeground:
      applicationState = .inactive
      // An app launched in the background gets its scene the first time it comes to the foreground.
      connectSceneIfNeeded()
      enterForeground()
      becomeActive()
    case .backgroundTaskWillExpire:
      guard let id = event.task, let entry = expirationHandlers[id] else { return }
      entry?()
    case .performFetch:
      performFetch()
    case .willTerminate:
      terminate()
    case .protectedDataWillBecomeUnavailable:
      delegate?.applicationProtectedDataWillBecomeUnavailable(self)
      center.post(name: Self.protectedDataWillBecomeUnavailableNotification, object: nil)
      isProtectedDataAvailable = false
    case .protectedDataDidBecomeAvailable:
      isProtectedDataAvailable = true
      delegate?.applicationProtectedDataDidBecomeAvailable(self)
      center.post(name: Self.protectedDataDidBecomeAvailableNotification, object: nil)
    case .handleEventsForBackgroundURLSession:
      if let session = event.session { handleEvents(forBackgroundURLSession: session) }
    case .didReceiveRemoteNotification:
      receiveRemoteNotification(event.userInfo)
    case .bgTaskLaunch:
      guard let identifier = event.identifier, let type = event.type.flatMap(BackgroundTaskRequest.Kind.init) else {
        return
      }
      BGTaskScheduler.shared.launch(identifier, type: type)
    case .bgTaskExpiration:
      if let identifier = event.identifier { BGTaskScheduler.shared.expire(identifier) }
    case .didUpdateLocations:
      if let latitude = event.latitude, let longitude = event.longitude {
        CLLocationManager.deliver(latitude: latitude, longitude: longitude)
      }
    case nil:
      return
    }
  }

  /// The app goes to the background: it resigns active first if it was, then its scene's delegate
  /// (or, without a scene, the app delegate) hears of it, then the notifications go out.
  private func enterBackground() {
    if applicationState == .active { resignActive() }
    applicationState = .background
    let center = NotificationCenter.default
    if let scene {
      scene.activationState = .background
      scene.delegate?.sceneDidEnterBackground(scene)
      center.post(name: UIScene.didEnterBackgroundNotification, object: scene)
    } else {
      delegate?.applicationDidEnterBackground(self)
    }
    center.post(name: Self.didEnterBackgroundNotification, object: nil)
  }

  /// A background fetch: the delegate's `performFetchWithCompletionHandler`, whose result goes to
  /// the supervisor (`.noData` at once without a delegate).
  private func performFetch() {
    let completion = completionHandler(reporting: .fetchCompleted)
    if let delegate {
      delegate.application(self, performFetchWithCompletionHandler: completion)
    } else {
      completion(.noData)
    }
  }

  /// The app is ended: `applicationWillTerminate`, its notification, then the process exits.
  private func terminate() {
    if applicationState == .active { resignActive() }
    delegate?.applicationWillTerminate(self)
    NotificationCenter.default.post(name: Self.willTerminateNotification, object: nil)
    exit(0)
  }

  /// A remote notification with the JSON `payload`: the delegate's
  /// `didReceiveRemoteNotification`, whose result goes to the supervisor.
  private func receiveRemoteNotification(_ payload: Data?) {
    let completion = completionHandler(reporting: .pushCompleted)
    let object = payload.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] } ?? [:]
    let userInfo = Dictionary(uniqueKeysWithValues: object.map { (AnyHashable($0.key), $0.value) })
    if let delegate {
      delegate.application(self, didReceiveRemoteNotification: userInfo, fetchCompletionHandler: completion)
    } else {
      completion(.noData)
    }
  }

  /// A completion handler that reports its result to the supervisor as `kind`, from any thread,
  /// once: later calls do nothing.
  func completionHandler(reporting kind: AppRequest.Kind) -> @Sendable (UIBackgroundFetchResult) -> Void {
    let socket = socketName
    let once = Mutex(false)
    return { result in
      guard
        once.withLock({ done in
          defer { done = true }; return !done
        })
      else { return }
      let value = AppRequest.CompletionResult(rawValue: result.protocolName) ?? .failed
      _ = UIApplication.send(kind == .fetchCompleted ? .fetchCompleted(value) : .pushCompleted(value), to: socket)
    }
  }

  /// The app is coming to the foreground: its scene's delegate is told, or, without a scene, its own.
  func enterForeground() {
    if let scene {
      scene.activationState = .foregroundInactive
      scene.delegate?.sceneWillEnterForeground(scene)
      NotificationCenter.default.post(name: UIScene.willEnterForegroundNotification, object: scene)
    } else {
      delegate?.applicationWillEnterForeground(self)
    }
    NotificationCenter.default.post(name: Self.willEnterForegroundNotification, object: nil)
  }

  /// The app became active (after launching in the foreground, or returning to it): its scene's
  /// delegate is told, or, without a scene, its own, as on iOS.
  func becomeActive() {
    applicationState = .active
    if let scene {
      scene.activationState = .foregroundActive
      scene.delegate?.sceneDidBecomeActive(scene)
      NotificationCenter.default.post(name: UIScene.didActivateNotification, object: scene)
    } else {
      delegate?.applicationDidBecomeActive(self)
    }
    NotificationCenter.default.post(name: Self.didBecomeActiveNotification, object: nil)
  }

  /// The app is about to stop being active (leaving the foreground, or terminating from it).
  private func resignActive() {
    if let scene {
      scene.delegate?.sceneWillResignActive(scene)
      NotificationCenter.default.post(name: UIScene.willDeactivateNotification, object: scene)
      scene.activationState = .foregroundInactive
    } else {
      delegate?.applicationWillResignActive(self)
    }
    NotificationCenter.default.post(name: Self.willResignActiveNotification, object: nil)
    applicationState = .inactive
  }
}
