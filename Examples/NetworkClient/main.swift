// NetworkClient: networking code as iOS apps write it, ported by its imports alone and built in the
// Swift 5 language mode: a session delegate that answers an HTTP Basic challenge, cookies from a
// login, a JSON upload with its progress, a body read line by line while it arrives, a response
// turned into a download, and the tasks' metrics. Run as `NetworkClient BASE-URL` against a server
// that asks for credentials under /auth/basic/USER/PASS/ and sets cookies under /cookie/NAME/VALUE/
// (the tests' upload server); one line per step.
import Foundation
import ProtFSKit

func say(_ line: String) {
  print(line)
  fflush(stdout)
}

final class APIClient: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate {
  var session: URLSession!
  var challenges = 0
  var metricsSeen = 0
  var sentBytes: Int64 = 0
  var downloadedBytes = 0
  let finished = DispatchSemaphore(value: 0)

  override init() {
    super.init()
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpAdditionalHeaders = ["Accept": "application/json"]
    configuration.timeoutIntervalForRequest = 20
    session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
    completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
  ) {
    challenges += 1
    guard challenge.previousFailureCount == 0,
      challenge.protectionSpace.authenticationMethod == NSURLAuthenticationMethodHTTPBasic
    else {
      completionHandler(.cancelAuthenticationChallenge, nil)
      return
    }
    completionHandler(.useCredential, URLCredential(user: "ios", password: "secret", persistence: .forSession))
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didFinishCollecting metrics: URLSessionTaskMetrics) {
    metricsSeen += 1
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64, totalBytesSent: Int64,
    totalBytesExpectedToSend: Int64
  ) {
    sentBytes = totalBytesSent
  }

  func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
  ) {
    let isArchive = dataTask.originalRequest?.url?.lastPathComponent == "archive"
    completionHandler(isArchive ? .becomeDownload : .allow)
  }

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask) {
    say("became a download")
  }

  func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
    downloadedBytes = (try? Data(contentsOf: location).count) ?? -1
  }

  func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
    if let error = error { say("failed: \(error.localizedDescription)") }
    finished.signal()
  }
}

guard let base = CommandLine.arguments.dropFirst().first.flatMap(URL.init(string:)) else {
  FileHandle.standardError.write("usage: NetworkClient BASE-URL\n".data(using: .utf8)!)
  exit(64)
}
let client = APIClient()

// A protected resource: the delegate answers the server's Basic challenge.
let (_, profile) = try await client.session.data(from: base.appendingPathComponent("auth/basic/ios/secret/profile"))
say("profile \((profile as? HTTPURLResponse)?.statusCode ?? 0) after \(client.challenges) challenge(s)")

// A login sets a cookie, which the next request carries.
_ = try await client.session.data(from: base.appendingPathComponent("cookie/session/s3cr3t/login"))
let (me, _) = try await client.session.data(from: base.appendingPathComponent("me"))
let cookie = (try JSONSerialization.jsonObject(with: me) as? [String: Any])?["cookie"] as? String
say("cookie sent: \(cookie ?? "none")")

// A JSON report, uploaded with its progress.
var post = URLRequest(url: base.appendingPathComponent("reports"))
post.httpMethod = "POST"
post.setValue("application/json", forHTTPHeaderField: "Content-Type")
let payload = try JSONEncoder().encode(["title": "Quarterly", "body": String(repeating: "figures ", count: 4000)])
let upload = client.session.uploadTask(with: post, from: payload)
upload.resume()
client.finished.wait()
say("uploaded \(client.sentBytes) of \(payload.count) bytes, progress \(upload.progress.fractionCompleted)")

// A body read line by line while it arrives.
let (bytes, _) = try await URLSession.shared.bytes(from: base.appendingPathComponent("events"))
var lines = 0
for try await line in bytes.lines where line.contains("\"method\"") { lines += 1 }
say("event lines: \(lines)")

// A response the delegate turns into a download.
client.session.dataTask(with: base.appendingPathComponent("archive")).resume()
client.finished.wait()
say("archive \(client.downloadedBytes) bytes")
say("metrics for \(client.metricsSeen) tasks")
