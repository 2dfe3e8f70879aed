// SceneApp: Xcode's iOS App template for UIKit (iOS 13 and later: an @main app delegate, and a
// scene delegate its Info.plist names in UIApplicationSceneManifest), ported by its imports alone
// and built in the Swift 5 language mode, as new projects are. Each lifecycle call prints a line;
// in a scene-based app the scene's delegate gets the lifecycle and the app delegate's
// applicationDidBecomeActive and applicationDidEnterBackground are not called, as on iOS.
import Foundation
import ProtFSKit

func say(_ line: String) {
  print(line)
  fflush(stdout)
}

@main
class AppDelegate: UIResponder, UIApplicationDelegate {
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    say("didFinishLaunching state=\(application.applicationState.rawValue)")
    NotificationCenter.default.addObserver(
      forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: .main
    ) { _ in say("notification didEnterBackground") }
    application.registerForRemoteNotifications()
    return true
  }

  // MARK: UISceneSession Lifecycle

  func application(
    _ application: UIApplication, configurationForConnecting connectingSceneSession: UISceneSession,
    options: UIScene.ConnectionOptions
  ) -> UISceneConfiguration {
    say("configurationForConnecting")
    return UISceneConfiguration(name: "Default Configuration", sessionRole: connectingSceneSession.role)
  }

  func application(_ application: UIApplication, didDiscardSceneSessions sceneSessions: Set<UISceneSession>) {}

  func application(_ application: UIApplication, didRegisterForRemoteNotificationsWithDeviceToken deviceToken: Data) {
    say("device token of \(deviceToken.count) bytes")
  }

  // Not called in a scene-based app: the scene delegate gets these.
  func applicationDidBecomeActive(_ application: UIApplication) { say("applicationDidBecomeActive") }
  func applicationDidEnterBackground(_ application: UIApplication) { say("applicationDidEnterBackground") }

  func applicationWillTerminate(_ application: UIApplication) { say("applicationWillTerminate") }
}

class SceneDelegate: UIResponder, UIWindowSceneDelegate {
  var window: UIWindow?

  func scene(
    _ scene: UIScene, willConnectTo session: UISceneSession, options connectionOptions: UIScene.ConnectionOptions
  ) {
    guard let windowScene = (scene as? UIWindowScene) else { return }
    window = UIWindow(windowScene: windowScene)
    say("willConnectTo \(session.role.rawValue) windows=\(windowScene.windows.count)")
  }

  func sceneDidDisconnect(_ scene: UIScene) { say("sceneDidDisconnect") }

  func sceneDidBecomeActive(_ scene: UIScene) {
    say("sceneDidBecomeActive state=\(scene.activationState.rawValue)")
  }

  func sceneWillResignActive(_ scene: UIScene) { say("sceneWillResignActive") }

  func sceneWillEnterForeground(_ scene: UIScene) { say("sceneWillEnterForeground") }

  func sceneDidEnterBackground(_ scene: UIScene) {
    say("sceneDidEnterBackground")
    // Save the user's work under background time, as Apple's sample does.
    ProcessInfo.processInfo.performExpiringActivity(withReason: "save") { expired in
      say("saving, expired=\(expired)")
    }
  }
}
