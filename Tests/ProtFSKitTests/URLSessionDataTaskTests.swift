import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// ProtFSKit's data tasks, run in the app's own process as iOS runs a standard session's, against
/// servers on loopback: the delegate's calls in order, completion handlers, awaited results, the
/// shared session, and Foundation's error codes.
@Suite(.timeLimit(.minutes(2))) struct URLSessionDataTaskTests {
  /// A data delegate that records what it is told, and answers the response with `disposition`.
  final class DataDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let calls = Mutex<[String]>([])
    let body = Mutex(Data())
    let response = Mutex<HTTPURLResponse?>(nil)
    let error = Mutex<NSError?>(nil)
    let onMainQueue = Mutex<[Bool]>([])
    let done = DispatchSemaphore(value: 0)
    let disposition: URLSession.ResponseDisposition
    let queue: OperationQueue

    init(disposition: URLSession.ResponseDisposition = .allow, queue: OperationQueue) {
      self.disposition = disposition
      self.queue = queue
    }

    func urlSession(
      _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
      completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
      calls.withLock { $0.append("response") }
      self.response.withLock { $0 = response as? HTTPURLResponse }
      onMainQueue.withLock { $0.append(OperationQueue.current === queue) }
      completionHandler(disposition)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
      if calls.withLock({ $0.last }) != "data" { calls.withLock { $0.append("data") } }
      body.withLock { $0.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      calls.withLock { $0.append("complete") }
      self.error.withLock { $0 = error.map { $0 as NSError } }
      onMainQueue.withLock { $0.append(OperationQueue.current === queue) }
      done.signal()
    }

    /// Waits (off the cooperative pool) for the completion, at most 20 s.
    func waitForCompletion() async -> Bool { await offPool { [self] in done.wait(timeout: .now() + 20) == .success } }
  }

  /// A standard session with `delegate` on `queue` (over a fake service: data tasks never use it).
  func session(_ delegate: (any URLSessionDelegate)?, queue: OperationQueue? = nil) -> URLSession {
    URLSession(
      configuration: .default, delegate: delegate, delegateQueue: queue,
      backend: FakeSessionBackend(identifier: "fake.data.\(UUID())"))
  }

  /// Runs `make`'s completion-handler task and returns what its handler got.
  func completed(
    _ make: (@escaping @Sendable (Data?, URLResponse?, (any Error)?) -> Void) -> URLSessionTask
  ) async -> (Data?, HTTPURLResponse?, NSError?) {
    let result = Mutex<(Data?, HTTPURLResponse?, NSError?)>((nil, nil, nil))
    let done = DispatchSemaphore(value: 0)
    let task = make { data, response, error in
      result.withLock { $0 = (data, response as? HTTPURLResponse, error.map { $0 as NSError }) }
      done.signal()
    }
    task.resume()
    _ = await offPool { done.wait(timeout: .now() + 20) }
    return result.withLock { $0 }
  }

  @Test func theDelegateGetsTheResponseWithItsHeadersThenTheBodyThenTheEndOnItsQueue() async throws {
    let body = DownloadFixture.bytes(300_000)
    let server = try FaultServer(body: body, entityTag: "\"e1\"")
    defer { server.stop() }
    let queue = OperationQueue()
    queue.maxConcurrentOperationCount = 1
    let delegate = DataDelegate(queue: queue)
    let task = session(delegate, queue: queue).dataTask(with: server.url("report.json"))
    #expect(task.state == .suspended)
    task.resume()
    #expect(await delegate.waitForCompletion())
    #expect(delegate.calls.withLock { $0 } == ["response", "data", "complete"])
    #expect(delegate.body.withLock { $0 } == Data(body))
    #expect(delegate.error.withLock { $0 } == nil)
    #expect(delegate.onMainQueue.withLock { $0 } == [true, true])
    let response = try #require(delegate.response.withLock { $0 })
    #expect(response.statusCode == 200)
    #expect(response.value(forHTTPHeaderField: "etag") == "\"e1\"")
    #expect(response.expectedContentLength == Int64(body.count))
    #expect(response.url == server.url("report.json"))
    #expect(task.state == .completed)
    #expect((task.response as? HTTPURLResponse)?.statusCode == 200)
    #expect(task.countOfBytesReceived == Int64(body.count))
    #expect(task.taskIdentifier < 0)
  }

  @Test func aCompletionHandlerGetsTheBodyTheResponseAndNoErrorForAnyStatus() async throws {
    let server = try FaultServer(body: Array("hello".utf8))
    defer { server.stop() }
    let delegate = DataDelegate(queue: OperationQueue())
    let session = session(delegate)
    let (data, response, error) = await completed { handler in
      session.dataTask(with: server.url(), completionHandler: handler)
    }
    #expect(data == Data("hello".utf8))
    #expect(response?.statusCode == 200 && error == nil)
    // The delegate is told nothing of a task that has a completion handler.
    #expect(delegate.calls.withLock { $0 }.isEmpty)
    // A 404 is the server's answer, not a failure of the task.
    server.setMode(.alwaysStatus(404))
    let (_, missing, noError) = await completed { handler in
      session.dataTask(with: URLRequest(url: server.url("gone")), completionHandler: handler)
    }
    #expect(missing?.statusCode == 404 && noError == nil)
  }

  @Test func aRedirectIsFollowedAndTheResponseNamesWhereItEnded() async throws {
    let target = try FaultServer(body: Array("moved here".utf8))
    defer { target.stop() }
    let server = try FaultServer(body: [], mode: .redirect(to: target.url("new").absoluteString))
    defer { server.stop() }
    let (data, response, error) = await completed { handler in
      session(nil).dataTask(with: server.url("old"), completionHandler: handler)
    }
    #expect(error == nil && data == Data("moved here".utf8))
    #expect(response?.url == target.url("new"))
  }

  @Test func aPOSTSendsItsMethodHeadersAndBody() async throws {
    let server = try UploadServer()
    defer { server.stop() }
    var request = URLRequest(url: server.url("items"))
    request.httpMethod = "POST"
    request.setValue("application/json", forHTTPHeaderField: "Content-Type")
    request.setValue("yes", forHTTPHeaderField: "X-Ported")
    request.httpBody = Data(repeating: 0x41, count: 5000)
    let (data, response, error) = await completed { handler in
      session(nil).dataTask(with: request, completionHandler: handler)
    }
    #expect(error == nil && response?.statusCode == 200)
    let reply = try #require(try JSONSerialization.jsonObject(with: data ?? Data()) as? [String: Any])
    #expect(reply["received"] as? Int == 5000 && reply["method"] as? String == "POST", "\(reply)")
    let recorded = try #require(server.requests.last)
    #expect(recorded.headers["x-ported"] == "yes" && recorded.headers["content-type"] == "application/json")
  }

  @Test func failuresAreFoundationsErrorCodes() async throws {
    // Nothing listens on the discard port.
    let (_, _, refused) = await completed { handler in
      session(nil).dataTask(with: URL(string: "http://127.0.0.1:9/x")!, completionHandler: handler)
    }
    #expect(
      refused?.domain == NSURLErrorDomain && refused?.code == NSURLErrorCannotConnectToHost,
      "\(String(describing: refused))")
    let silent = try FaultServer(body: [], mode: .neverAnswer)
    defer { silent.stop() }
    let (_, _, timedOut) = await completed { handler in
      session(nil).dataTask(with: URLRequest(url: silent.url(), timeoutInterval: 1), completionHandler: handler)
    }
    #expect(timedOut?.code == NSURLErrorTimedOut, "\(String(describing: timedOut))")
    let (_, _, unsupported) = await completed { handler in
      session(nil).dataTask(with: URL(string: "ftp://127.0.0.1/x")!, completionHandler: handler)
    }
    #expect(unsupported?.code == NSURLErrorUnsupportedURL, "\(String(describing: unsupported))")
  }

  /// A cancel ends the task at once with `NSURLErrorCancelled`, however long the server would take;
  /// so does a delegate that answers the response with `.cancel`, before any of the body.
  @Test func aCancelEndsTheTaskAtOnce() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(1 << 20), mode: .stallAfter(bytes: 1000))
    defer { server.stop() }
    let delegate = DataDelegate(queue: OperationQueue())
    let task = session(delegate).dataTask(with: server.url())
    task.resume()
    _ = await offPool {
      let deadline = Date() + 10
      while delegate.calls.withLock({ !$0.contains("data") }), Date() < deadline { usleep(5_000) }
    }
    task.cancel()
    // The server holds the connection without a byte more, and the request would time out only
    // after 60 s: the completion, within the 20 s waited for, is the cancel's. (No bound on the
    // time itself: a loaded machine was seen to take 9 s to run the delegate's queue.)
    #expect(await delegate.waitForCompletion())
    #expect(delegate.error.withLock { $0 }?.code == NSURLErrorCancelled)
    let refusing = DataDelegate(disposition: .cancel, queue: OperationQueue())
    server.setMode(.normal)
    session(refusing).dataTask(with: server.url()).resume()
    #expect(await refusing.waitForCompletion())
    #expect(refusing.calls.withLock { $0 } == ["response", "complete"])
    #expect(refusing.error.withLock { $0 }?.code == NSURLErrorCancelled)
  }

  /// A session opens at most `httpMaximumConnectionsPerHost` connections to one host: further
  /// tasks to it wait, in order, for a running one to end, while tasks to other hosts go on; a
  /// waiting task that is cancelled ends at once and never reaches the server.
  @Test func tasksPastTheConnectionsPerHostWaitForARunningOneToEnd() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { server.stop() }
    let other = try FaultServer(body: Array("elsewhere".utf8))
    defer { other.stop() }
    let configuration = URLSessionConfiguration.default
    configuration.httpMaximumConnectionsPerHost = 1
    let session = URLSession(
      configuration: configuration, delegate: nil, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.hosts.\(UUID())"))
    let finished = Mutex<[String: NSError?]>([:])
    let done = DispatchSemaphore(value: 0)
    func task(_ name: String, _ url: URL) -> URLSessionDataTask {
      session.dataTask(with: url) { data, _, error in
        finished.withLock { _ = $0.updateValue(error.map { $0 as NSError }, forKey: name) }
        done.signal()
      }
    }
    let first = task("first", server.url("first"))
    let second = task("second", server.url("second"))
    let third = task("third", server.url("third"))
    first.resume()
    _ = await offPool {
      let deadline = Date() + 10
      while server.requests.isEmpty, Date() < deadline { usleep(5_000) }
    }
    second.resume()
    third.resume()
    // A task to another host is not held back, and by the time it ends the second task would
    // have reached the server had it not waited.
    task("other", other.url()).resume()
    #expect(await offPool { done.wait(timeout: .now() + 20) } == .success)
    third.cancel()
    #expect(await offPool { done.wait(timeout: .now() + 5) } == .success)
    #expect(finished.withLock { $0["other"] } == .some(nil))
    #expect(finished.withLock { $0["third"] }??.code == NSURLErrorCancelled)
    #expect(server.requests.map(\.path) == ["/first"])
    #expect(second.state == .running)
    server.openGate()
    for _ in 0..<2 { #expect(await offPool { done.wait(timeout: .now() + 20) } == .success) }
    #expect(finished.withLock { $0["first"] } == .some(nil) && finished.withLock { $0["second"] } == .some(nil))
    #expect(server.requests.map(\.path) == ["/first", "/second"])
  }

  @Test func awaitedDataAndItsURLErrors() async throws {
    let server = try FaultServer(body: Array("{\"ok\":true}".utf8))
    defer { server.stop() }
    let (data, response) = try await session(nil).data(from: server.url())
    #expect(data == Data("{\"ok\":true}".utf8))
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    do {
      _ = try await session(nil).data(for: URLRequest(url: URL(string: "http://127.0.0.1:9/x")!))
      Issue.record("a refused connection returned")
    } catch let error as URLError {
      #expect(error.code == .cannotConnectToHost)
    }
    // Cancelling the awaiting Swift task cancels the data task.
    let silent = try FaultServer(body: [], mode: .neverAnswer)
    defer { silent.stop() }
    let session = session(nil)
    let awaiting = Task { try await session.data(from: silent.url()) }
    try await Task.sleep(for: .milliseconds(200))
    awaiting.cancel()
    do {
      _ = try await awaiting.value
      Issue.record("a cancelled request returned")
    } catch let error as URLError {
      #expect(error.code == .cancelled)
    }
  }

  @Test func theSharedSessionRunsDataTasksAndListsThemWhileTheyRun() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { server.stop() }
    #expect(URLSession.shared === URLSession.shared)
    let done = DispatchSemaphore(value: 0)
    let task = URLSession.shared.dataTask(with: server.url()) { data, _, error in
      #expect(error == nil && data?.count == 100_000)
      done.signal()
    }
    task.resume()
    let listed = await URLSession.shared.allTasks
    #expect(listed.contains { $0 === task })
    let (running, _, _) = await URLSession.shared.tasks
    #expect(running.contains { $0 === task })
    server.openGate()
    #expect(await offPool { done.wait(timeout: .now() + 20) } == .success)
    // The shared session is the whole process's: only this test's own task is looked for.
    #expect(!(await URLSession.shared.allTasks).contains { $0 === task })
  }

  /// A task is off the session's lists when its completion comes, as Apple's lists hold no task
  /// that completed: a completion handler and `didCompleteWithError` that ask for the session's
  /// tasks (to tell whether theirs was the last) do not find their own.
  @Test func aTaskHasLeftTheSessionsListsWhenItsCompletionComes() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(10_000))
    defer { server.stop() }
    let session = session(nil)
    let listedInHandler = Mutex<[URLSessionTask]?>(nil)
    let done = DispatchSemaphore(value: 0)
    let task = session.dataTask(with: server.url()) { data, _, error in
      #expect(error == nil && data?.count == 10_000)
      // Asked from inside the handler: the list is taken now, while the handler runs.
      session.getAllTasks { tasks in
        listedInHandler.withLock { $0 = tasks }
        done.signal()
      }
    }
    task.resume()
    #expect(await offPool { done.wait(timeout: .now() + 20) } == .success)
    let listed = try #require(listedInHandler.withLock { $0 })
    #expect(!listed.contains { $0 === task }, "\(listed)")
    #expect(task.state == .completed)

    let delegate = RecordingDelegate()
    let delegated = URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.listed.\(UUID())"))
    let listedInDelegate = Mutex<Bool?>(nil)
    let heard = DispatchSemaphore(value: 0)
    delegate.onComplete = { task in
      delegated.getAllTasks { tasks in
        listedInDelegate.withLock { $0 = tasks.contains { $0 === task } }
        heard.signal()
      }
    }
    delegated.dataTask(with: server.url()).resume()
    #expect(await offPool { heard.wait(timeout: .now() + 20) } == .success)
    #expect(listedInDelegate.withLock { $0 } == false)
  }

  @Test func theTaskHintsAndTheRequestsCachePolicyAreKept() {
    let task = session(nil).dataTask(with: URL(string: "http://127.0.0.1:9/x")!)
    #expect(task.priority == URLSessionTask.defaultPriority)
    task.priority = URLSessionTask.highPriority
    #expect(task.priority == 0.75)
    task.priority = 7
    #expect(task.priority == 1)
    #expect(task.countOfBytesClientExpectsToReceive == NSURLSessionTransferSizeUnknown)
    task.countOfBytesClientExpectsToSend = 80
    #expect(task.countOfBytesClientExpectsToSend == 80)
    let request = URLRequest(url: URL(string: "http://127.0.0.1:9/x")!, cachePolicy: .reloadIgnoringLocalCacheData)
    #expect(request.cachePolicy == .reloadIgnoringCacheData)
    let response = HTTPURLResponse(
      url: URL(string: "http://a.test/x")!, statusCode: 200, httpVersion: nil,
      headerFields: ["Content-Type": "application/json; charset=UTF-8", "content-length": "42"])
    #expect(response?.mimeType == "application/json" && response?.textEncodingName == "utf-8")
    #expect(response?.expectedContentLength == 42)
    #expect(response?.value(forHTTPHeaderField: "CONTENT-TYPE") == "application/json; charset=UTF-8")
  }

  /// A download delegate that records the bytes written, the file handed over (its path and
  /// contents), each completion's error and the session's end.
  final class DownloadDelegate: NSObject, URLSessionDownloadDelegate, @unchecked Sendable {
    let written = Mutex<[Int64]>([])
    let file = Mutex<(String, Data?)?>(nil)
    let completed = Mutex<[NSError?]>([])
    let done = DispatchSemaphore(value: 0)
    let invalid = DispatchSemaphore(value: 0)

    func urlSession(
      _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
      totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
      written.withLock { $0.append(totalBytesWritten) }
    }

    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
      file.withLock { $0 = (location.path, try? Data(contentsOf: location)) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      completed.withLock { $0.append(error.map { $0 as NSError }) }
      done.signal()
    }

    func urlSession(_ session: URLSession, didBecomeInvalidWithError error: (any Error)?) { invalid.signal() }
  }

  /// A standard session with `delegate` (over a fake service: its downloads never use it).
  func standardSession(_ delegate: DownloadDelegate) -> URLSession {
    URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.download.\(UUID())"))
  }

  /// A download made with a completion handler, in a session nobody keeps (the session lives while
  /// its tasks do, as Foundation's): it runs in this process, as a standard session's does on iOS
  /// (the session service is never asked), the handler gets the file in the app's temporary
  /// directory, which exists while it runs, then the file goes; the delegate is told nothing.
  @Test func aConvenienceDownloadHandsItsFileToTheHandlerInASessionNobodyKeeps() async throws {
    let server = try FaultServer(body: Array("downloaded".utf8))
    defer { server.stop() }
    let backend = FakeSessionBackend(identifier: "fake.convenience.download")
    let seen = Mutex<(String?, String?, Bool)>((nil, nil, false))
    let done = DispatchSemaphore(value: 0)
    let delegate = DataDelegate(queue: OperationQueue())
    weak var released: URLSession?
    let task: URLSessionDownloadTask = {
      let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil, backend: backend)
      released = session
      return session.downloadTask(with: server.url("a.bin")) { file, response, error in
        let text = file.flatMap { try? String(contentsOf: $0, encoding: .utf8) }
        seen.withLock { $0 = (text, file?.path, error == nil && (response as? HTTPURLResponse)?.statusCode == 200) }
        done.signal()
      }
    }()
    task.resume()
    #expect(released != nil, "the session went before its task ended")
    #expect(await offPool { done.wait(timeout: .now() + 10) } == .success)
    let (text, path, succeeded) = seen.withLock { $0 }
    #expect(text == "downloaded" && succeeded)
    let location = try #require(path)
    #expect(location.hasPrefix(NSTemporaryDirectory()) || location.hasPrefix("/tmp/"), "\(location)")
    #expect(URL(fileURLWithPath: location).lastPathComponent.hasPrefix("CFNetworkDownload_"))
    #expect(await eventually { !Foundation.FileManager.default.fileExists(atPath: location) })
    #expect(task.taskIdentifier < 0 && task.countOfBytesReceived == 10)
    #expect(backend.store.withLock { $0.calls }.isEmpty, "the session service was asked")
    #expect(delegate.calls.withLock { $0 }.isEmpty)
  }

  /// A standard session's download tells its delegate of its bytes and hands it the file, which is
  /// gone once `didFinishDownloadingTo` returned, begins at once whatever its `earliestBeginDate`;
  /// a cancelled one ends with NSURLErrorCancelled and leaves no file.
  @Test func aStandardSessionsDownloadRunsHereWithItsProgressAndItsFile() async throws {
    let body = DownloadFixture.bytes(400_000)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let delegate = DownloadDelegate()
    let task = standardSession(delegate).downloadTask(with: server.url("report.bin"))
    // Nothing in a standard session, as Foundation's: the download begins now.
    task.earliestBeginDate = Date(timeIntervalSince1970: 2_000_000_000)
    task.resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    #expect(delegate.completed.withLock { $0 } == [nil])
    let (location, contents) = try #require(delegate.file.withLock { $0 })
    #expect(contents == Data(body))
    #expect(delegate.written.withLock { $0 }.last == Int64(body.count))
    #expect(task.countOfBytesExpectedToReceive == Int64(body.count))
    #expect(await eventually { !Foundation.FileManager.default.fileExists(atPath: location) })

    let gated = try FaultServer(body: body, mode: .gateAfter(bytes: 1000))
    defer { gated.stop() }
    let stopped = DownloadDelegate()
    let cancelled = standardSession(stopped).downloadTask(with: gated.url("slow.bin"))
    cancelled.resume()
    #expect(await eventually { stopped.written.withLock { $0 }.last == 1000 })
    // Its file, known by its 1,000 bytes: other tests' downloads share the process's tmp/.
    let temporary = NSTemporaryDirectory()
    let ours = ((try? Foundation.FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []).filter {
      $0.hasPrefix("CFNetworkDownload_")
        && (try? Foundation.FileManager.default.attributesOfItem(atPath: temporary + "/" + $0)[.size] as? Int) == 1000
    }
    #expect(!ours.isEmpty)
    cancelled.cancel()
    #expect(await offPool { stopped.done.wait(timeout: .now() + 20) } == .success)
    #expect(stopped.completed.withLock { $0.map { $0?.code } } == [NSURLErrorCancelled])
    #expect(stopped.file.withLock { $0 } == nil)
    #expect(ours.allSatisfy { !Foundation.FileManager.default.fileExists(atPath: temporary + "/" + $0) }, "\(ours)")
    gated.openGate()
  }

  /// A standard session's download runs in this process, and the session knows it as it knows its
  /// data tasks: `allTasks` lists it, `finishTasksAndInvalidate` waits for it (without, its
  /// completion was lost), and `invalidateAndCancel` cancels it.
  @Test func aStandardSessionsDownloadIsListedWaitedForAndCancelledWithItsSession() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { server.stop() }
    // Finishing waits for the download, which then completes.
    let finishing = DownloadDelegate()
    let waited = standardSession(finishing)
    let first = waited.downloadTask(with: server.url("first.bin"))
    first.resume()
    #expect(await waited.allTasks.contains { $0 === first })
    waited.finishTasksAndInvalidate()
    server.openGate()
    #expect(await offPool { finishing.done.wait(timeout: .now() + 20) } == .success)
    #expect(finishing.completed.withLock { $0 } == [nil])
    #expect(await offPool { finishing.invalid.wait(timeout: .now() + 20) } == .success)
    // Cancelling the session cancels the download, which completes with NSURLErrorCancelled.
    let gated = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { gated.stop() }
    let cancelling = DownloadDelegate()
    let cancelled = standardSession(cancelling)
    let second = cancelled.downloadTask(with: gated.url("second.bin"))
    second.resume()
    cancelled.invalidateAndCancel()
    #expect(await offPool { cancelling.invalid.wait(timeout: .now() + 20) } == .success)
    #expect(second.state == .completed)
    #expect(cancelling.completed.withLock { $0.map { $0?.code } } == [NSURLErrorCancelled])
    gated.openGate()
  }

  /// A standard session's download cancelled for resume data keeps its file in the app's `tmp/`
  /// and hands out Apple-shaped resume data (also in the cancellation's error); a task made from it
  /// continues the file with `Range` and `If-Range` (`didResumeAtOffset` first), or, when the
  /// entity changed meanwhile, starts over from 0. A broken connection leaves resume data in the
  /// error too.
  @Test func aStandardDownloadContinuesFromItsResumeDataInTheApp() async throws {
    let body = DownloadFixture.bytes(100_000)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: 40_000))
    defer { server.stop() }
    let delegate = RecordingDelegate()
    let kept = Mutex<[Data]>([])
    delegate.onFinish = { url in kept.withLock { $0.append((try? Data(contentsOf: url)) ?? Data()) } }
    let session = URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.resume.\(UUID())"))
    let first = session.downloadTask(with: server.url("big.bin"))
    first.resume()
    _ = await delegate.waitFor("write \(first.taskIdentifier) 40000/100000")
    let produced = await withCheckedContinuation { done in
      first.cancel(byProducingResumeData: { done.resume(returning: $0) })
    }
    let data = try #require(produced, "\(delegate.log.withLock { $0 })")
    server.setMode(.normal)
    server.openGate()
    _ = await delegate.waitFor("complete \(first.taskIdentifier) \(NSURLErrorCancelled)")
    #expect(
      delegate.errors.withLock { $0[first.taskIdentifier] }?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data
        == data)
    // Apple's format since iOS 12: a keyed archive of a dictionary, read as download managers do.
    let plist = try #require(
      try NSKeyedUnarchiver.unarchivedObject(
        ofClasses: [NSDictionary.self, NSString.self, NSNumber.self, NSData.self], from: data) as? [String: Any])
    #expect(plist["NSURLSessionDownloadURL"] as? String == server.url("big.bin").absoluteString)
    #expect(plist["NSURLSessionResumeBytesReceived"] as? Int == 40_000)
    #expect(plist["NSURLSessionResumeEntityTag"] as? String == "\"v1\"")
    let name = try #require(plist["NSURLSessionResumeInfoTempFileName"] as? String)
    let partial = NSTemporaryDirectory() + "/" + name
    #expect(FileManager.default.contents(atPath: partial) == Data(body.prefix(40_000)))

    let again = session.downloadTask(withResumeData: data)
    #expect(again.originalRequest?.url == server.url("big.bin"))
    again.resume()
    let log = await delegate.waitFor("complete \(again.taskIdentifier) ok")
    let own = log.filter { $0.contains(" \(again.taskIdentifier) ") }
    #expect(own.first == "resumeAt \(again.taskIdentifier) 40000", "\(log)")
    #expect(own.contains("write \(again.taskIdentifier) 100000/100000"), "\(log)")
    #expect(kept.withLock { $0 } == [Data(body)])
    let continued = try #require(server.requests.last)
    #expect(continued.headers["range"] == "bytes=40000-" && continued.headers["if-range"] == "\"v1\"")
    #expect(await eventually { !FileManager.default.fileExists(atPath: partial) })

    // The entity changed since: If-Range fails, the server sends it whole, the task starts over.
    let changing = try FaultServer(body: body, mode: .gateAfter(bytes: 30_000))
    defer { changing.stop() }
    let second = session.downloadTask(with: changing.url("big.bin"))
    second.resume()
    _ = await delegate.waitFor("write \(second.taskIdentifier) 30000/100000")
    let stale = await withCheckedContinuation { done in
      second.cancel(byProducingResumeData: { done.resume(returning: $0) })
    }
    let newer = DownloadFixture.bytes(60_000).reversed() as [UInt8]
    changing.setContent(newer, entityTag: "\"v2\"")
    changing.setMode(.normal)
    changing.openGate()
    let over = session.downloadTask(withResumeData: try #require(stale))
    over.resume()
    let overLog = await delegate.waitFor("complete \(over.taskIdentifier) ok")
    #expect(overLog.contains("resumeAt \(over.taskIdentifier) 0"), "\(overLog)")
    #expect(kept.withLock { $0.last } == Data(newer))

    // A connection broken mid-body: the error carries resume data, which continues the file.
    let dropping = try FaultServer(body: body, mode: .dropMidBody(after: 25_000, times: 1))
    defer { dropping.stop() }
    let third = session.downloadTask(with: dropping.url("big.bin"))
    third.resume()
    let broken = await delegate.waitFor("complete \(third.taskIdentifier) \(NSURLErrorNetworkConnectionLost)")
    let error = try #require(delegate.errors.withLock { $0[third.taskIdentifier] }, "\(broken)")
    let fromError = try #require(error.userInfo[NSURLSessionDownloadTaskResumeData] as? Data)
    let last = session.downloadTask(withResumeData: fromError)
    last.resume()
    let lastLog = await delegate.waitFor("complete \(last.taskIdentifier) ok")
    #expect(lastLog.contains("resumeAt \(last.taskIdentifier) 25000"), "\(lastLog)")
    #expect(kept.withLock { $0.last } == Data(body))
    session.finishTasksAndInvalidate()
  }

  /// A delegate that answers the response `.becomeDownload` and records what follows.
  final class BecomingDelegate: NSObject, URLSessionDataDelegate, URLSessionDownloadDelegate, @unchecked Sendable {
    let calls = Mutex<[String]>([])
    let became = Mutex<URLSessionDownloadTask?>(nil)
    let completedTask = Mutex<URLSessionTask?>(nil)
    let file = Mutex<Data?>(nil)
    let done = DispatchSemaphore(value: 0)

    func urlSession(
      _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
      completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void
    ) {
      calls.withLock { $0.append("response") }
      completionHandler(.becomeDownload)
    }
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
      calls.withLock { $0.append("data") }
    }
    func urlSession(
      _ session: URLSession, dataTask: URLSessionDataTask, didBecome downloadTask: URLSessionDownloadTask
    ) {
      calls.withLock { $0.append("became") }
      became.withLock { $0 = downloadTask }
    }
    func urlSession(
      _ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
      totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64
    ) {
      if calls.withLock({ $0.last }) != "write" { calls.withLock { $0.append("write") } }
    }
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
      calls.withLock { $0.append("finish") }
      file.withLock { $0 = try? Data(contentsOf: location) }
    }
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      calls.withLock { $0.append(error == nil ? "complete" : "failed") }
      completedTask.withLock { $0 = task }
      done.signal()
    }
  }

  /// A data task whose delegate answers its response `.becomeDownload` becomes a download task, as
  /// on iOS: `didBecome downloadTask:`, then the body goes to a file (`didWriteData`,
  /// `didFinishDownloadingTo`) and the download task completes; the data task hears no more.
  @Test func aDataTaskBecomesADownload() async throws {
    let body = DownloadFixture.bytes(200_000)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let delegate = BecomingDelegate()
    let session = URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.become.\(UUID())"))
    let task = session.dataTask(with: server.url("big.bin"))
    task.resume()
    #expect(await offPool { delegate.done.wait(timeout: .now() + 20) } == .success)
    #expect(delegate.calls.withLock { $0 } == ["response", "became", "write", "finish", "complete"])
    let download = try #require(delegate.became.withLock { $0 })
    #expect(delegate.completedTask.withLock { $0 } === download)
    #expect(download.taskIdentifier != task.taskIdentifier && download.state == .completed)
    #expect(download.countOfBytesReceived == 200_000 && download.countOfBytesExpectedToReceive == 200_000)
    #expect(delegate.file.withLock { $0 } == Data(body))
    #expect(task.state == .completed)
    // The download left the session's list before its completion call.
    #expect(await session.allTasks.isEmpty)
  }

  /// `invalidateAndCancel` ends each task of the app's own (running, waiting for its response's
  /// answer, or never resumed) with `didCompleteWithError(NSURLErrorCancelled)`, and only then
  /// the session with `didBecomeInvalidWithError`, as on iOS; nothing else comes after.
  @Test func invalidateAndCancelCompletesEveryTaskCancelledBeforeTheSessionEnds() async throws {
    let server = try FaultServer(body: DownloadFixture.bytes(100_000), mode: .gateAfter(bytes: 1000))
    defer { server.stop() }
    let delegate = RecordingDelegate()
    let session = URLSession(
      configuration: .default, delegate: delegate, delegateQueue: nil,
      backend: FakeSessionBackend(identifier: "fake.cancel.all.\(UUID())"))
    let download = session.downloadTask(with: server.url("download.bin"))
    let data = session.dataTask(with: server.url("data.bin"))
    let idle = session.dataTask(with: server.url("idle.bin"))
    download.resume()
    data.resume()
    session.invalidateAndCancel()
    let log = await delegate.waitFor("invalid").filter { $0.hasPrefix("complete") || $0 == "invalid" }
    server.openGate()
    let ids = [download, data, idle].map(\.taskIdentifier)
    #expect(Set(log.dropLast()) == Set(ids.map { "complete \($0) \(NSURLErrorCancelled)" }), "\(log)")
    #expect(log.last == "invalid", "\(log)")
    #expect([download, data, idle].allSatisfy { $0.state == .completed })
  }

  /// Whether `condition` holds within 10 s (checked every 10 ms, off the pool): for what has no
  /// signal of its own, such as a file the session deletes after a delegate call returned.
  func eventually(_ condition: @escaping @Sendable () -> Bool) async -> Bool {
    await offPool {
      let deadline = Date() + 10
      while !condition() {
        if Date() > deadline { return false }
        usleep(10_000)
      }
      return true
    }
  }

  /// iOS raises an NSGenericException for a task made with a completion handler (or awaited) in
  /// a background session, which ends the app: so does ProtFSKit, with Apple's words.
  @Test func aBackgroundSessionRefusesCompletionHandlersAsIOSDoes() async {
    let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
      let session = URLSession(
        configuration: .background(withIdentifier: "fake.convenience"), delegate: nil, delegateQueue: nil,
        backend: FakeSessionBackend(identifier: "fake.convenience"))
      _ = session.dataTask(with: URL(string: "http://127.0.0.1:9/x")!) { _, _, _ in }
    }
    let output = result.map { String(decoding: $0.standardErrorContent, as: UTF8.self) } ?? ""
    #expect(
      output.contains(
        "Terminating app due to uncaught exception 'NSGenericException', reason: 'Completion handler blocks are not supported in background sessions. Use a delegate instead.'"
      ), "\(output)")
  }
}
