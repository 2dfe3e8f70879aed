// PauseResume: the source documents' pause and resume, ported from iOS with only its imports
// changed: a download of the URL given as its argument (or $DOWNLOAD_URL) is paused with
// cancel(byProducingResumeData:) after its first progress, then continued with
// downloadTask(withResumeData:). One JSON line per delegate call.
import Foundation
import ProtFSKit

/// Prints one JSON line at once.
func say(_ fields: [String: Any]) {
  let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
  FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// Pauses the download once, then resumes it from its resume data.
final class PauseResume: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
  var session: URLSession!
  var paused = false
  let done = DispatchSemaphore(value: 0)

  func run(_ url: URL) {
    let configuration = URLSessionConfiguration.background(withIdentifier: "com.example.PauseResume")
    session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    session.downloadTask(with: url).resume()
    done.wait()
  }

  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
  ) {
    say(["event": "didWriteData", "task": downloadTask.taskIdentifier, "written": totalBytesWritten])
    guard !paused else { return }
    paused = true
    downloadTask.cancel(byProducingResumeData: { data in
      say(["event": "paused", "resumeData": data?.count ?? 0])
      guard let data else { return }
      let task = session.downloadTask(withResumeData: data)
      task.resume()
      say(["event": "resumed", "task": task.taskIdentifier])
    })
  }

  func urlSession(
    _ session: URLSession, downloadTask: URLSessionDownloadTask, didResumeAtOffset fileOffset: Int64,
    expectedTotalBytes: Int64
  ) {
    say(["event": "didResumeAtOffset", "task": downloadTask.taskIdentifier, "offset": fileOffset])
  }

  /// Moves the file into Documents under the name of what was downloaded: `location` is the
  /// session's temp file (`CFNetworkDownload_XXXXXX.tmp`), whose name is no document's.
  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    let documents = FileManager.default.urls(for: .documentDirectory, in: .userDomainMask).first
    let name = downloadTask.originalRequest?.url?.lastPathComponent ?? "download"
    let destination = documents?.appendingPathComponent(name)
    if let destination {
      try? FileManager.default.removeItem(at: destination)
      try? FileManager.default.moveItem(at: location, to: destination)
    }
    say(["event": "didFinishDownloadingTo", "task": downloadTask.taskIdentifier, "path": destination?.path ?? ""])
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    let code = (error as NSError?)?.code ?? 0
    say(["event": "didCompleteWithError", "task": task.taskIdentifier, "code": code])
    if code != NSURLErrorCancelled { done.signal() }
  }
}

let argument = CommandLine.arguments.dropFirst().first ?? ProcessInfo.processInfo.environment["DOWNLOAD_URL"]
guard let text = argument, let url = URL(string: text) else {
  FileHandle.standardError.write(Data("usage: PauseResume URL\n".utf8))
  exit(64)
}
PauseResume().run(url)
