// LegacyDelegate: an app delegate as iOS code written before Xcode's template took UIResponder
// declares it, `class AppDelegate: NSObject, UIApplicationDelegate`, started by UIApplicationMain
// in main.swift, and ported by changing `import UIKit` to `import ProtFSKit` alone. Built in the
// Swift 5 language mode, as such code is.
//
// It prints what it is told of its life, and what its init did: UIKit makes the delegate with its
// init(), stored properties and all. Then it tells the user of its work with UILocalNotification
// (iOS 4 to 9's API, deprecated and still compiled): one before the user allowed alerts, which
// iOS does not show; after registerUserNotificationSettings, one at once, one a moment later, and
// one an hour later that it cancels through a copy from scheduledLocalNotifications.
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
    let early = UILocalNotification()
    early.alertBody = "too early"
    application.presentLocalNotificationNow(early)
    application.registerUserNotificationSettings(
      UIUserNotificationSettings(types: [.alert, .badge, .sound], categories: nil))
    return true
  }

  func application(_ application: UIApplication, didRegister notificationSettings: UIUserNotificationSettings) {
    say("didRegister types=\(notificationSettings.types.rawValue)")
    let finished = UILocalNotification()
    finished.alertTitle = "Downloads"
    finished.alertBody = "report.pdf finished"
    finished.soundName = UILocalNotificationDefaultSoundName
    finished.userInfo = ["file": "report.pdf"]
    application.presentLocalNotificationNow(finished)

    let soon = UILocalNotification()
    soon.fireDate = Date(timeIntervalSinceNow: 1)
    soon.alertBody = "reminder"
    application.scheduleLocalNotification(soon)
    let later = UILocalNotification()
    later.fireDate = Date(timeIntervalSinceNow: 3600)
    later.alertBody = "in an hour"
    later.applicationIconBadgeNumber = 1
    application.scheduleLocalNotification(later)
    say("scheduled \(application.scheduledLocalNotifications?.count ?? 0)")
    if let copy = application.scheduledLocalNotifications?.first(where: { $0.alertBody == "in an hour" }) {
      application.cancelLocalNotification(copy)
    }
    say("scheduled after cancelling \(application.scheduledLocalNotifications?.count ?? 0)")
    application.applicationIconBadgeNumber = 3
    say("badge \(application.applicationIconBadgeNumber)")
    Timer.scheduledTimer(withTimeInterval: 0.1, repeats: true) { timer in
      guard application.scheduledLocalNotifications?.isEmpty ?? true else { return }
      timer.invalidate()
      say("none scheduled")
    }
  }

  func applicationDidBecomeActive(_ application: UIApplication) {
    say("didBecomeActive state=\(application.applicationState.rawValue)")
  }

  func applicationWillTerminate(_ application: UIApplication) {
    say("willTerminate")
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
