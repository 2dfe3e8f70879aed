import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// How a session makes, tracks and ends its tasks: those the service runs, those of this process,
/// and those that fail without reaching the service.
extension URLSession {
  /// The body streams of task `id`: `first` (a request's own) the first time, then those the
  /// delegate's `needNewBodyStream` hands over, asked on the delegate queue in order with the
  /// task's other calls.
  func bodyStreams(task id: Int, first: InputStream?) -> BodyStreamProvider {
    let own = Mutex<BodyStream?>(first.map(BodyStream.init))
    return { [weak self] answer in
      if let stream = own.withLock({ own in
        defer { own = nil }; return own
      }) {
        return answer(stream)
      }
      guard let self, let task = self.state.withLock({ $0.tasks[id] }),
        let delegate = self.taskDelegate(task) as? URLSessionTaskDelegate
      else { return answer(nil) }
      self.pipeline.async {
        self.onDelegateQueue {
          delegate.urlSession(self, task: task) { stream in answer(stream.map(BodyStream.init)) }
        }
      }
    }
  }

  /// A task run in this process, `make` given its id (below zero, the session's own), kept by the
  /// session until it completes. Asked of an invalidated session it ends the process, as on iOS.
  func inProcessTask<Made: URLSessionTask>(_ make: (Int) -> Made) -> Made {
    if state.withLock({ $0.invalidated }) {
      UncaughtException.raise("NSGenericException", reason: Self.invalidatedRefusal)
    }
    return state.withLock { state in
      let task = make(state.takeLocalID())
      state.tasks[task.taskIdentifier] = task
      state.keep(self)
      return task
    }
  }

  /// `request` with the configuration's additional headers and the cookies kept for its URL.
  func prepared(_ request: URLRequest) -> SessionRequest {
    var request = request
    for (name, value) in configuration.httpAdditionalHeaders ?? [:] {
      if let name = name as? String, request.value(forHTTPHeaderField: name) == nil {
        request.setValue("\(value)", forHTTPHeaderField: name)
      }
    }
    if let cookies = cookieField(for: request) { request.setValue(cookies, forHTTPHeaderField: "Cookie") }
    return request.sessionRequest
  }

  /// Apple's message for a task created after the session was invalidated.
  static let invalidatedRefusal = "Task created in a session that has been invalidated"

  /// A task the backend creates with `create`, or one that fails when resumed if it refuses.
  ///
  /// A task asked of an invalidated session ends the process, as on iOS, where `URLSession` raises
  /// an `NSGenericException` nothing catches: the bug shows here as it would on the phone.
  func makeTask(
    _ request: URLRequest?, kind: SessionTaskSnapshot.Kind = .download,
    _ create: (any SessionBackend) throws(ProtFSError) -> SessionTaskSnapshot
  ) -> URLSessionTask {
    if state.withLock({ $0.invalidated }) {
      UncaughtException.raise("NSGenericException", reason: Self.invalidatedRefusal)
    }
    switch openedBackend() {
    case .failure(let error): return failedTask(request, kind, error)
    case .success(let backend):
      do {
        return task(for: try create(backend))
      } catch {
        return failedTask(request, kind, error)
      }
    }
  }

  /// A task that never reached the service: resuming it completes it with `error`.
  func failedTask(_ request: URLRequest?, _ kind: SessionTaskSnapshot.Kind, _ error: ProtFSError) -> URLSessionTask {
    let id = state.withLock { $0.takeLocalID() }
    return kind.makeTask(id: id, request: request, backend: nil, creationError: error, fail: failing)
  }

  /// What completes a task of this session with an error at once.
  private var failing: @Sendable (URLSessionTask, ProtFSError) -> Void {
    { [weak self] task, error in self?.failLocally(task, error) }
  }

  /// The task object for `snapshot`, made the first time it is seen.
  func task(for snapshot: SessionTaskSnapshot) -> URLSessionTask {
    let id = Int(snapshot.id)
    let task = state.withLock { state in
      if let existing = state.tasks[id] { return existing }
      let made = snapshot.kind.makeTask(
        id: id, request: URLRequest(snapshot.request), backend: backend, fail: failing)
      made.delaysBegin.store(configuration.isBackground, ordering: .relaxed)
      state.tasks[id] = made
      state.keep(self)
      return made
    }
    task.update(snapshot)
    return task
  }

  /// The service's list, as task objects (the same objects each time), then the tasks running in
  /// this process (data tasks, a standard session's downloads).
  func currentTasks() -> [URLSessionTask] {
    let (done, inProcess) = state.withLock { state in
      (
        state.completed,
        state.tasks.values.filter { $0 is any RunsInProcess && !state.completed.contains($0.taskIdentifier) }
          .sorted { $0.taskIdentifier > $1.taskIdentifier }
      )
    }
    guard let backend, let snapshots = try? backend.tasks() else { return inProcess }
    return snapshots.filter { !done.contains(Int($0.id)) }.map { task(for: $0) } + inProcess
  }

  /// A download of this process continuing resume data (task `id`) got its answer: the next
  /// `didWriteData` is preceded by `didResumeAtOffset(offset)` (0 when it starts over).
  func resumes(task id: Int, at offset: Int64) {
    state.withLock { $0.resumedAt[id] = offset }
  }

  /// The delegate that gets `task`'s calls: its own, else the session's.
  func taskDelegate(_ task: URLSessionTask) -> (any URLSessionDelegate)? { task.delegate ?? delegate }

  /// Ends the session: it leaves the service (with `cancelling`, cancelling its unfinished tasks)
  /// and the delegate gets `didBecomeInvalidWithError(nil)`, then is released.
  func end(cancelling: Bool) {
    let (first, woken) = state.withLock { state in
      defer {
        state.invalidated = true
        state.ended = true
        state.woken = false
      }
      return (!state.ended, state.woken)
    }
    guard first else { return }
    BackgroundSessionEvents.unregister(self, woken: woken)
    if cancelling {
      // Their completions come through the pipeline ahead of `didBecomeInvalidWithError`, queued
      // below: each transfer reports its end as it is cancelled.
      let running = state.withLock { state in
        let running = state.tasks.values.filter { $0 is any RunsInProcess && $0.state != .completed }
        state.cancelledByEnd = Set(running.map(\.taskIdentifier))
        return running
      }
      for task in running { task.cancel() }
    }
    backend?.invalidate(cancelling: cancelling)
    pipeline.async {
      self.onDelegateQueue {
        self.delegate?.urlSession(self, didBecomeInvalidWithError: nil)
        self.state.withLock { $0.delegate = nil }
      }
    }
  }

  /// Runs `body` on the delegate queue and waits for it (from the pipeline only).
  func onDelegateQueue(_ body: @escaping @Sendable () -> Void) {
    if OperationQueue.current === delegateQueue {
      body()
    } else {
      delegateQueue.addOperations([BlockOperation(block: body)], waitUntilFinished: true)
    }
  }
}
