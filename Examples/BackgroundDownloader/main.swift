// BackgroundDownloader: the source documents' background download session, ported from iOS with
// only its imports changed. It downloads the URL given as its argument (or $DOWNLOAD_URL), reports
// progress, moves the finished file into Documents, continues a download the system cancelled
// from its resume data, and when relaunched for the session's events keeps the completion handler
// and calls it from urlSessionDidFinishEvents.
import Foundation
import ProtFSKit

/// Prints one JSON line (a delegate call) at once.
func say(_ fields: [String: Any]) {
  let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
  FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// The completion handler of handleEventsForBackgroundURLSession, kept until the events are done.
nonisolated(unsafe) var backgroundCompletionHandler: (() -> Void)?

/// The download session's delegate.
// `@unchecked Sendable`, as Foundation's URLSessionDelegate (Sendable) asks of a delegate with a lazy
// session: it is made once, on the main thread, before any delegate call reads it.
final class Downloader: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
  static let identifier = "com.example.BackgroundDownloader"
  lazy var session: URLSession = {
    let configuration = URLSessionConfiguration.background(withIdentifier: Downloader.identifier)
    configuration.sessionSendsLaunchEvents = true
    configuration.isDiscretionary = false
    return URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
  }()

  func start(_ url: URL) {
    let task = session.downloadTask(with: url)
    task.resume()
    say(["event": "started", "task": task.taskIdentifier, "url": url.absoluteString])
  }

  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
  ) {
    say([
      "event": "didWriteData", "task": downloadTask.taskIdentifier, "written": totalBytesWritten,
      "expected": totalBytesExpectedToWrite,
    ])
  }

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    let fileManager = FileManager.default
    guard let documents = fileManager.urls(for: .documentDirectory, in: .userDomainMask).first else { return }
    let name = downloadTask.originalRequest?.url?.lastPathComponent ?? "download"
    let destination = documents.appendingPathComponent(name)
    try? fileManager.removeItem(at: destination)
    do {
      try fileManager.moveItem(at: location, to: destination)
      say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "path": destination.path])
    } catch {
      say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "error": "\(error)"])
    }
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    var line: [String: Any] = ["event": "didCompleteWithError", "task": task.taskIdentifier]
    var resumeData: Data?
    if let error = error as NSError? {
      line["domain"] = error.domain
      line["code"] = error.code
      if let reason = error.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int { line["reason"] = reason }
      resumeData = error.userInfo[NSURLSessionDownloadTaskResumeData] as? Data
      line["resumeData"] = resumeData?.count
    }
    say(line)
    // Stopped by the system (a force-quit) or the network: continue where it stopped.
    if let resumeData {
      let again = session.downloadTask(withResumeData: resumeData)
      again.resume()
      say(["event": "resumed", "task": again.taskIdentifier])
    }
  }

  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
    say(["event": "urlSessionDidFinishEvents", "session": Downloader.identifier])
    DispatchQueue.main.async {
      backgroundCompletionHandler?()
      backgroundCompletionHandler = nil
    }
  }
}

/// The app's delegate.
@MainActor final class AppDelegate: UIApplicationDelegate {
  let downloader = Downloader()

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    let argument = CommandLine.arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["DOWNLOAD_URL"]
    // Relaunched in the background for the session's events: nothing new to start.
    if application.applicationState != .background, let text = argument, let url = URL(string: text) {
      downloader.start(url)
    } else {
      _ = downloader.session
    }
    return true
  }

  func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler: @escaping () -> Void
  ) {
    say(["event": "handleEventsForBackgroundURLSession", "session": identifier])
    backgroundCompletionHandler = completionHandler
    _ = downloader.session
  }
}

UIApplication.main(delegate: AppDelegate())
