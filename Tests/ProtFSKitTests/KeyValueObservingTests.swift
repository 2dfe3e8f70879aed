import Foundation
import ProtFSKit
import ProtFSSessions
import ProtFSTestSupport
import Synchronization
import Testing

/// Key-value observing of a task and its progress, as iOS download managers use it: the observer
/// with `addObserver` and `observeValue`, and `observe(_:)` with its `NSKeyValueObservation`.
@Suite(.timeLimit(.minutes(2))) struct KeyValueObservingTests {
  let url = URL(string: "http://example.test/file.bin")!
  let context = UnsafeMutableRawPointer(bitPattern: 0x5eed)

  /// An observer as a port writes one: its class adopts `NSKeyValueObserving`; it records what it
  /// hears (`key old->new`, `-` for a value the change does not carry).
  final class Observer: NSObject, NSKeyValueObserving, @unchecked Sendable {
    let heard = Mutex<[String]>([])
    /// The contexts, as bit patterns.
    let contexts = Mutex<[UInt]>([])
    let threads = Mutex<[Thread]>([])
    /// Run inside `observeValue`, after the change is recorded.
    var onChange: (@Sendable (URLSessionTask) -> Void)?

    func observeValue(
      forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
      context: UnsafeMutableRawPointer?
    ) {
      let change = change ?? [:]
      let prior = (change[.notificationIsPriorKey] as? Bool) == true ? " prior" : ""
      let line = "\(keyPath ?? "?") \(Self.text(change[.oldKey]))->\(Self.text(change[.newKey]))\(prior)"
      heard.withLock { $0.append(line) }
      contexts.withLock { $0.append(UInt(bitPattern: context)) }
      threads.withLock { $0.append(Thread.current) }
      if let task = object as? URLSessionTask { onChange?(task) }
    }

    static func text(_ value: Any?) -> String {
      switch value {
      case nil: "-"
      case is NSNull: "nil"
      case let number as NSNumber: number.stringValue
      case let response as HTTPURLResponse: "\(response.statusCode)"
      case let value?: "\(value)"
      }
    }
  }

  /// A `UIResponder` observes as on iOS: it overrides `observeValue` and calls `super` for what it
  /// did not register for (no change to port it).
  final class ResponderObserver: UIResponder, @unchecked Sendable {
    let heard = Mutex<[String]>([])

    override func observeValue(
      forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
      context: UnsafeMutableRawPointer?
    ) {
      guard context == nil else {
        return super.observeValue(forKeyPath: keyPath, of: object, change: change, context: context)
      }
      heard.withLock { $0.append("\(keyPath ?? "?") \(Observer.text(change?[.newKey]))") }
    }
  }

  /// The calling thread (not readable directly in an async function).
  static func thread() -> Thread { Thread.current }

  func session(_ backend: FakeSessionBackend, _ delegate: RecordingDelegate) -> URLSession {
    URLSession(
      configuration: .background(withIdentifier: backend.identifier), delegate: delegate, delegateQueue: nil,
      backend: backend)
  }

  /// Posts a download of 20 bytes in two writes, then its completion; waits for the delegate.
  func download(_ task: URLSessionTask, _ backend: FakeSessionBackend, _ delegate: RecordingDelegate) async {
    let id = Int64(task.taskIdentifier)
    backend.post(.wroteData(task: id, bytesWritten: 10, totalBytesWritten: 10, totalBytesExpectedToWrite: 20))
    backend.post(.wroteData(task: id, bytesWritten: 10, totalBytesWritten: 20, totalBytesExpectedToWrite: 20))
    backend.post(.completed(task: id, snapshot: backend.completedSnapshot(id), error: nil))
    _ = await delegate.waitFor("complete \(id) ok")
  }

  /// The observer hears of the state, the counts and the progress, in the order they changed, with
  /// their old and new values as `NSNumber`s and its context; `resume()` tells it on the calling
  /// thread before it returns.
  @Test func anObserverHearsOfEachChangeInOrderWithItsOldAndNewValues() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let task = session(backend, delegate).downloadTask(with: url)
    let observer = Observer()
    let keys = ["state", "countOfBytesReceived", "countOfBytesExpectedToReceive", "progress.fractionCompleted"]
    for key in keys { task.addObserver(observer, forKeyPath: key, options: [.new, .old], context: context) }
    task.resume()
    #expect(observer.heard.withLock { $0 } == ["state 1->0"])
    #expect(observer.threads.withLock { $0 } == [Self.thread()])
    await download(task, backend, delegate)
    #expect(
      observer.heard.withLock { $0 } == [
        "state 1->0",
        "countOfBytesExpectedToReceive -1->20", "countOfBytesReceived 0->10", "progress.fractionCompleted 0.0->0.5",
        "countOfBytesReceived 10->20", "progress.fractionCompleted 0.5->1.0",
        "state 0->3",
      ])
    #expect(observer.contexts.withLock { $0 }.allSatisfy { $0 == UInt(bitPattern: context) })
  }

  /// A removed observer hears nothing more; removing with the context removes that registration
  /// only; an observer gone without removing itself is not told.
  @Test func removalStopsTheNotifications() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let task = session(backend, delegate).downloadTask(with: url)
    let observer = Observer()
    let other = UnsafeMutableRawPointer(bitPattern: 0x0dd)
    task.addObserver(observer, forKeyPath: "state", options: .new, context: context)
    task.addObserver(observer, forKeyPath: "state", options: .new, context: other)
    task.addObserver(observer, forKeyPath: "countOfBytesReceived", options: .new, context: nil)
    task.removeObserver(observer, forKeyPath: "state", context: context)
    task.removeObserver(observer, forKeyPath: "countOfBytesReceived")
    weak var released: Observer?
    do {
      let gone = Observer()
      task.addObserver(gone, forKeyPath: "state", options: .new, context: nil)
      released = gone
    }
    #expect(released == nil)
    task.resume()
    #expect(observer.heard.withLock { $0 } == ["state -->0"])
    #expect(observer.contexts.withLock { $0 } == [UInt(bitPattern: other)])
    task.removeObserver(observer, forKeyPath: "state")
    await download(task, backend, delegate)
    #expect(observer.heard.withLock { $0 } == ["state -->0"])
  }

  /// `.initial` tells the value at once, before `addObserver` returns (new only); `.old` alone
  /// carries the old value and no new one; `.prior` tells before the change, when the task still
  /// has its old value.
  @Test func initialOldAndPriorNotifications() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let task = session(backend, delegate).downloadTask(with: url)
    task.taskDescription = "nightly"
    let observer = Observer()
    task.addObserver(observer, forKeyPath: "taskDescription", options: [.initial, .new, .old], context: nil)
    task.addObserver(observer, forKeyPath: "originalRequest", options: [.initial], context: nil)
    #expect(observer.heard.withLock { $0 } == ["taskDescription -->nightly", "originalRequest -->-"])
    task.addObserver(observer, forKeyPath: "priority", options: .old, context: nil)
    task.priority = URLSessionTask.highPriority
    #expect(observer.heard.withLock { $0 }.last == "priority 0.5->-")
    let seenBefore = Mutex<[URLSessionTask.State]>([])
    observer.onChange = { task in seenBefore.withLock { $0.append(task.state) } }
    task.addObserver(observer, forKeyPath: "state", options: [.prior, .old, .new], context: nil)
    task.resume()
    #expect(observer.heard.withLock { $0 }.suffix(2) == ["state 1->- prior", "state 1->0"])
    #expect(seenBefore.withLock { $0 }.suffix(2) == [.suspended, .running])
    task.taskDescription = nil
    #expect(observer.heard.withLock { $0 }.last == "taskDescription nightly->nil")
  }

  /// A `UIResponder` subclass overrides `observeValue`, as on iOS; a progress tells its own
  /// observers too.
  @Test @MainActor func aResponderOverridesObserveValue() {
    let backend = FakeSessionBackend()
    let task = session(backend, RecordingDelegate()).downloadTask(with: url)
    let responder = ResponderObserver()
    task.addObserver(responder, forKeyPath: "state", options: .new, context: nil)
    task.progress.addObserver(responder, forKeyPath: "totalUnitCount", options: [.initial, .new], context: nil)
    task.resume()
    task.progress.totalUnitCount = 10
    #expect(responder.heard.withLock { $0 } == ["totalUnitCount -1", "state 0", "totalUnitCount 10"])
    task.progress.removeObserver(responder, forKeyPath: "totalUnitCount", context: nil)
    task.removeObserver(responder, forKeyPath: "state")
  }

  /// `observe(_:)` hands typed values (the state an enum, the response optional) and `.initial`;
  /// releasing or invalidating the observation ends it.
  @Test func observationsAreTypedAndEndWhenReleasedOrInvalidated() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let task = session(backend, delegate).downloadTask(with: url)
    let states = Mutex<[String]>([])
    var stateObservation: NSKeyValueObservation? = task.observe(\.state, options: [.initial, .new, .old]) {
      observed, change in
      #expect(change.kind == .setting && change.indexes == nil && !change.isPrior)
      states.withLock {
        $0.append("\(change.oldValue.map { "\($0)" } ?? "-")->\(change.newValue.map { "\($0)" } ?? "-")")
      }
      #expect(observed.state == change.newValue)
    }
    let fractions = Mutex<[Double]>([])
    let fractionObservation = task.progress.observe(\.fractionCompleted, options: .new) { progress, change in
      fractions.withLock { $0.append(change.newValue ?? -1) }
    }
    let bytes = Mutex<[Int64]>([])
    let bytesObservation = task.observe(\.countOfBytesReceived) { task, change in
      #expect(change.newValue == nil && change.oldValue == nil)
      bytes.withLock { $0.append(task.countOfBytesReceived) }
    }
    #expect(states.withLock { $0 } == ["-->suspended"])
    task.resume()
    #expect(states.withLock { $0 } == ["-->suspended", "suspended->running"])
    stateObservation = nil
    #expect(stateObservation == nil)
    bytesObservation.invalidate()
    bytesObservation.invalidate()
    await download(task, backend, delegate)
    #expect(states.withLock { $0 } == ["-->suspended", "suspended->running"])
    #expect(bytes.withLock { $0 }.isEmpty)
    #expect(fractions.withLock { $0 } == [0.5, 1])
    fractionObservation.invalidate()
  }

  /// An observer may remove itself (and another) while it is told, and change the task it
  /// observes: no deadlock on the task's lock, the next observer is still told, the removed one not.
  @Test func anObserverRemovesItselfAndChangesTheTaskInsideItsCallback() async {
    let backend = FakeSessionBackend()
    let delegate = RecordingDelegate()
    let task = session(backend, delegate).downloadTask(with: url)
    let first = Observer()
    let second = Observer()
    let third = Observer()
    first.onChange = { [unowned first, unowned third] task in
      task.removeObserver(first, forKeyPath: "state")
      task.removeObserver(third, forKeyPath: "state")
      task.priority = URLSessionTask.lowPriority
      _ = (task.state, task.countOfBytesReceived, task.progress.fractionCompleted)
    }
    task.addObserver(first, forKeyPath: "state", options: .new, context: nil)
    task.addObserver(second, forKeyPath: "state", options: .new, context: nil)
    task.addObserver(second, forKeyPath: "priority", options: .new, context: nil)
    task.addObserver(third, forKeyPath: "state", options: .new, context: nil)
    let cancelled = Mutex(false)
    let observation = task.observe(\.countOfBytesReceived) { task, _ in
      // Cancelling from inside a notification of a delivered event.
      guard !cancelled.withLock({ $0 }) else { return }
      cancelled.withLock { $0 = true }
      task.cancel()
    }
    task.resume()
    #expect(first.heard.withLock { $0 } == ["state -->0"])
    // The priority set inside the first observer's callback is told before the state reaches the second.
    #expect(second.heard.withLock { $0 } == ["priority -->0.25", "state -->0"])
    await download(task, backend, delegate)
    #expect(first.heard.withLock { $0 } == ["state -->0"])
    #expect(third.heard.withLock { $0 }.isEmpty)
    #expect(second.heard.withLock { $0 }.contains("state -->2"))
    #expect(task.state == .completed)
    observation.invalidate()
  }
}
