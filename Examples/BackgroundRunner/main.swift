// BackgroundRunner: keeps working in the background with a background task, as the source
// documents' `beginBackgroundTaskWithExpirationHandler` examples do.
//
// On entering the background it begins a task and prints a counter every 200 ms; after TICKS
// ticks (the first argument, 5 by default: one second, well inside the budget) the work is done
// and it ends the task, after which the system suspends the app. Meanwhile a main-thread timer
// logs the background time left, as the source documents' runner does with an NSTimer. If the time runs out first, the
// expiration handler stops the work and ends the task, so the app is suspended rather than killed.
import Foundation
import ProtFSKit

/// Writes `line` to standard output at once (unbuffered), for whoever reads the app's output.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// The app's delegate: the background work and its task.
@MainActor final class Runner: UIApplicationDelegate {
  /// How many ticks make the work.
  let ticks = CommandLine.arguments.dropFirst().first.flatMap { Int($0) } ?? 5
  /// The open task, or `.invalid`.
  var task = UIBackgroundTaskIdentifier.invalid
  /// Ticks done so far in this background period.
  var count = 0
  /// Logs the background time left while the task is open.
  var timer: Timer?

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    // Any object may observe the app's notifications, as on iOS; they are posted on the main queue.
    let names = [
      UIApplication.didEnterBackgroundNotification, UIApplication.willEnterForegroundNotification,
      UIApplication.protectedDataWillBecomeUnavailableNotification,
      UIApplication.protectedDataDidBecomeAvailableNotification,
    ]
    for name in names {
      _ = NotificationCenter.default.addObserver(forName: name, object: nil, queue: nil) { note in
        say("notified \(note.name.rawValue)")
      }
    }
    let unlimited = application.backgroundTimeRemaining == .greatestFiniteMagnitude
    say(
      "ready, state \(application.applicationState), time \(unlimited ? "unlimited" : "limited"), "
        + "protected data \(application.isProtectedDataAvailable)")
    return true
  }

  func applicationProtectedDataWillBecomeUnavailable(_ application: UIApplication) {
    say("protected data locking")
  }

  func applicationProtectedDataDidBecomeAvailable(_ application: UIApplication) {
    say("protected data available: \(application.isProtectedDataAvailable)")
  }

  func applicationDidEnterBackground(_ application: UIApplication) {
    task = application.beginBackgroundTask(withName: "work") { [self] in
      // Time is almost up: stop working and end the task, or the system kills the app.
      say("expired after \(count) ticks")
      finish()
    }
    count = 0
    say("background task \(task.rawValue), remaining \(String(format: "%.1f", application.backgroundTimeRemaining))")
    timer = Timer.scheduledTimer(withTimeInterval: 0.25, repeats: true) { _ in
      MainActor.assumeIsolated {
        say("time remaining \(String(format: "%.1f", UIApplication.shared.backgroundTimeRemaining))")
      }
    }
    tick()
  }

  /// One step of the work, then the next in 200 ms, until the work is done or the task ended.
  func tick() {
    guard task != .invalid else { return }
    count += 1
    say("tick \(count)")
    if count == ticks {
      say("done")
      finish()
      return
    }
    DispatchQueue.main.asyncAfter(deadline: .now() + 0.2) {
      MainActor.assumeIsolated { self.tick() }
    }
  }

  /// Ends the task (once), and its timer.
  func finish() {
    timer?.invalidate()
    timer = nil
    UIApplication.shared.endBackgroundTask(task)
    task = .invalid
  }

  func applicationWillEnterForeground(_ application: UIApplication) {
    say("foreground")
  }

  func applicationWillTerminate(_ application: UIApplication) {
    say("terminating")
  }

  /// A remote notification (`protfs app push`): a silent one wakes the app in the background.
  func application(
    _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
    fetchCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void
  ) {
    let state = application.applicationState == .active ? "active" : "background"
    say("push \(userInfo["url"] as? String ?? "-"), \(state), main thread \(Thread.isMainThread)")
    completionHandler(.newData)
  }
}

UIApplication.main(delegate: Runner())
