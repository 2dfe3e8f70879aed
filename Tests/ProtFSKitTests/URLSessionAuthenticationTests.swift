import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// Authentication challenges of the tasks an app runs itself (data tasks, a standard session's
/// downloads and uploads), against a Python server on loopback that asks for HTTP Basic or Digest
/// credentials: the delegate's task-level method as on iOS, `previousFailureCount`, the credential
/// storage, and the default handling.
@Suite(.timeLimit(.minutes(2))) struct URLSessionAuthenticationTests {
  /// A delegate that answers each challenge with the next of `answers` and records what it was asked.
  final class ChallengeDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    let answers: [(URLSession.AuthChallengeDisposition, URLCredential?)]
    let asked = Mutex<[URLAuthenticationChallenge]>([])
    let reply = Mutex(Data())
    let file = Mutex<Data?>(nil)
    let completed = Mutex<(Bool, NSError?)>((false, nil))
    let done = DispatchSemaphore(value: 0)

    init(_ answers: [(URLSession.AuthChallengeDisposition, URLCredential?)]) { self.answers = answers }

    func urlSession(
      _ session: URLSession, task: URLSessionTask, didReceive challenge: URLAuthenticationChallenge,
      completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
      let index = asked.withLock { asked in
        asked.append(challenge)
        return asked.count - 1
      }
      let (disposition, credential) = index < answers.count ? answers[index] : (.cancelAuthenticationChallenge, nil)
      completionHandler(disposition, credential)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
      reply.withLock { $0.append(data) }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
      file.withLock { $0 = try? Data(contentsOf: location) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      completed.withLock { $0 = (true, error.map { $0 as NSError }) }
      done.signal()
    }

    func waitForCompletion() async -> Bool { await offPool { [self] in done.wait(timeout: .now() + 20) == .success } }

    /// The server's JSON reply (or the downloaded file's).
    var json: [String: Any] {
      let data = file.withLock { $0 } ?? reply.withLock { $0 }
      return (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
    }
  }

  /// A standard session with `delegate`, whose credentials are its own (`ephemeral`), or `storage`'s.
  func session(_ delegate: (any URLSessionDelegate)?, storage: URLCredentialStorage? = nil) -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    if let storage { configuration.urlCredentialStorage = storage }
    return URLSession(
      configuration: configuration, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.auth.\(UUID())"))
  }

  /// HTTP Basic, as iOS asks: the task-level method gets the space (host, port, realm, method) and
  /// the 401; a refused credential brings the challenge again with `previousFailureCount` 1 and the
  /// refused user proposed; the right one gets the answer.
  @Test func aBasicChallengeGoesToTheTaskDelegateUntilACredentialIsTaken() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let delegate = ChallengeDelegate([
      (.useCredential, URLCredential(user: "alice", password: "wrong", persistence: .none)),
      (.useCredential, URLCredential(user: "alice", password: "secret", persistence: .forSession)),
    ])
    let storage = URLCredentialStorage()
    let url = server.url("auth/basic/alice/secret/items")
    session(delegate, storage: storage).dataTask(with: url).resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.completed.withLock { $0.1 } == nil)
    #expect(delegate.json["method"] as? String == "GET", "\(delegate.json)")
    let asked = delegate.asked.withLock { $0 }
    #expect(asked.map(\.previousFailureCount) == [0, 1])
    let space = try #require(asked.first?.protectionSpace)
    #expect(space.host == "127.0.0.1" && space.port == Int(server.port) && space.protocol == "http")
    #expect(space.realm == "protfs" && space.authenticationMethod == NSURLAuthenticationMethodHTTPBasic)
    #expect((asked.first?.failureResponse as? HTTPURLResponse)?.statusCode == 401)
    #expect(asked.last?.proposedCredential?.user == "alice")
    // Kept for the session (persistence .forSession), where the default handling finds it.
    #expect(storage.defaultCredential(for: space)?.password == "secret")
    #expect(server.requests.map(\.status) == [401, 401, 200])
  }

  /// Digest, answered by libcurl's own exchange with the credential the delegate gave: a standard
  /// session's download of a protected file gets it.
  @Test func aDigestChallengeIsAnsweredForADownload() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let delegate = ChallengeDelegate([(.useCredential, URLCredential(user: "bob", password: "pw", persistence: .none))])
    session(delegate).downloadTask(with: server.url("auth/digest/bob/pw/report.json")).resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.completed.withLock { $0.1 } == nil)
    #expect(
      delegate.asked.withLock { $0 }.first?.protectionSpace.authenticationMethod == NSURLAuthenticationMethodHTTPDigest)
    #expect(delegate.json["method"] as? String == "GET", "\(delegate.json)")
    #expect(server.requests.last?.headers["authorization"]?.hasPrefix("Digest ") == true)
  }

  /// An upload asked for credentials sends its whole body again with them.
  @Test func anUploadSendsItsBodyAgainWithTheCredential() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let delegate = ChallengeDelegate([(.useCredential, URLCredential(user: "u", password: "p", persistence: .none))])
    var request = URLRequest(url: server.url("auth/basic/u/p/upload"))
    request.httpMethod = "POST"
    session(delegate).uploadTask(with: request, from: Data(repeating: 7, count: 50_000)).resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.json["received"] as? Int == 50_000, "\(delegate.json)")
    #expect(server.requests.last?.received == 50_000 && server.requests.last?.status == 200)
  }

  /// A delegate that keeps answering with a wrong credential does not loop for ever against a
  /// server that keeps refusing: after 100 credentials the 401 is the task's answer.
  @Test func credentialsRefusedOverAndOverEndWithThe401() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let wrong = (
      URLSession.AuthChallengeDisposition.useCredential,
      Optional(
        URLCredential(user: "eve", password: "guess", persistence: .none))
    )
    let delegate = ChallengeDelegate(Array(repeating: wrong, count: 500))
    let task = session(delegate).dataTask(with: server.url("auth/basic/eve/secret/items"))
    task.resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.completed.withLock { $0.1 } == nil)
    #expect((task.response as? HTTPURLResponse)?.statusCode == 401)
    #expect(delegate.asked.withLock { $0.count } == 100)
    #expect(server.requests.count == 101)
  }

  /// A task's own delegate (iOS 15's `task.delegate`, and `data(for:delegate:)`'s) gets its calls
  /// in place of the session's: its challenge, and for a delegate task its data and completion.
  @Test func aTasksOwnDelegateTakesItsCalls() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let sessionDelegate = ChallengeDelegate([(.cancelAuthenticationChallenge, nil)])
    let shared = session(sessionDelegate)
    let own = ChallengeDelegate([(.useCredential, URLCredential(user: "dora", password: "pw", persistence: .none))])
    let (data, response) = try await shared.data(
      for: URLRequest(url: server.url("auth/basic/dora/pw/items")), delegate: own)
    #expect((response as? HTTPURLResponse)?.statusCode == 200, "\(String(decoding: data, as: UTF8.self))")
    #expect(own.asked.withLock { $0.count } == 1 && sessionDelegate.asked.withLock { $0 }.isEmpty)

    let other = ChallengeDelegate([(.useCredential, URLCredential(user: "dora", password: "pw", persistence: .none))])
    let task = shared.dataTask(with: server.url("auth/basic/dora/pw/again"))
    task.delegate = other
    task.resume()
    #expect(await other.waitForCompletion())
    #expect(other.json["method"] as? String == "GET" && other.completed.withLock { $0.1 } == nil)
    #expect(sessionDelegate.asked.withLock { $0 }.isEmpty && !sessionDelegate.completed.withLock { $0.0 })
    #expect(task.delegate == nil)
  }

  /// Without a delegate method (or left to the default handling) the credential storage answers,
  /// once: with nothing stored the 401 is the answer, as iOS gives it; a credential stored for the
  /// space is sent; a refused one is not sent again. Cancelling the challenge cancels the task.
  @Test func theDefaultHandlingUsesTheStorageAndCancellingCancels() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    let url = server.url("auth/basic/carol/pw/items")
    let storage = URLCredentialStorage()
    let plain = session(nil, storage: storage)
    let (_, unanswered) = try await plain.data(from: url)
    #expect((unanswered as? HTTPURLResponse)?.statusCode == 401)
    let space = URLProtectionSpace(
      host: "127.0.0.1", port: Int(server.port), protocol: "http", realm: "protfs",
      authenticationMethod: NSURLAuthenticationMethodHTTPBasic)
    storage.set(URLCredential(user: "carol", password: "pw", persistence: .permanent), for: space)
    let (_, answered) = try await plain.data(from: url)
    #expect((answered as? HTTPURLResponse)?.statusCode == 200)
    storage.setDefaultCredential(URLCredential(user: "carol", password: "old", persistence: .permanent), for: space)
    let before = server.requests.count
    let (_, refused) = try await plain.data(from: url)
    #expect((refused as? HTTPURLResponse)?.statusCode == 401)
    #expect(server.requests.count == before + 2)

    let cancelling = ChallengeDelegate([(.cancelAuthenticationChallenge, nil)])
    session(cancelling).dataTask(with: url).resume()
    #expect(await cancelling.waitForCompletion())
    #expect(cancelling.completed.withLock { $0.1 }?.code == NSURLErrorCancelled)
  }
}
