// PushDownloader: an app woken by a silent push that starts a background download of the URL the
// push carries, as iOS apps fetch new content on a content-available notification, ported with
// only its imports changed (Swift 6 language mode). The file lands in Documents, from the
// delegate of the background session, whether the app still runs or is woken for the session.
import Foundation
import ProtFSKit

/// Prints one line at once.
func say(_ text: String) {
  FileHandle.standardOutput.write(Data((text + "\n").utf8))
}

/// The completion handler of handleEventsForBackgroundURLSession, kept until the events are done.
nonisolated(unsafe) var backgroundCompletionHandler: (() -> Void)?

/// The background session's delegate.
// `@unchecked Sendable`, as Foundation's URLSessionDelegate (Sendable) asks of a delegate with a lazy
// session: it is made once, on the main thread, before any delegate call reads it.
final class ContentDownloader: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
  static let identifier = "com.example.PushDownloader"
  lazy var session: URLSession = {
    let configuration = URLSessionConfiguration.background(withIdentifier: ContentDownloader.identifier)
    configuration.sessionSendsLaunchEvents = true
    return URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
  }()

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    let fileManager = FileManager.default
    guard let documents = fileManager.urls(for: .documentDirectory, in: .userDomainMask).first else { return }
    let destination = documents.appendingPathComponent(downloadTask.originalRequest?.url?.lastPathComponent ?? "new")
    try? fileManager.removeItem(at: destination)
    do {
      try fileManager.moveItem(at: location, to: destination)
      say("downloaded \(destination.path)")
    } catch {
      say("download not moved: \(error)")
    }
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    if let error { say("download failed: \(error)") }
  }

  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
    DispatchQueue.main.async {
      backgroundCompletionHandler?()
      backgroundCompletionHandler = nil
    }
  }
}

@MainActor final class AppDelegate: UIApplicationDelegate {
  let downloader = ContentDownloader()

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    _ = downloader.session
    say("launched")
    return true
  }

  func application(
    _ application: UIApplication, didReceiveRemoteNotification userInfo: [AnyHashable: Any],
    fetchCompletionHandler completionHandler: @escaping (UIBackgroundFetchResult) -> Void
  ) {
    guard let text = userInfo["url"] as? String, let url = URL(string: text) else {
      say("push without a url")
      completionHandler(.noData)
      return
    }
    downloader.session.downloadTask(with: url).resume()
    say("push: downloading \(url.lastPathComponent)")
    completionHandler(.newData)
  }

  func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler: @escaping () -> Void
  ) {
    backgroundCompletionHandler = completionHandler
    _ = downloader.session
  }
}

UIApplication.main(delegate: AppDelegate())
