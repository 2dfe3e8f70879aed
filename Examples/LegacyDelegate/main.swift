// LegacyDelegate: an app delegate as iOS code written before Xcode's template took UIResponder
// declares it, `class AppDelegate: NSObject, UIApplicationDelegate`, started by UIApplicationMain
// in main.swift, and ported by changing `import UIKit` to `import ProtFSKit` alone. Built in the
// Swift 5 language mode, as such code is.
//
// It prints what it is told of its life, and what its init did: UIKit makes the delegate with its
// init(), stored properties and all.
import Foundation
import ProtFSKit

func say(_ line: String) { print(line) }

class AppDelegate: NSObject, UIApplicationDelegate {
  var window: UIWindow?
  var launches = 0
  let madeBy: String

  override init() {
    madeBy = "init()"
    super.init()
  }

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    launches += 1
    say("didFinishLaunching \(type(of: self)) made by \(madeBy), launch \(launches)")
    return true
  }

  func applicationDidBecomeActive(_ application: UIApplication) {
    say("didBecomeActive state=\(application.applicationState.rawValue)")
  }

  func applicationWillTerminate(_ application: UIApplication) {
    say("willTerminate")
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
