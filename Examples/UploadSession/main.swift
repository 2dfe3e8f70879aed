// UploadSession: the source documents' background upload, ported from iOS with only its imports
// changed: PUT of a file in the container (argument 2 or $UPLOAD_FILE) to the URL given as argument
// 1 (or $UPLOAD_URL), reading the server's JSON reply in dataTask(_:didReceive:) and finishing in
// didCompleteWithError. One JSON line per delegate call. A third argument `standard` makes the session
// a standard one (`.default`), whose upload runs in the app itself, reading the file as the app.
import Foundation
import ProtFSKit

/// Prints one JSON line at once.
func say(_ fields: [String: Any]) {
  let data = (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
  FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// The upload session's delegate.
final class UploadSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  var responseData = Data()
  let done = DispatchSemaphore(value: 0)

  func upload(_ file: URL, to url: URL, standard: Bool = false) {
    let configuration =
      standard
      ? URLSessionConfiguration.default
      : URLSessionConfiguration.background(withIdentifier: "com.example.UploadSession")
    let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
    var request = URLRequest(url: url)
    request.httpMethod = "PUT"
    request.setValue("application/octet-stream", forHTTPHeaderField: "Content-Type")
    let task = session.uploadTask(with: request, fromFile: file)
    task.resume()
    say(["event": "started", "task": task.taskIdentifier])
    done.wait()
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {
    say([
      "event": "didSendBodyData", "task": task.taskIdentifier, "sent": totalBytesSent,
      "expected": totalBytesExpectedToSend,
    ])
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    responseData.append(data)
    let json = try? JSONSerialization.jsonObject(with: responseData)
    say(["event": "didReceive", "task": dataTask.taskIdentifier, "bytes": data.count, "json": json != nil])
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
    var line: [String: Any] = ["event": "didCompleteWithError", "task": task.taskIdentifier]
    line["status"] = (task.response as? HTTPURLResponse)?.statusCode ?? 0
    if let error = error as NSError? { line["domain"] = error.domain; line["code"] = error.code }
    say(line)
    done.signal()
  }
}

let environment = ProcessInfo.processInfo.environment
let arguments = Array(CommandLine.arguments.dropFirst())
guard let target = (arguments.first ?? environment["UPLOAD_URL"]).flatMap(URL.init(string:)),
  let path = arguments.dropFirst().first ?? environment["UPLOAD_FILE"]
else {
  FileHandle.standardError.write(Data("usage: UploadSession URL FILE [standard]\n".utf8))
  exit(64)
}
UploadSession().upload(URL(fileURLWithPath: path), to: target, standard: arguments.dropFirst(2).first == "standard")
