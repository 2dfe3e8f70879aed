import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The connection that streams a session's events to its app, written by a thread of its own.
///
/// No one who produces an event waits for the app: `send` queues it and returns. A suspended app
/// reads nothing, so its writer waits (as long as the connection lasts) while progress goes on
/// arriving; progress is merged in the queue, one entry a task with the bytes added up, so what
/// waits for a frozen app is at most one progress entry and one completion a task. Completions
/// are never dropped or merged: they go out in the order they came, after the task's progress.
///
/// `@unchecked Sendable`: `sent` is touched only inside the service's `state.withLock`; the queue
/// and its state by `condition`; `connection` is written only by the writer thread, and closed by
/// the service only after `finish()` returned.
final class SessionSubscriber: @unchecked Sendable {
  /// The connection.
  let connection: FileDescriptor
  /// Tasks whose completion this subscriber was sent (each at most once).
  var sent: Set<Int64> = []
  /// Tasks whose response this subscriber was sent with their first progress (each at most once).
  var responded: Set<Int64> = []
  private let condition = NSCondition()
  /// Queued events; those before `start` went out.
  private var queue: [SessionEvent] = []
  private var start = 0
  /// How many sent events were removed from the front of `queue`: an entry's number is this plus
  /// its index.
  private var removed = 0
  /// The number of each task's progress entry still queued, into which newer progress merges.
  private var progressEntry: [Int64: Int] = [:]
  /// Set by `finish()` or a failed write: nothing more is queued or written.
  private var ended = false
  private let writerDone = DispatchSemaphore(value: 0)

  init(connection: FileDescriptor) {
    self.connection = connection
    let thread = Thread { [self] in
      write()
      writerDone.signal()
    }
    thread.name = "protfs-subscriber"
    thread.start()
  }

  /// Queues `event` for the app; returns at once.
  func send(_ event: SessionEvent) {
    condition.withLock {
      guard !ended else { return }
      if let task = Self.progressTask(event) {
        if let number = progressEntry[task], let merged = Self.merge(queue[number - removed], event) {
          queue[number - removed] = merged
          return
        }
        progressEntry[task] = removed + queue.count
      }
      queue.append(event)
      condition.signal()
    }
  }

  /// Ends the writer (what is still queued is dropped: the app's next subscription gets its
  /// completions from the store) and waits until it no longer touches the connection.
  func finish() {
    condition.withLock {
      ended = true
      condition.signal()
    }
    ControlSocket.shutDown(connection)
    writerDone.wait()
  }

  /// The writer: the queue's events in order, each written whole; a write that waits out the
  /// socket's send limit (a frozen app) waits again, until the subscription ends.
  private func write() {
    while let event = next() {
      guard writeWhole(SessionWire.line(event)) else {
        condition.withLock { ended = true }
        ControlSocket.shutDown(connection)
        return
      }
    }
  }

  /// The next event to write, nil once the subscription ended.
  private func next() -> SessionEvent? {
    condition.withLock {
      while start == queue.count && !ended { condition.wait() }
      guard !ended else { return nil }
      let event = queue[start]
      if let task = Self.progressTask(event), progressEntry[task] == removed + start { progressEntry[task] = nil }
      start += 1
      if start >= 256 && start * 2 >= queue.count {
        queue.removeFirst(start)
        removed += start
        start = 0
      }
      return event
    }
  }

  /// Writes `line` and its newline; false when the connection failed or the subscription ended.
  /// A write that waited out the send limit with the app reading nothing (it is frozen) waits
  /// again, unless the subscription ended meanwhile.
  private func writeWhole(_ line: String) -> Bool {
    ControlSocket.writeAll(Array(line.utf8) + [0x0A], on: connection) { !condition.withLock { ended } }
  }

  /// The task of a progress event, nil for any other.
  private static func progressTask(_ event: SessionEvent) -> Int64? {
    switch event {
    case .wroteData(let task, _, _, _), .sentBodyData(let task, _, _, _): task
    default: nil
    }
  }

  /// `earlier` and `later`, progress of one task, as one event: the bytes of both, the totals of
  /// `later`; nil when they are not of one kind.
  private static func merge(_ earlier: SessionEvent, _ later: SessionEvent) -> SessionEvent? {
    switch (earlier, later) {
    case (.wroteData(let task, let a, _, _), .wroteData(_, let b, let total, let expected)):
      .wroteData(task: task, bytesWritten: a + b, totalBytesWritten: total, totalBytesExpectedToWrite: expected)
    case (.sentBodyData(let task, let a, _, _), .sentBodyData(_, let b, let total, let expected)):
      .sentBodyData(task: task, bytesSent: a + b, totalBytesSent: total, totalBytesExpectedToSend: expected)
    default: nil
    }
  }
}
