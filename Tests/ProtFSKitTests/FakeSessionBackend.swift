import Foundation
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// An in-memory `SessionBackend`: tasks are records, events are what the test posts; calls are logged.
final class FakeSessionBackend: SessionBackend, @unchecked Sendable {
  /// The state the fake keeps.
  struct Store {
    var tasks: [SessionTaskSnapshot] = []
    var nextID: Int64 = 1
    var subscriber: (@Sendable (SessionEvent) -> Void)?
    var queued: [SessionEvent] = []
    /// Events written to the subscription that the app has not read yet (it was frozen): they
    /// reach it before the next `queuedEventsDelivered` mark.
    var unread: [SessionEvent] = []
    var calls: [String] = []
    var acknowledged: [Int64] = []
    /// The downloads whose file was acknowledged (`didFinishDownloadingTo` returned).
    var filesAcknowledged: [Int64] = []
    /// Every task created, kept after its acknowledgement (which takes it out of `tasks`).
    var created: [Int64: SessionTaskSnapshot] = [:]
    /// What `resume`, `suspend` and `cancel` throw when set (a service gone, or refusing).
    var refusal: ProtFSError?
  }

  let identifier: String
  let store = Mutex(Store())
  /// Signalled by each acknowledgement (the session makes it after the delegate's call returned).
  let acknowledgement = DispatchSemaphore(value: 0)

  init(identifier: String = "fake.session") { self.identifier = identifier }

  func createDownloadTask(_ request: SessionRequest, resumeData: Data?) throws(ProtFSError) -> SessionTaskSnapshot {
    store.withLock { store in
      var request = request
      var received: Int64 = 0
      if let resumeData, let text = String(data: resumeData, encoding: .utf8) {
        let parts = text.split(separator: " ")
        request.url = URL(string: String(parts[0]))!
        received = Int64(parts[1]) ?? 0
      }
      let task = SessionTaskSnapshot(
        id: store.nextID, kind: .download, request: request, state: "suspended", bytesReceived: received)
      store.nextID += 1
      store.tasks.append(task)
      store.created[task.id] = task
      store.calls.append("create \(task.id)")
      return task
    }
  }

  func createUploadTask(_ request: SessionRequest, fromFile path: String) throws(ProtFSError) -> SessionTaskSnapshot {
    if path.hasSuffix("locked") {
      throw ProtFSError(.protectedDataUnavailable, "The file '\(path)' is protected.", path: path, errno: EPERM)
    }
    return store.withLock { store in
      let task = SessionTaskSnapshot(id: store.nextID, kind: .upload, request: request, state: "suspended")
      store.nextID += 1
      store.tasks.append(task)
      store.created[task.id] = task
      return task
    }
  }

  func resume(_ id: Int64, notBefore: Date?) throws(ProtFSError) {
    try refuseIfAsked()
    log(notBefore.map { "resume \(id) not before \($0.timeIntervalSince1970)" } ?? "resume \(id)")
  }
  func suspend(_ id: Int64) throws(ProtFSError) {
    try refuseIfAsked()
    log("suspend \(id)")
  }
  func cancel(_ id: Int64, producingResumeData: Bool) throws(ProtFSError) -> Data? {
    try refuseIfAsked()
    log("cancel \(id)")
    guard producingResumeData, let task = store.withLock({ $0.tasks.first { $0.id == id } }) else { return nil }
    return Data("\(task.request.url.absoluteString) 42".utf8)
  }
  func setDescription(_ description: String?, of id: Int64) throws(ProtFSError) {
    store.withLock { store in
      if let index = store.tasks.firstIndex(where: { $0.id == id }) {
        store.tasks[index].request.taskDescription = description
      }
    }
  }
  func tasks() throws(ProtFSError) -> [SessionTaskSnapshot] { store.withLock { $0.tasks } }

  func subscribe(_ handler: @escaping @Sendable (SessionEvent) -> Void) throws(ProtFSError) {
    let queued = store.withLock { store in
      store.subscriber = handler
      return store.queued
    }
    for event in queued { handler(event) }
    handler(.queuedEventsDelivered)
  }

  func acknowledge(_ id: Int64) throws(ProtFSError) {
    store.withLock { store in
      store.acknowledged.append(id)
      store.calls.append("acknowledge \(id)")
      store.tasks.removeAll { $0.id == id }
      store.queued.removeAll { $0.taskID == id }
    }
    acknowledgement.signal()
  }

  func markDelivered() throws(ProtFSError) {
    let (subscriber, unread) = store.withLock { store in
      store.calls.append("mark delivered")
      defer { store.unread = [] }
      return (store.subscriber, store.unread)
    }
    for event in unread { subscriber?(event) }
    subscriber?(.queuedEventsDelivered)
  }

  func acknowledgeFile(_ id: Int64) throws(ProtFSError) {
    store.withLock { store in
      store.filesAcknowledged.append(id)
      store.calls.append("acknowledge file \(id)")
    }
  }

  func invalidate(cancelling: Bool) {
    log("invalidate \(cancelling)")
    store.withLock { $0.subscriber = nil }
  }

  /// Sends `event` to the subscriber, or queues it (a completion) when there is none.
  func post(_ event: SessionEvent) {
    let subscriber = store.withLock { store in
      if store.subscriber == nil { store.queued.append(event) }
      return store.subscriber
    }
    subscriber?(event)
  }

  /// The snapshot of task `id`, completed. The task may be acknowledged already (a session made
  /// again after an acknowledgement the test did not expect).
  func completedSnapshot(_ id: Int64) -> SessionTaskSnapshot {
    var snapshot = store.withLock { $0.tasks.first { $0.id == id } ?? $0.created[id] }!
    snapshot.state = "completed"
    return snapshot
  }

  private func refuseIfAsked() throws(ProtFSError) {
    if let refusal = store.withLock({ $0.refusal }) { throw refusal }
  }

  private func log(_ call: String) { store.withLock { $0.calls.append(call) } }
}
