// TaskScheduler: an app delegate that refreshes and cleans up with BGTaskScheduler, written as
// Apple's "Using background tasks to update your app" sample writes it for iOS 13 and later, and
// ported by changing `import UIKit` and `import BackgroundTasks` to `import ProtFSKit`. Built in
// the Swift 5 language mode, as such code is. Its Info.plist (given to `protfs app launch
// --info-plist`) lists both identifiers in BGTaskSchedulerPermittedIdentifiers and fetch and
// processing in UIBackgroundModes.
import Foundation
import ProtFSKit

@main
class AppDelegate: UIResponder, UIApplicationDelegate {
  static let refreshIdentifier = "com.example.tasks.refresh"
  static let cleanupIdentifier = "com.example.tasks.cleanup"

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    // Every launch handler is registered before the launch finishes, as iOS requires.
    BGTaskScheduler.shared.register(forTaskWithIdentifier: Self.refreshIdentifier, using: nil) { task in
      self.handleAppRefresh(task: task as! BGAppRefreshTask)
    }
    BGTaskScheduler.shared.register(forTaskWithIdentifier: Self.cleanupIdentifier, using: nil) { task in
      self.handleCleanup(task: task as! BGProcessingTask)
    }
    let unlisted = BGTaskScheduler.shared.register(forTaskWithIdentifier: "com.example.unlisted", using: nil) { _ in }
    print(
      "launched, state \(application.applicationState == .background ? "background" : "foreground"), unlisted registered \(unlisted)"
    )
    return true
  }

  func applicationDidEnterBackground(_ application: UIApplication) {
    scheduleAppRefresh()
    scheduleCleanup()
    BGTaskScheduler.shared.getPendingTaskRequests { requests in
      print("pending: " + requests.map(\.identifier).sorted().joined(separator: ", "))
    }
  }

  func scheduleAppRefresh() {
    let request = BGAppRefreshTaskRequest(identifier: Self.refreshIdentifier)
    // Fetch no earlier than 15 minutes from now.
    request.earliestBeginDate = Date(timeIntervalSinceNow: 15 * 60)
    do {
      try BGTaskScheduler.shared.submit(request)
    } catch {
      print("Could not schedule app refresh: \(error)")
    }
  }

  func scheduleCleanup() {
    let request = BGProcessingTaskRequest(identifier: Self.cleanupIdentifier)
    request.requiresNetworkConnectivity = false
    request.requiresExternalPower = true
    do {
      try BGTaskScheduler.shared.submit(request)
    } catch {
      print("Could not schedule the cleanup: \(error)")
    }
  }

  func handleAppRefresh(task: BGAppRefreshTask) {
    // Schedule the next refresh, then do this one.
    scheduleAppRefresh()
    task.expirationHandler = {
      print("refresh expired")
      task.setTaskCompleted(success: false)
    }
    print("refresh ran main=\(Thread.isMainThread)")
    task.setTaskCompleted(success: true)
  }

  func handleCleanup(task: BGProcessingTask) {
    // A long cleanup, stopped only by its expiration.
    task.expirationHandler = {
      print("cleanup expired")
      task.setTaskCompleted(success: false)
    }
    print("cleanup started")
  }
}
