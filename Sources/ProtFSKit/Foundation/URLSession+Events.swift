import Foundation
import ProtFSSessions
import ProtFSSystem
import Synchronization

extension URLSession {
  /// Takes an event from the service (any thread) and queues its delegate call.
  func receive(_ event: SessionEvent) {
    pipeline.async { self.deliver(event) }
  }

  /// Makes the delegate call for `event` on the delegate queue. A finished download's file is
  /// acknowledged as soon as `didFinishDownloadingTo` returned (what the delegate left there is
  /// deleted), and every task's completion once `didCompleteWithError` returned: an app that dies
  /// between the two gets the completion again, without the file, when it makes its session again.
  func deliver(_ event: SessionEvent) {
    // An ended session takes nothing more: its successor gets the calls, and the wake. A data
    // task of its own that waits for an answer to its response is cancelled instead. A task of this
    // process that the end cancelled still gets its completion, the last call before the session's.
    let endsCancelled = state.withLock { state -> Bool? in
      guard state.ended else { return nil }
      guard case .completed(let id, _, _) = event else { return false }
      return state.cancelledByEnd.remove(Int(id)) != nil
    }
    if let endsCancelled, !endsCancelled {
      if case .receivedResponse(let id, _, _, _) = event { state.withLock { $0.tasks[Int(id)] }?.cancel() }
      return
    }
    if case .queuedEventsDelivered = event {
      let finishing = state.withLock { state -> Bool in
        state.queuedDelivered = true
        defer { state.woken = false }
        return state.woken
      }
      if finishing { finishEvents() }
      return
    }
    guard let id = event.taskID.map(Int.init), !state.withLock({ $0.completed.contains(id) }) else { return }
    let task = knownTask(id, event)
    // A convenience download's file waits for its completion handler, which comes last.
    let handlerTakesFile = task.completion.withLock { $0 } != nil
    // A task leaves the session's lists before its completion call, not after it returns: Apple's
    // `getTasksWithCompletionHandler` lists no task "invalidated after completing", and a handler
    // that asks for the session's tasks (to tell whether it was the last) must not find itself.
    if case .completed = event { state.withLock { _ = $0.completed.insert(id) } }
    onDelegateQueue { self.call(event, task) }
    switch event {
    case .finishedDownloading(_, let location) where !handlerTakesFile:
      fileHandled(id, at: location)
    case .completed:
      if let location = task.lock.withLock({ $0.location }) { fileHandled(id, at: location) }
      let finished = state.withLock { state -> Bool in
        state.tasks[id] = nil
        state.keep(self)
        state.acknowledged.remove(id)
        guard state.outstanding != nil else { return false }
        state.outstanding?.remove(id)
        return state.outstanding?.isEmpty == true
      }
      // A data task's (below zero) ran here: the service never had it.
      if id > 0 { try? backend?.acknowledge(Int64(id)) }
      // `finishTasksAndInvalidate`: the last outstanding task made its last delegate call.
      if finished { end(cancelling: false) }
    default:
      break
    }
  }

  /// A download's file at `location` was handed to the app, which had to move it before the call
  /// returned (Apple): what is left there is deleted now (the name itself, never what a link there
  /// points to), and the file acknowledged.
  private func fileHandled(_ id: Int, at location: String) {
    _ = Kernel.unlink(location)
    let first = state.withLock { $0.acknowledged.insert(id).inserted }
    // A task below zero ran in this process: the service never had it.
    if first, id > 0 { try? backend?.acknowledgeFile(Int64(id)) }
  }

  /// `urlSessionDidFinishEvents`, on the delegate queue, after what is queued.
  func finishEvents() {
    onDelegateQueue { self.delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: self) }
  }

  /// The app was woken for this session's events: once what the service queued was delivered,
  /// `urlSessionDidFinishEvents` follows. A session subscribed before (the app was suspended, not
  /// relaunched) may not have read yet what the service sent while it was frozen: it asks for a
  /// new mark, which comes after all of it, and finishes then.
  ///
  /// Taken in the pipeline's order, after every event read before it: a mark read earlier ends
  /// nothing.
  func wokenForEvents() {
    pipeline.async {
      let subscribedBefore = self.state.withLock { state -> Bool? in
        guard !state.ended else { return nil }
        state.woken = true
        defer { state.queuedDelivered = false }
        return state.queuedDelivered
      }
      guard subscribedBefore == true else { return }
      let backend = self.backend
      DispatchQueue.global().async {
        // The service gone, the events end with what was read.
        if (try? backend?.markDelivered()) == nil { self.receive(.queuedEventsDelivered) }
      }
    }
  }

  /// The task `id` (a replayed event's task may be new to this object: it is looked up).
  private func knownTask(_ id: Int, _ event: SessionEvent) -> URLSessionTask {
    if let known = state.withLock({ $0.tasks[id] }) { return known }
    if case .completed(_, let snapshot, _) = event { return task(for: snapshot) }
    if let snapshot = ((try? backend?.tasks()) ?? []).first(where: { $0.id == Int64(id) }) {
      return task(for: snapshot)
    }
    let kind: SessionTaskSnapshot.Kind
    switch event {
    case .receivedData, .sentBodyData: kind = .upload
    default: kind = .download
    }
    return task(
      for: SessionTaskSnapshot(
        id: Int64(id), kind: kind, request: SessionRequest(url: URL(fileURLWithPath: "/")), state: "running"))
  }

  /// The delegate call for `event` (on the delegate queue), or for a convenience task what its
  /// completion handler is given, at its end.
  private func call(_ event: SessionEvent, _ task: URLSessionTask) {
    let delegate = taskDelegate(task)
    let completion = task.completion.withLock { $0 }
    switch event {
    case .wroteData(_, let written, let total, let expected):
      wroteData(task, delegate, written: written, total: total, expected: expected)
    case .sentBodyData(_, let sent, let total, let expected):
      sentBodyData(task, delegate, sent: sent, total: total, expected: expected)
    case .finishedDownloading(_, let location):
      finishedDownloading(task, delegate, completion, at: location)
    case .receivedResponse(_, let url, let status, let headers):
      receivedResponse(task, delegate, completion, url: url, status: status, headers: headers)
    case .receivedData(_, let status, let body):
      receivedData(task, delegate, completion, status: status, body: body)
    case .completed(_, let snapshot, let failure):
      completed(task, delegate, completion, snapshot: snapshot, failure: failure)
    case .queuedEventsDelivered:
      return
    }
  }

  /// Progress of a download: `didResumeAtOffset` first after resume data, then `didWriteData`.
  private func wroteData(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, written: Int64, total: Int64, expected: Int64
  ) {
    task.change { values in
      values.received = total
      values.expectedToReceive = expected
      values.state = .running
    }
    task.refreshProgress()
    guard let download = task as? URLSessionDownloadTask, let delegate = delegate as? URLSessionDownloadDelegate
    else { return }
    if let offset = state.withLock({ $0.resumedAt.removeValue(forKey: task.taskIdentifier) }) {
      delegate.urlSession(self, downloadTask: download, didResumeAtOffset: offset, expectedTotalBytes: expected)
    }
    delegate.urlSession(
      self, downloadTask: download, didWriteData: written, totalBytesWritten: total,
      totalBytesExpectedToWrite: expected)
  }

  /// Progress of an upload's body: `didSendBodyData`.
  private func sentBodyData(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, sent: Int64, total: Int64, expected: Int64
  ) {
    task.change { values in
      values.sent = total
      values.expectedToSend = expected
      values.state = .running
    }
    task.refreshProgress()
    (delegate as? URLSessionTaskDelegate)?.urlSession(
      self, task: task, didSendBodyData: sent, totalBytesSent: total, totalBytesExpectedToSend: expected)
  }

  /// A download's file is there: `didFinishDownloadingTo`, or kept for the completion handler.
  private func finishedDownloading(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, _ completion: URLSessionTask.Completion?,
    at location: String
  ) {
    guard completion == nil else {
      task.lock.withLock { $0.location = location }
      return
    }
    guard let download = task as? URLSessionDownloadTask else { return }
    // A resumed download that ended before its first progress was sent still says where it
    // resumed, first, as on iOS.
    if let offset = state.withLock({ $0.resumedAt.removeValue(forKey: task.taskIdentifier) }) {
      (delegate as? URLSessionDownloadDelegate)?.urlSession(
        self, downloadTask: download, didResumeAtOffset: offset,
        expectedTotalBytes: task.countOfBytesExpectedToReceive)
    }
    (delegate as? URLSessionDownloadDelegate)?.urlSession(
      self, downloadTask: download, didFinishDownloadingTo: URL(fileURLWithPath: location))
  }

  /// The response arrived: the task keeps it, and the transfer goes on once the delegate (or a
  /// streamed task's reader) has it.
  private func receivedResponse(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, _ completion: URLSessionTask.Completion?,
    url: String, status: Int, headers: [SessionHeader]
  ) {
    let fields = HTTPURLResponse.fields(headers.map { ($0.name, $0.value) })
    let response = URL(string: url).flatMap {
      HTTPURLResponse(url: $0, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)
    }
    task.change { values in
      values.response = response
      // A data task's body length is the response's, when it says.
      if task is any AnswersItsResponse, let response, response.expectedContentLength >= 0 {
        values.expectedToReceive = response.expectedContentLength
      }
    }
    task.refreshProgress()
    // The transfer waits for the answer: the delegate's, or at once without one to ask.
    let transfer = (task as? any AnswersItsResponse)?.transfer
    if case .stream(let sink)? = completion, let response { sink.respond(response) }
    guard completion == nil, let response, let dataTask = task as? URLSessionDataTask,
      let delegate = delegate as? URLSessionDataDelegate
    else {
      transfer?.proceed()
      return
    }
    delegate.urlSession(self, dataTask: dataTask, didReceive: response) { disposition in
      switch disposition {
      case .cancel: dataTask.cancel()
      case .becomeDownload:
        if let task = dataTask as? InProcessDataTask {
          self.becomeDownload(task, response: response)
        } else {
          transfer?.proceed()
        }
      default: transfer?.proceed()
      }
    }
  }

  /// Part of the body arrived: for the delegate's `didReceive`, a stream, or a completion handler.
  private func receivedData(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, _ completion: URLSessionTask.Completion?,
    status: Int, body: Data
  ) {
    // An upload's reply carries its status; a data task's response came before its body.
    if status != 0, let url = task.originalRequest?.url {
      let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: nil)
      task.change { $0.response = response }
    }
    let streamed: ByteStreamSink? = if case .stream(let sink)? = completion { sink } else { nil }
    task.change { values in
      values.received += Int64(body.count)
      if completion != nil, streamed == nil { values.body.append(body) }
    }
    task.refreshProgress()
    streamed?.yield(body)
    guard completion == nil, task.state != .canceling, let dataTask = task as? URLSessionDataTask else { return }
    (delegate as? URLSessionDataDelegate)?.urlSession(self, dataTask: dataTask, didReceive: body)
  }

  /// The task ended: its values, metrics, then `didCompleteWithError` or the completion handler.
  private func completed(
    _ task: URLSessionTask, _ delegate: (any URLSessionDelegate)?, _ completion: URLSessionTask.Completion?,
    snapshot: SessionTaskSnapshot, failure: ProtFSError?
  ) {
    let error = failure.map { completionError($0, task, snapshot) }
    // One change: the task's observers hear of its error before its state, as on iOS.
    let (body, response, location) = task.change { values in
      URLSessionTask.take(snapshot, into: &values)
      values.state = .completed
      values.error = error
      values.completedAt = Date()
      return (values.body, values.response, values.location)
    }
    task.refreshProgress()
    (delegate as? URLSessionTaskDelegate)?.urlSession(self, task: task, didFinishCollecting: task.metrics())
    switch completion {
    case .data(let handler)?: handler(error == nil ? body : nil, response, error)
    case .download(let handler)?:
      handler(error == nil ? location.map(URL.init(fileURLWithPath:)) : nil, response, error)
    case .stream(let sink)?: sink.finish(error)
    case nil: (delegate as? URLSessionTaskDelegate)?.urlSession(self, task: task, didCompleteWithError: error)
    }
    task.delegate = nil
  }

  /// Turns data task `task` into a download (`.becomeDownload`), on the pipeline: the download task
  /// takes its place, its file is made in the app's `tmp/`, the delegate hears `didBecome
  /// downloadTask:`, and only then does the transfer go past its response.
  func becomeDownload(_ task: InProcessDataTask, response: HTTPURLResponse) {
    pipeline.async {
      let download = self.state.withLock { state in
        let made = InProcessBecameDownloadTask(
          id: state.takeLocalID(), request: task.originalRequest, run: task.run)
        state.tasks[task.taskIdentifier] = nil
        state.tasks[made.taskIdentifier] = made
        return made
      }
      let length = response.expectedContentLength
      download.change { values in
        values.response = response
        values.expectedToReceive = length
      }
      task.change { $0.state = .completed }
      let file = DownloadFile(directory: NSTemporaryDirectory())
      let failure: ProtFSError?
      do throws(ProtFSError) {
        try file.create(expecting: length >= 0 ? length : nil)
        failure = nil
      } catch {
        failure = error
      }
      task.becameDownload.become(download.taskIdentifier, writing: file, failure: failure)
      self.onDelegateQueue {
        (self.taskDelegate(task) as? URLSessionDataDelegate)?.urlSession(self, dataTask: task, didBecome: download)
      }
      // A file that could not be made ends the download with its error.
      if failure == nil { task.run.transfer.proceed() } else { task.run.transfer.cancel() }
    }
  }

  /// The `NSError` task completes with for `failure`: a resumable download carries its resume
  /// data (what `cancel(byProducingResumeData:)` handed out, else the service's), and a task the
  /// system cancelled its reason.
  private func completionError(_ failure: ProtFSError, _ task: URLSessionTask, _ snapshot: SessionTaskSnapshot)
    -> NSError
  {
    var resumeData: Data?
    if let download = task as? URLSessionDownloadTask, URLErrorMapping.isResumable(failure) {
      resumeData = download.resumeData.withLock { $0 } ?? snapshot.resumeData
      if resumeData == nil, task.taskIdentifier > 0 {
        // The task has failed already: a service that cannot hand its resume data leaves the
        // error without any, as Apple's does for a download that cannot be continued.
        resumeData = (try? backend?.cancel(Int64(task.taskIdentifier), producingResumeData: true)) ?? nil
      }
    }
    return URLErrorMapping.nsError(
      failure, url: task.originalRequest?.url, resumeData: resumeData, cancelledReason: snapshot.cancelledReason,
      reading: task is InProcessUploadTask)
  }

  /// Completes a task the service never had with `error` (on the delegate queue, in order).
  func failLocally(_ task: URLSessionTask, _ error: ProtFSError) {
    let first = task.change { values in
      defer { values.state = .completed }
      return values.state != .completed
    }
    guard first else { return }
    pipeline.async {
      let failure = URLErrorMapping.nsError(error, url: task.originalRequest?.url)
      task.change { $0.error = failure }
      self.onDelegateQueue {
        (self.taskDelegate(task) as? URLSessionTaskDelegate)?.urlSession(
          self, task: task, didCompleteWithError: failure)
      }
    }
  }
}
