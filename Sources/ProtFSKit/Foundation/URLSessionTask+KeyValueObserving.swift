import Foundation
import Synchronization

/// A task's properties as observers see them, read from its `Values` under its lock.
struct ObservedTaskValues {
  var state: URLSessionTask.State
  var response: URLResponse?
  var error: (any Error)?
  var received: Int64
  var expectedToReceive: Int64
  var sent: Int64
  var expectedToSend: Int64
  var priority: Float
  var description: String?
  var earliestBeginDate: Date?
  var expectsToSend: Int64
  var expectsToReceive: Int64

  init(_ values: URLSessionTask.Values) {
    state = values.state
    response = values.response
    error = values.error
    received = values.received
    expectedToReceive = values.expectedToReceive
    sent = values.sent
    expectedToSend = values.expectedToSend
    priority = values.priority
    description = values.description
    earliestBeginDate = values.earliestBeginDate
    expectsToSend = values.expectsToSend
    expectsToReceive = values.expectsToReceive
  }

  /// The properties that differ in `new`, by Foundation's names, in the order observers hear of
  /// them: the response and the counts first, the error before the state it completes.
  func changes(to new: ObservedTaskValues) -> [KeyValueChange] {
    var changes: [KeyValueChange] = []
    func note<T>(_ key: String, _ old: T, _ new: T, changed: Bool, as value: (T) -> ObservedValue) {
      if changed { changes.append(KeyValueChange(key: key, old: value(old), new: value(new))) }
    }
    func note<T: Equatable>(_ key: String, _ old: T, _ new: T, as value: (T) -> ObservedValue) {
      note(key, old, new, changed: old != new, as: value)
    }
    note("response", response, new.response, changed: response !== new.response) { ObservedValue(object: $0) }
    note("countOfBytesExpectedToReceive", expectedToReceive, new.expectedToReceive, as: ObservedValue.init)
    note("countOfBytesReceived", received, new.received, as: ObservedValue.init)
    note("countOfBytesExpectedToSend", expectedToSend, new.expectedToSend, as: ObservedValue.init)
    note("countOfBytesSent", sent, new.sent, as: ObservedValue.init)
    let errorChanged = error.map { $0 as AnyObject } !== new.error.map { $0 as AnyObject }
    note("error", error, new.error, changed: errorChanged) { ObservedValue(object: $0) }
    note("state", state, new.state, as: ObservedValue.init)
    note("priority", priority, new.priority, as: ObservedValue.init)
    note("taskDescription", description, new.description) { ObservedValue(object: $0) }
    note("earliestBeginDate", earliestBeginDate, new.earliestBeginDate) { ObservedValue(object: $0) }
    note("countOfBytesClientExpectsToSend", expectsToSend, new.expectsToSend, as: ObservedValue.init)
    note("countOfBytesClientExpectsToReceive", expectsToReceive, new.expectsToReceive, as: ObservedValue.init)
    return changes
  }
}

extension URLSessionTask: KeyValueObservable {
  /// Changes the task's values under its lock, then tells its observers of each property that
  /// changed, on this thread and outside the lock, as Foundation does (an observer may read the
  /// task, change it or remove itself). Those that asked for `.prior` hear of the coming changes
  /// first, worked out on a copy: `body` runs twice then, so it only changes `values`.
  @discardableResult
  func change<Result>(_ body: (inout Values) -> Result) -> Result {
    guard keyValueObservers.isObserved else { return lock.withLock { body(&$0) } }
    if keyValueObservers.wantsPrior {
      let coming = lock.withLock { values in
        var copy = values
        _ = body(&copy)
        return ObservedTaskValues(values).changes(to: ObservedTaskValues(copy))
      }
      keyValueObservers.notify(coming, of: self, prior: true)
    }
    let (result, changes) = lock.withLock { values in
      let old = ObservedTaskValues(values)
      let result = body(&values)
      return (result, old.changes(to: ObservedTaskValues(values)))
    }
    keyValueObservers.notify(changes, of: self)
    return result
  }

  /// The value of the task's property `key`, or of its progress's (`progress.fractionCompleted`).
  func observedValue(forKey key: String) -> ObservedValue? {
    if key.hasPrefix("progress.") { return progress.observedValue(forKey: String(key.dropFirst("progress.".count))) }
    let values = lock.withLock { ObservedTaskValues($0) }
    switch key {
    case "state": return ObservedValue(values.state)
    case "response": return ObservedValue(object: values.response)
    case "error": return ObservedValue(object: values.error)
    case "countOfBytesReceived": return ObservedValue(values.received)
    case "countOfBytesExpectedToReceive": return ObservedValue(values.expectedToReceive)
    case "countOfBytesSent": return ObservedValue(values.sent)
    case "countOfBytesExpectedToSend": return ObservedValue(values.expectedToSend)
    case "priority": return ObservedValue(values.priority)
    case "taskDescription": return ObservedValue(object: values.description)
    case "earliestBeginDate": return ObservedValue(object: values.earliestBeginDate)
    case "countOfBytesClientExpectsToSend": return ObservedValue(values.expectsToSend)
    case "countOfBytesClientExpectsToReceive": return ObservedValue(values.expectsToReceive)
    case "taskIdentifier": return ObservedValue(taskIdentifier)
    case "originalRequest", "currentRequest": return ObservedValue(object: originalRequest)
    case "progress": return ObservedValue(object: progress)
    default: return nil
    }
  }
}

extension URLSessionTask: _KeyValueCodingAndObserving {
  /// Registers `observer` for changes of the task's property at `keyPath` (`state`,
  /// `countOfBytesReceived`, `progress.fractionCompleted`…), as Foundation's: its
  /// `observeValue(forKeyPath:of:change:context:)` (its class adopts ``NSKeyValueObserving``) is
  /// called with `context` on the thread that changed the task. Held weakly.
  public func addObserver(
    _ observer: NSObject, forKeyPath keyPath: String, options: NSKeyValueObservingOptions = [],
    context: UnsafeMutableRawPointer?
  ) {
    register(observer, forKeyPath: keyPath, options: options, context: context)
  }

  /// Removes the registration of `observer` for `keyPath` made with `context`; one that was not made
  /// ends the app with `NSRangeException`, as on iOS.
  public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String, context: UnsafeMutableRawPointer?) {
    unregister(observer, forKeyPath: keyPath, context: .some(context))
  }

  /// Removes the newest registration of `observer` for `keyPath`; none ends the app with
  /// `NSRangeException`, as on iOS.
  public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String) {
    unregister(observer, forKeyPath: keyPath, context: nil)
  }
}

extension _KeyValueCodingAndObserving where Self: URLSessionTask {
  /// Calls `changeHandler` when the task's property at `keyPath` changes (`\.state`,
  /// `\.countOfBytesReceived`, `\.progress.fractionCompleted`…), as Foundation's, on the thread that
  /// changed it, until the observation returned is invalidated or released.
  @preconcurrency
  public func observe<Value>(
    _ keyPath: KeyPath<Self, Value>, options: NSKeyValueObservingOptions = [],
    changeHandler: @escaping @Sendable (Self, NSKeyValueObservedChange<Value>) -> Void
  ) -> NSKeyValueObservation {
    let keys: [PartialKeyPath<Self>: String] = [
      \.state: "state", \.response: "response", \.error: "error", \.countOfBytesReceived: "countOfBytesReceived",
      \.countOfBytesExpectedToReceive: "countOfBytesExpectedToReceive", \.countOfBytesSent: "countOfBytesSent",
      \.countOfBytesExpectedToSend: "countOfBytesExpectedToSend", \.priority: "priority",
      \.taskDescription: "taskDescription", \.earliestBeginDate: "earliestBeginDate",
      \.countOfBytesClientExpectsToSend: "countOfBytesClientExpectsToSend",
      \.countOfBytesClientExpectsToReceive: "countOfBytesClientExpectsToReceive",
      \.progress.completedUnitCount: "progress.completedUnitCount",
      \.progress.totalUnitCount: "progress.totalUnitCount", \.progress.fractionCompleted: "progress.fractionCompleted",
    ]
    return observation(of: keyPath, key: keys[keyPath], options: options, changeHandler: changeHandler)
  }
}

/// A task's `progress`: Foundation's `Progress`, which tells its observers, and its task's (as
/// `progress.completedUnitCount`…), when a count changes, and of `fractionCompleted` when it
/// changes with them.
///
/// `@unchecked Sendable`: Foundation's `Progress` guards its counts; `task` is set once, by the
/// task's initializer, before anyone else sees either.
final class TaskProgress: Progress, @unchecked Sendable {
  /// The task it counts for.
  weak var task: URLSessionTask?
  /// Who observes it.
  let observers = KeyValueObservers()

  override var completedUnitCount: Int64 {
    get { super.completedUnitCount }
    set {
      let old = super.completedUnitCount
      announce("completedUnitCount", from: old, to: newValue) { super.completedUnitCount = newValue }
    }
  }

  override var totalUnitCount: Int64 {
    get { super.totalUnitCount }
    set {
      let old = super.totalUnitCount
      announce("totalUnitCount", from: old, to: newValue) { super.totalUnitCount = newValue }
    }
  }

  /// Sets count `key` from `old` to `new` with `set`, telling the observers of it and of
  /// `fractionCompleted` when that changes with it (the ones that asked for `.prior` before).
  private func announce(_ key: String, from old: Int64, to new: Int64, _ set: () -> Void) {
    let task = self.task
    guard old != new, observers.isObserved || task?.keyValueObservers.isObserved == true else { return set() }
    let oldFraction = fractionCompleted
    if observers.wantsPrior || task?.keyValueObservers.wantsPrior == true {
      // What the fraction will be, worked out by Foundation on a copy of the counts.
      let coming = Progress(totalUnitCount: key == "totalUnitCount" ? new : totalUnitCount)
      coming.completedUnitCount = key == "completedUnitCount" ? new : completedUnitCount
      var changes = [KeyValueChange(key: key, old: ObservedValue(old), new: ObservedValue(new))]
      if coming.fractionCompleted != oldFraction {
        changes.append(
          KeyValueChange(
            key: "fractionCompleted", old: ObservedValue(oldFraction), new: ObservedValue(coming.fractionCompleted)))
      }
      tell(changes, task: task, prior: true)
    }
    set()
    var changes = [KeyValueChange(key: key, old: ObservedValue(old), new: ObservedValue(new))]
    let newFraction = fractionCompleted
    if newFraction != oldFraction {
      changes.append(
        KeyValueChange(key: "fractionCompleted", old: ObservedValue(oldFraction), new: ObservedValue(newFraction)))
    }
    tell(changes, task: task, prior: false)
  }

  private func tell(_ changes: [KeyValueChange], task: URLSessionTask?, prior: Bool) {
    observers.notify(changes, of: self, prior: prior)
    guard let task else { return }
    let relayed = changes.map { KeyValueChange(key: "progress." + $0.key, old: $0.old, new: $0.new) }
    task.keyValueObservers.notify(relayed, of: task, prior: prior)
  }
}

/// The observers of the `Progress` objects an app makes itself, kept aside (Foundation's class has
/// no room for them). Nothing but the app changes those, and Foundation on Linux tells no one, so
/// they hear only `.initial`.
enum ForeignProgressObservers {
  /// `@unchecked Sendable`: read and written only inside `table`'s lock.
  private struct Entry: @unchecked Sendable {
    weak var progress: Progress?
    let observers: KeyValueObservers
  }
  private static let table = Mutex<[ObjectIdentifier: Entry]>([:])

  /// The observers of `progress`.
  static func of(_ progress: Progress) -> KeyValueObservers {
    table.withLock { table in
      let id = ObjectIdentifier(progress)
      if let entry = table[id], entry.progress === progress { return entry.observers }
      table = table.filter { $0.value.progress != nil }
      let observers = KeyValueObservers()
      table[id] = Entry(progress: progress, observers: observers)
      return observers
    }
  }
}

extension Progress: KeyValueObservable {
  var keyValueObservers: KeyValueObservers {
    (self as? TaskProgress)?.observers ?? ForeignProgressObservers.of(self)
  }

  func observedValue(forKey key: String) -> ObservedValue? {
    switch key {
    case "completedUnitCount": ObservedValue(completedUnitCount)
    case "totalUnitCount": ObservedValue(totalUnitCount)
    case "fractionCompleted": ObservedValue(fractionCompleted)
    case "isCancelled": ObservedValue(isCancelled)
    case "isPaused": ObservedValue(isPaused)
    case "isFinished": ObservedValue(isFinished)
    case "isIndeterminate": ObservedValue(isIndeterminate)
    case "isCancellable": ObservedValue(isCancellable)
    case "isPausable": ObservedValue(isPausable)
    case "localizedDescription": ObservedValue(object: localizedDescription as String?)
    case "localizedAdditionalDescription": ObservedValue(object: localizedAdditionalDescription as String?)
    default: nil
    }
  }
}

extension Progress: _KeyValueCodingAndObserving {
  /// Registers `observer` for changes of the progress's `completedUnitCount`, `totalUnitCount` or
  /// `fractionCompleted`, as Foundation's; a task's progress tells it (a progress the app makes does
  /// not: Foundation on Linux has no key-value observing). Held weakly.
  public func addObserver(
    _ observer: NSObject, forKeyPath keyPath: String, options: NSKeyValueObservingOptions = [],
    context: UnsafeMutableRawPointer?
  ) {
    register(observer, forKeyPath: keyPath, options: options, context: context)
  }

  /// Removes the registration of `observer` for `keyPath` made with `context`; one that was not made
  /// ends the app with `NSRangeException`, as on iOS.
  public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String, context: UnsafeMutableRawPointer?) {
    unregister(observer, forKeyPath: keyPath, context: .some(context))
  }

  /// Removes the newest registration of `observer` for `keyPath`; none ends the app with
  /// `NSRangeException`, as on iOS.
  public func removeObserver(_ observer: NSObject, forKeyPath keyPath: String) {
    unregister(observer, forKeyPath: keyPath, context: nil)
  }
}

extension _KeyValueCodingAndObserving where Self: Progress {
  /// Calls `changeHandler` when the progress's `\.completedUnitCount`, `\.totalUnitCount` or
  /// `\.fractionCompleted` changes, as Foundation's (for a task's progress: see `addObserver`), on the
  /// thread that changed it, until the observation returned is invalidated or released.
  @preconcurrency
  public func observe<Value>(
    _ keyPath: KeyPath<Self, Value>, options: NSKeyValueObservingOptions = [],
    changeHandler: @escaping @Sendable (Self, NSKeyValueObservedChange<Value>) -> Void
  ) -> NSKeyValueObservation {
    let keys: [PartialKeyPath<Self>: String] = [
      \.completedUnitCount: "completedUnitCount", \.totalUnitCount: "totalUnitCount",
      \.fractionCompleted: "fractionCompleted",
    ]
    return observation(of: keyPath, key: keys[keyPath], options: options, changeHandler: changeHandler)
  }
}
