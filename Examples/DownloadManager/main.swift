// DownloadManager: a background download manager as open-source iOS ones are written, ported with
// only its imports changed. It keeps each download's resume data itself (in Library/Caches), finds
// the partial file in tmp/ by the resume data's NSURLSessionResumeInfoTempFileName, archives the task's
// response with NSKeyedArchiver (secure coding), and continues a paused or cancelled download when
// launched with `resume`. One JSON line per delegate call. Its arguments:
//
//   DownloadManager start URL   download URL; pause it (cancel producing resume data) at its first bytes
//   DownloadManager run URL     download URL to the end
//   DownloadManager resume      continue the download whose resume data it kept
//   DownloadManager             make the session and list its tasks (a launch after a force-quit, or
//                               for its events)
//
// As MZDownloadManager, it keeps the downloads it shows in a list: those it started, and at launch
// those the session still has, which it asks for with getTasksWithCompletionHandler while the main
// thread waits. A finished download that is not in the list is not its: it leaves the file.
// Every line is also appended to Library/DownloadManager.log, which a relaunch in the background
// (whose output nobody reads) leaves for its user.
import Foundation
import ProtFSKit

/// Prints one JSON line at once.
func say(_ fields: [String: Any]) {
  let line = ((try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()) + Data("\n".utf8)
  FileHandle.standardOutput.write(line)
  sayLock.lock()
  defer { sayLock.unlock() }
  let log = FileManager.default.urls(for: .libraryDirectory, in: .userDomainMask)[0]
    .appendingPathComponent("DownloadManager.log")
  if !FileManager.default.fileExists(atPath: log.path) {
    FileManager.default.createFile(atPath: log.path, contents: nil)
  }
  guard let handle = try? FileHandle(forWritingTo: log) else { return }
  handle.seekToEndOfFile()
  handle.write(line)
  handle.closeFile()
}
let sayLock = NSLock()

/// Where the manager keeps what it needs across launches.
enum Store {
  static var caches: URL { FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask)[0] }
  static var resumeData: URL { caches.appendingPathComponent("download.resumedata") }
  static var response: URL { caches.appendingPathComponent("download.response") }
}

/// The fields of resume data, as download managers read them: a keyed archive since iOS 12, a
/// plain property list before.
func resumeDictionary(_ data: Data) -> [String: Any]? {
  if let archived = try? NSKeyedUnarchiver.unarchivedObject(
    ofClasses: [NSDictionary.self, NSString.self, NSNumber.self, NSData.self], from: data) as? [String: Any]
  {
    return archived
  }
  return try? PropertyListSerialization.propertyList(from: data, options: [], format: nil) as? [String: Any]
}

final class Manager: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
  static let identifier = "com.example.DownloadManager"
  let pausesAtFirstBytes: Bool
  lazy var session: URLSession = {
    let configuration = URLSessionConfiguration.background(withIdentifier: Manager.identifier)
    configuration.sessionSendsLaunchEvents = true
    return URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
  }()

  /// The downloads it shows (guarded by `lock`).
  private var downloads: [URLSessionDownloadTask] = []
  private let lock = NSLock()

  init(pausesAtFirstBytes: Bool) { self.pausesAtFirstBytes = pausesAtFirstBytes }

  /// Starts `task` and shows it.
  func start(_ task: URLSessionDownloadTask) {
    lock.withLock { downloads.append(task) }
    task.resume()
  }

  /// Shows the session's running and paused downloads, waiting for the list as MZDownloadManager does.
  func listTasks() {
    let listed = DispatchSemaphore(value: 0)
    session.getTasksWithCompletionHandler { _, _, tasks in
      let shown = tasks.filter { $0.state == .running || $0.state == .suspended }
      self.lock.withLock { self.downloads += shown }
      say(["event": "listed", "tasks": tasks.map { ["task": $0.taskIdentifier, "state": $0.state.rawValue] }])
      listed.signal()
    }
    listed.wait()
  }

  /// Keeps `data` and says what it names.
  func keep(_ data: Data, event: String) {
    try? data.write(to: Store.resumeData)
    let fields = resumeDictionary(data) ?? [:]
    let name = fields["NSURLSessionResumeInfoTempFileName"] as? String ?? ""
    // The partial file waits in tmp/, under the name the resume data gives.
    let temporary = URL(fileURLWithPath: NSTemporaryDirectory())
    say([
      "event": event, "resumeData": data.count, "temporaryFileName": name,
      "bytes": (fields["NSURLSessionResumeBytesReceived"] as? NSNumber)?.intValue ?? -1,
      "partialExists": FileManager.default.fileExists(atPath: temporary.appendingPathComponent(name).path),
    ])
  }

  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
  ) {
    let status = (downloadTask.response as? HTTPURLResponse)?.statusCode ?? 0
    say(["event": "didWriteData", "task": downloadTask.taskIdentifier, "written": totalBytesWritten, "status": status])
    guard pausesAtFirstBytes, downloadTask.state == .running else { return }
    // The response is kept with the resume data, as download managers keep it to show the file's
    // size and type while paused.
    if let response = downloadTask.response {
      do {
        let archived = try NSKeyedArchiver.archivedData(withRootObject: response, requiringSecureCoding: true)
        try archived.write(to: Store.response)
        say(["event": "archivedResponse", "bytes": archived.count])
      } catch {
        say(["event": "archivedResponse", "error": "\(error)"])
      }
    }
    downloadTask.cancel(byProducingResumeData: { data in
      guard let data else { return say(["event": "paused", "resumeData": 0]) }
      self.keep(data, event: "paused")
    })
  }

  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64,
    expectedTotalBytes: Int64
  ) {
    say(["event": "didResumeAtOffset", "task": downloadTask.taskIdentifier, "offset": fileOffset])
  }

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    guard lock.withLock({ downloads.contains { $0 === downloadTask } }) else {
      return say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "error": "not in the list"])
    }
    let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask)[0]
    let destination = documents.appendingPathComponent(downloadTask.originalRequest?.url?.lastPathComponent ?? "file")
    try? FileManager.default.removeItem(at: destination)
    do {
      try FileManager.default.moveItem(at: location, to: destination)
      say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "path": destination.path])
    } catch {
      say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "error": "\(error)"])
    }
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    var line: [String: Any] = ["event": "didCompleteWithError", "task": task.taskIdentifier]
    if let error = error as NSError? {
      line["code"] = error.code
      if let reason = error.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int { line["reason"] = reason }
      if let data = error.userInfo[NSURLSessionDownloadTaskResumeData] as? Data {
        line["resumeData"] = data.count
        keep(data, event: "keptResumeData")
      }
    }
    say(line)
  }

  func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
    say(["event": "urlSessionDidFinishEvents"])
    DispatchQueue.main.async {
      completionHandler?()
      completionHandler = nil
    }
  }

  /// Continues the kept download.
  func resume() {
    guard let data = try? Data(contentsOf: Store.resumeData) else { return say(["event": "nothingToResume"]) }
    if let archived = try? Data(contentsOf: Store.response) {
      let response = try? NSKeyedUnarchiver.unarchivedObject(ofClass: HTTPURLResponse.self, from: archived)
      say([
        "event": "unarchivedResponse", "status": response?.statusCode ?? 0,
        "length": response?.expectedContentLength ?? 0, "etag": response?.value(forHTTPHeaderField: "ETag") ?? "",
      ])
    }
    let task = session.downloadTask(withResumeData: data)
    start(task)
    say(["event": "resumed", "task": task.taskIdentifier])
  }
}

/// The handler of handleEventsForBackgroundURLSession, kept until the events are done.
nonisolated(unsafe) var completionHandler: (() -> Void)?

class AppDelegate: UIResponder, UIApplicationDelegate {
  var window: UIWindow?
  var manager: Manager?

  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions launchOptions: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    let arguments = Array(CommandLine.arguments.dropFirst())
    let command = application.applicationState == .background ? nil : arguments.first
    let manager = Manager(pausesAtFirstBytes: command == "start")
    self.manager = manager
    switch command {
    case "start"?, "run"?:
      guard arguments.count > 1, let url = URL(string: arguments[1]) else { break }
      try? FileManager.default.removeItem(at: Store.resumeData)
      application.isNetworkActivityIndicatorVisible = true
      manager.start(manager.session.downloadTask(with: url))
      say(["event": "started"])
    case "resume"?:
      manager.resume()
    default:
      manager.listTasks()
      say(["event": "sessionMade"])
    }
    return true
  }

  func application(
    _ application: UIApplication, handleEventsForBackgroundURLSession identifier: String,
    completionHandler handler: @escaping () -> Void
  ) {
    say(["event": "handleEventsForBackgroundURLSession", "session": identifier])
    completionHandler = handler
    _ = manager?.session
  }
}

UIApplicationMain(CommandLine.argc, CommandLine.unsafeArgv, nil, NSStringFromClass(AppDelegate.self))
