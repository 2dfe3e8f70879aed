// FetchHelper: background fetch, as the source documents' `performFetchWithCompletionHandler`
// examples do. It asks for fetches as often as the system allows, and when woken for one does
// its (simulated) download off the main queue and completes with `.newData`.
import Foundation
import ProtFSKit

/// Writes `line` to standard output at once (unbuffered), for whoever reads the app's output.
func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

/// The app's delegate: sets the fetch interval and answers fetches.
@MainActor final class FetchHelper: UIApplicationDelegate {
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    application.setMinimumBackgroundFetchInterval(UIApplication.backgroundFetchIntervalMinimum)
    say("ready, fetch interval \(application.minimumBackgroundFetchInterval)")
    return true
  }

  func application(
    _ application: UIApplication,
    performFetchWithCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void
  ) {
    // With the system's uptime, so that a reader can tell the fetches' spacing from the app's side.
    say(
      "fetching (state \(application.applicationState)) at \(String(format: "%.3f", ProcessInfo.processInfo.systemUptime))"
    )
    // The download would go here; the handler may be called from any thread, once.
    DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) {
      completionHandler(.newData)
      say("fetched newData")
    }
  }
}

UIApplication.main(delegate: FetchHelper())
