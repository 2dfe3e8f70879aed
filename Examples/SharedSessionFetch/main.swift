// SharedSessionFetch: background fetch as Apple's documentation writes it, ported by its imports
// alone: the fetch handler asks `URLSession.shared` for the latest data and keeps it in Documents
// with complete protection. Built in the Swift 5 language mode, as most iOS apps are.
//
// Run as `SharedSessionFetch URL`. While the device is locked the request still succeeds (a data
// task touches no file), and so does a download of it into tmp/ (the container's class, available
// after the first unlock), but a complete file cannot be made: the fetch then fails, as on a phone.
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
      // The same as a download: the app writes it into its tmp/ itself, as a standard session's
      // download is on iOS (tmp/ has the container's class, available after the first unlock).
      URLSession.shared.downloadTask(with: url) { location, _, error in
        if let location = location, location.path.contains("/tmp/CFNetworkDownload_") {
          let size = (try? FileManager.default.attributesOfItem(atPath: location.path)[.size] as? Int) ?? -1
          say("downloaded \(size) bytes into tmp")
        } else {
          say("download failed: \(error.map { "\($0)" } ?? "no file")")
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
    }.resume()
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
