// PortedMainApp: an app delegate as Xcode's template declares it (`@main`, a UIResponder), ported
// by changing `import UIKit` to `import ProtFSKit`. Built in the Swift 6 language mode.
import Foundation
import ProtFSKit

@main
class AppDelegate: UIResponder, UIApplicationDelegate {
  var window: UIWindow?

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    print("didFinishLaunching main=\(Thread.isMainThread) bundle \(Bundle.main.bundleIdentifier ?? "none")")
    let library = FileManager.default.urls(for: .libraryDirectory, in: .userDomainMask).first?.path ?? "none"
    print("library \(library)")
    DispatchQueue.main.async { print("main queue main=\(Thread.isMainThread)") }
    return true
  }

  func applicationDidBecomeActive(_ application: UIApplication) {
    print("didBecomeActive")
  }

  func applicationWillTerminate(_ application: UIApplication) {
    print("willTerminate")
  }
}
