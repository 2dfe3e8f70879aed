import Foundation

/// A scene: one instance of the app's interface, as UIKit's `UIScene` (iOS 13). An app whose
/// Info.plist declares scenes (`UIApplicationSceneManifest`), or whose delegate answers
/// `application(_:configurationForConnecting:options:)` with a delegate class, gets one when it
/// comes to the foreground: its lifecycle then goes to the scene's delegate, not the app's, as on
/// iOS. There is no screen: it shows nothing.
@preconcurrency @MainActor
open class UIScene: UIResponder {
  /// Where a scene is in its life.
  public enum ActivationState: Int, Sendable {
    /// Not connected to the app.
    case unattached = -1
    /// In the foreground, receiving events.
    case foregroundActive = 0
    /// In the foreground, not receiving events.
    case foregroundInactive = 1
    /// In the background.
    case background = 2
  }

  /// What the system passes when it connects a scene (nothing here: no URL, activity or
  /// notification opens one).
  @preconcurrency @MainActor
  open class ConnectionOptions: NSObject {
    /// The app that asked for the scene (none here).
    public let sourceApplication: String? = nil
    /// The URLs to open (none here).
    public let urlContexts: Set<URL> = []
  }

  /// The scene's session.
  public internal(set) var session: UISceneSession
  /// Its delegate, held strongly as UIKit holds it.
  public var delegate: (any UISceneDelegate)?
  /// Where it is in its life.
  public internal(set) var activationState: ActivationState = .unattached
  /// Its title (kept).
  public var title: String?

  /// A scene for `session` (required: the system makes a configuration's `sceneClass` by it).
  public required init(session: UISceneSession, connectionOptions: ConnectionOptions) {
    self.session = session
    super.init()
  }

  /// A scene of its own session (required by `UIResponder`; the system makes scenes).
  public required init() {
    session = UISceneSession(role: .windowApplication, configuration: nil)
    super.init()
  }

  /// The scene is about to connect (`object`: the scene).
  public nonisolated static let willConnectNotification = Notification.Name("UISceneWillConnectNotification")
  /// The scene disconnected.
  public nonisolated static let didDisconnectNotification = Notification.Name("UISceneDidDisconnectNotification")
  /// The scene became active.
  public nonisolated static let didActivateNotification = Notification.Name("UISceneDidActivateNotification")
  /// The scene is about to stop being active.
  public nonisolated static let willDeactivateNotification = Notification.Name("UISceneWillDeactivateNotification")
  /// The scene is about to come to the foreground.
  public nonisolated static let willEnterForegroundNotification = Notification.Name(
    "UISceneWillEnterForegroundNotification")
  /// The scene went to the background.
  public nonisolated static let didEnterBackgroundNotification = Notification.Name(
    "UISceneDidEnterBackgroundNotification")
}

/// A scene with windows, as UIKit's `UIWindowScene`: what an app's scene is.
@preconcurrency @MainActor
open class UIWindowScene: UIScene {
  /// The windows made for it (`UIWindow(windowScene:)`).
  public internal(set) var windows: [UIWindow] = []
  /// The first of them, as the key window.
  public var keyWindow: UIWindow? { windows.first }
}

/// A scene's session, as UIKit's `UISceneSession`: its role, its configuration and the app's data.
@preconcurrency @MainActor
public final class UISceneSession: NSObject {
  /// The kind of scene a session is for.
  public struct Role: RawRepresentable, Hashable, Sendable {
    /// Its name.
    public var rawValue: String
    /// Wraps a name.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// The app's own interface.
    public static let windowApplication = Role(rawValue: "UIWindowSceneSessionRoleApplication")
    /// An external display without interaction.
    public static let windowExternalDisplayNonInteractive = Role(
      rawValue: "UIWindowSceneSessionRoleExternalDisplayNonInteractive")
  }

  /// Its role.
  public let role: Role
  /// The configuration the scene was made from.
  public internal(set) var configuration: UISceneConfiguration
  /// An identifier, unique among the app's sessions.
  public let persistentIdentifier = UUID().uuidString
  /// The scene, while it is connected.
  public internal(set) weak var scene: UIScene?
  /// What the app keeps with the session.
  public var userInfo: [String: Any]?

  init(role: Role, configuration: UISceneConfiguration?) {
    self.role = role
    self.configuration = configuration ?? UISceneConfiguration(name: nil, sessionRole: role)
  }
}

/// How a scene is made, as UIKit's `UISceneConfiguration`: a name (looked up in the Info.plist's
/// `UIApplicationSceneManifest`), its delegate's class and its scene's class.
@preconcurrency @MainActor
public final class UISceneConfiguration: NSObject {
  /// Its name.
  public let name: String?
  /// The role of its sessions.
  public let role: UISceneSession.Role
  /// The class of the scene's delegate (from the Info.plist when not set).
  public var delegateClass: AnyClass?
  /// The class of the scene (`UIWindowScene` when not set).
  public var sceneClass: AnyClass?
  /// Whether it is the default delegate method's answer, not the app's.
  var isDefault = false

  /// A configuration named `name` for `sessionRole`.
  public init(name: String?, sessionRole: UISceneSession.Role) {
    self.name = name
    role = sessionRole
  }
}

/// A scene's lifecycle, as UIKit's `UISceneDelegate`: every method has a default that does nothing.
@preconcurrency @MainActor
public protocol UISceneDelegate: AnyObject {
  /// The scene is connecting: the place to set it up.
  func scene(
    _ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions)
  /// The scene was released.
  func sceneDidDisconnect(_ scene: UIScene)
  /// The scene became active.
  func sceneDidBecomeActive(_ scene: UIScene)
  /// The scene is about to stop being active.
  func sceneWillResignActive(_ scene: UIScene)
  /// The scene is about to come to the foreground.
  func sceneWillEnterForeground(_ scene: UIScene)
  /// The scene went to the background: begin a background task here to keep working.
  func sceneDidEnterBackground(_ scene: UIScene)
}

extension UISceneDelegate {
  /// Does nothing.
  public func scene(
    _ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions
  ) {}
  /// Does nothing.
  public func sceneDidDisconnect(_ scene: UIScene) {}
  /// Does nothing.
  public func sceneDidBecomeActive(_ scene: UIScene) {}
  /// Does nothing.
  public func sceneWillResignActive(_ scene: UIScene) {}
  /// Does nothing.
  public func sceneWillEnterForeground(_ scene: UIScene) {}
  /// Does nothing.
  public func sceneDidEnterBackground(_ scene: UIScene) {}
}

/// A window scene's delegate, as UIKit's `UIWindowSceneDelegate` (its `window` is the delegate's
/// own property, as Xcode's template declares it).
@preconcurrency @MainActor
public protocol UIWindowSceneDelegate: UISceneDelegate {}

extension UIWindow {
  /// A window of `windowScene`.
  public convenience init(windowScene: UIWindowScene) {
    self.init()
    windowScene.windows.append(self)
  }
}

// MARK: - The app's scene

extension UIApplication {
  /// The scenes connected (one at most here).
  public var connectedScenes: Set<UIScene> { Set(scene.map { [$0] } ?? []) }
  /// The sessions open (one at most here).
  public var openSessions: Set<UISceneSession> { Set(scene.map { [$0.session] } ?? []) }
  /// Whether the app shows several scenes at once: no (one device screen, iPhone's rule).
  public var supportsMultipleScenes: Bool { false }

  /// The configuration for a scene of `role`: the delegate's, with its delegate class taken from
  /// the Info.plist's manifest by name when it names none; nil when the app uses no scenes.
  func sceneConfiguration(_ session: UISceneSession) -> UISceneConfiguration? {
    let manifest =
      (Bundle.main.infoDictionary?["UIApplicationSceneManifest"] as? [String: Any])?[
        "UISceneConfigurations"] as? [String: Any]
    let declared = (manifest?[session.role.rawValue] as? [[String: Any]]) ?? []
    let answered = delegate?.application(
      self, configurationForConnecting: session, options: UIScene.ConnectionOptions())
    guard let configuration = answered, !configuration.isDefault || !declared.isEmpty else { return nil }
    let entry =
      declared.first { ($0["UISceneConfigurationName"] as? String) == configuration.name }
      ?? (configuration.isDefault ? declared.first : nil)
    if configuration.delegateClass == nil, let name = entry?["UISceneDelegateClassName"] as? String {
      configuration.delegateClass = classNamed(name)
      if configuration.delegateClass == nil {
        FileHandle.standardError.write(
          Data(
            "UIScene: there is no scene delegate class named \(name) (UISceneDelegateClassName); the scene has no delegate\n"
              .utf8))
      }
    }
    if configuration.sceneClass == nil, let name = entry?["UISceneClassName"] as? String {
      configuration.sceneClass = classNamed(name)
    }
    return configuration
  }

  /// The class `name` names, with Xcode's `$(PRODUCT_MODULE_NAME)` as the app delegate's module.
  private func classNamed(_ name: String) -> AnyClass? {
    var name = name
    if name.contains("$(PRODUCT_MODULE_NAME)"), let delegate {
      let module = NSStringFromClass(type(of: delegate)).split(separator: ".").first.map(String.init) ?? ""
      name = name.replacingOccurrences(of: "$(PRODUCT_MODULE_NAME)", with: module)
    }
    return NSClassFromString(name)
  }

  /// Connects the app's scene, the first time the app comes to the foreground, if it uses scenes.
  func connectSceneIfNeeded() {
    guard scene == nil, !scenesChecked else { return }
    scenesChecked = true
    let session = UISceneSession(role: .windowApplication, configuration: nil)
    guard let configuration = sceneConfiguration(session) else { return }
    session.configuration = configuration
    let made: UIScene
    if let type = configuration.sceneClass as? UIScene.Type {
      made = type.init(session: session, connectionOptions: UIScene.ConnectionOptions())
    } else {
      made = UIWindowScene(session: session, connectionOptions: UIScene.ConnectionOptions())
    }
    session.scene = made
    if let type = configuration.delegateClass as? UIResponder.Type {
      made.delegate = type.init() as? any UISceneDelegate
    }
    scene = made
    made.activationState = .background
    NotificationCenter.default.post(name: UIScene.willConnectNotification, object: made)
    made.delegate?.scene(made, willConnectTo: session, options: UIScene.ConnectionOptions())
  }
}
