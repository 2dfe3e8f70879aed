// SharedSessionFetch: background fetch as Apple's documentation writes it, ported by its imports
// alone: the fetch handler asks `URLSession.shared` for the latest data and keeps it in Documents
// with complete protection. Built in the Swift 5 language mode, as most iOS apps are.
//
// Run as `SharedSessionFetch URL`. While the device is locked the request still succeeds (a data
// task touches no file), but a complete file cannot be made: the fetch then fails, as on a phone.
import Foundation
import ProtFSKit

func say(_ line: String) { FileHandle.standardOutput.write((line + "\n").data(using: .utf8)!) }

class AppDelegate: UIResponder, UIApplicationDelegate {
  var window: UIWindow?

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    application.setMinimumBackgroundFetchInterval(UIApplication.backgroundFetchIntervalMinimum)
    say("ready")
    return true
  }

  func application(
    _ application: UIApplication,
    performFetchWithCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
  ) {
    let url = URL(string: CommandLine.arguments[1])!
    URLSession.shared.dataTask(with: url) { data, response, error in
      guard let data = data, error == nil, (response as? HTTPURLResponse)?.statusCode == 200 else {
        say("fetch failed: \(error.map { "\($0)" } ?? "no data")")
        completionHandler(.failed)
        return
      }
      let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)[0]
      let file = documents.appendingPathComponent("latest.json")
      if FileManager.default.createFile(
        atPath: file.path, contents: data, attributes: [FileAttributeKey.protectionKey: FileProtectionType.complete])
      {
        say("fetched \(data.count) bytes, kept in Documents")
        completionHandler(.newData)
      } else {
        say("fetched \(data.count) bytes, cannot keep them")
        completionHandler(.failed)
      }
    }.resume()
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
