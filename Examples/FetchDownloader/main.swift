// FetchDownloader: the source documents' fetch helper, ported from iOS with only its imports
// changed: a background fetch starts a download (of argument 1 or $DOWNLOAD_URL) in a background
// session with a taskDescription; when the app is relaunched for the session's events it recreates
// the session, finds the task by its description, and calls the completion handler at the end.
import Foundation
import ProtFSKit

/// Prints one JSON line at once.
func say(_ fields: [String: Any]) {
  let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
  FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// The completion handler of handleEventsForBackgroundURLSession.
nonisolated(unsafe) var sessionCompletionHandler: (() -> Void)?

/// The fetch helper: owns the background session.
// `@unchecked Sendable`, as Foundation's URLSessionDelegate (Sendable) asks of a delegate with a lazy
// session: it is made once, on the main thread, before any delegate call reads it.
final class FetchDownloader: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
  static let identifier = "com.example.FetchDownloader"
  static let description = "fetch-download"
  lazy var session = URLSession(
    configuration: .background(withIdentifier: FetchDownloader.identifier), delegate: self, delegateQueue: nil)

  func startDownload(_ url: URL) {
    let task = session.downloadTask(with: URLRequest(url: url))
    task.taskDescription = FetchDownloader.description
    task.resume()
    say(["event": "started", "task": task.taskIdentifier, "description": FetchDownloader.description])
  }

  func reattach() {
    session.getTasksWithCompletionHandler { _, _, downloads in
      for task in downloads where task.taskDescription == FetchDownloader.description {
        say(["event": "reattached", "task": task.taskIdentifier, "state": task.state.rawValue])
      }
    }
  }

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask).first
    let destination = documents?.appendingPathComponent("fetched")
    if let destination {
      try? FileManager.default.removeItem(at: destination)
      try? FileManager.default.moveItem(at: location, to: destination)
    }
    say([
      "event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier,
      "description": downloadTask.taskDescription ?? "", "path": destination?.path ?? "",
    ])
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    say(["event": "didCompleteWithError", "task": task.taskIdentifier, "code": (error as NSError?)?.code ?? 0])
  }

  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
    say(["event": "urlSessionDidFinishEvents"])
    DispatchQueue.main.async {
      sessionCompletionHandler?()
      sessionCompletionHandler = nil
    }
  }
}

/// The app's delegate.
@MainActor final class AppDelegate: UIApplicationDelegate {
  let downloader = FetchDownloader()

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    application.setMinimumBackgroundFetchInterval(UIApplication.backgroundFetchIntervalMinimum)
    downloader.reattach()
    return true
  }

  func application(
    _ application: UIApplication,
    performFetchWithCompletionHandler completionHandler: @escaping @Sendable (UIBackgroundFetchResult) -> Void
  ) {
    let argument = CommandLine.arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["DOWNLOAD_URL"]
    guard let url = argument.flatMap(URL.init(string:)) else { return completionHandler(.failed) }
    downloader.startDownload(url)
    completionHandler(.newData)
  }

  func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler: @escaping () -> Void
  ) {
    say(["event": "handleEventsForBackgroundURLSession", "session": identifier])
    sessionCompletionHandler = completionHandler
    _ = downloader.session
  }
}

UIApplication.main(delegate: AppDelegate())
