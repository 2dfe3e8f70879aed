import Foundation
import Synchronization

/// A property's value as an observer is given it: as Swift has it (for `observe(_:)`'s typed
/// change) and as Foundation's change dictionary carries it (an `NSNumber` for a number, `NSNull`
/// for nil, so that `as? Int`, `as? NSNumber` and `is NSNull` read it as on iOS).
///
/// `@unchecked Sendable`: immutable; it holds values (numbers, strings, responses, errors) that
/// are themselves immutable.
struct ObservedValue: @unchecked Sendable {
  let value: Any
  let object: Any

  /// An integer, as an `NSNumber`.
  init(_ value: Int64) { (self.value, object) = (value, NSNumber(value: value)) }
  /// An integer, as an `NSNumber`.
  init(_ value: Int) { (self.value, object) = (value, NSNumber(value: value)) }
  /// A number, as an `NSNumber`.
  init(_ value: Float) { (self.value, object) = (value, NSNumber(value: value)) }
  /// A number, as an `NSNumber`.
  init(_ value: Double) { (self.value, object) = (value, NSNumber(value: value)) }
  /// A flag, as an `NSNumber`.
  init(_ value: Bool) { (self.value, object) = (value, NSNumber(value: value)) }
  /// An enumeration of Foundation's, as its raw value's `NSNumber`.
  init<Enumeration: RawRepresentable<Int>>(_ value: Enumeration) {
    (self.value, object) = (value, NSNumber(value: value.rawValue))
  }
  /// Anything else, itself (an error as its `NSError`), `NSNull` for nil.
  init<Wrapped>(object value: Wrapped?) {
    self.value = value as Any
    guard let value else {
      object = NSNull()
      return
    }
    object = (value as? any Error).map { $0 as NSError } ?? value
  }
}

/// One change of an observed property, by its key path.
struct KeyValueChange: Sendable {
  let key: String
  let old: ObservedValue
  let new: ObservedValue
}

/// What a notification tells a registration, before it is shaped for its observer.
struct KeyValueNotification {
  let kind = NSKeyValueChange.setting
  /// The new value, when asked for and not a prior notification.
  let new: ObservedValue?
  /// The old value, when asked for and not the initial notification.
  let old: ObservedValue?
  let isPrior: Bool
}

/// The observers of one object, as Foundation's key-value observing keeps them: each with its key
/// path, options and context (or handler), told of a change on the thread that made it, never under
/// a lock, so an observer may read the object, change it, or remove itself while it is told.
final class KeyValueObservers: Sendable {
  /// Who hears of a change.
  enum Target: Sendable {
    /// An object registered with `addObserver`; held weakly, its context kept as a bit pattern.
    case observer(WeakObserver, context: UInt)
    /// The handler of an `observe(_:)` observation.
    case handler(@Sendable (NSObject, KeyValueNotification) -> Void)
  }

  /// A weak reference to an observer (`@unchecked Sendable`: set once; Foundation calls observers
  /// from whichever thread changes what they observe).
  final class WeakObserver: @unchecked Sendable {
    weak var object: NSObject?
    init(_ object: NSObject) { self.object = object }
  }

  /// One registration.
  struct Registration: Sendable {
    let id: Int
    let key: String
    let options: NSKeyValueObservingOptions
    let target: Target
  }

  private struct State {
    var lastID = 0
    var registrations: [Registration] = []
  }
  private let state = Mutex(State())
  /// How many registrations there are, and how many of them asked for `.prior`: read without the
  /// lock at every change, which costs nothing while nobody observes.
  private let count = Atomic<Int>(0)
  private let priors = Atomic<Int>(0)

  /// Whether anyone observes the object.
  var isObserved: Bool { count.load(ordering: .acquiring) > 0 }
  /// Whether someone wants to hear of changes before they are made.
  var wantsPrior: Bool { priors.load(ordering: .acquiring) > 0 }

  /// Adds a registration; returns its id.
  func add(key: String, options: NSKeyValueObservingOptions, target: Target) -> Int {
    let id = state.withLock { state in
      state.lastID += 1
      state.registrations.append(Registration(id: state.lastID, key: key, options: options, target: target))
      return state.lastID
    }
    count.add(1, ordering: .releasing)
    if options.contains(.prior) { priors.add(1, ordering: .releasing) }
    return id
  }

  /// Removes registration `id` (nothing when it is gone already).
  func remove(_ id: Int) {
    let removed = state.withLock { state in
      state.registrations.firstIndex { $0.id == id }.map { state.registrations.remove(at: $0) }
    }
    if let removed { forget(removed) }
  }

  /// Removes the newest registration of `observer` for `key` (with `context`, when given), as
  /// Foundation does; false when there is none.
  func remove(_ observer: NSObject, key: String, context: UInt?) -> Bool {
    let removed = state.withLock { state -> Registration? in
      let index = state.registrations.lastIndex { registration in
        guard registration.key == key, case .observer(let weak, let registered) = registration.target else {
          return false
        }
        return weak.object === observer && (context == nil || context == registered)
      }
      return index.map { state.registrations.remove(at: $0) }
    }
    if let removed { forget(removed) }
    return removed != nil
  }

  private func forget(_ registration: Registration) {
    count.subtract(1, ordering: .releasing)
    if registration.options.contains(.prior) { priors.subtract(1, ordering: .releasing) }
  }

  private func isRegistered(_ id: Int) -> Bool {
    state.withLock { $0.registrations.contains { $0.id == id } }
  }

  /// Tells the observers of `object` of `changes`, in order, each in the order they registered:
  /// after the changes were made, or (`prior`) the ones that asked for `.prior` before. An
  /// observer removed meanwhile (by an earlier one, or itself) is not told.
  func notify(_ changes: [KeyValueChange], of object: NSObject, prior: Bool = false) {
    guard isObserved else { return }
    for change in changes {
      let registrations = state.withLock { state in
        state.registrations.filter { $0.key == change.key && (!prior || $0.options.contains(.prior)) }
      }
      for registration in registrations where isRegistered(registration.id) {
        let options = registration.options
        let notification = KeyValueNotification(
          new: options.contains(.new) && !prior ? change.new : nil, old: options.contains(.old) ? change.old : nil,
          isPrior: prior)
        deliver(notification, of: change.key, from: object, to: registration)
      }
    }
  }

  /// Sends registration `id` its `.initial` notification, `value` being the key's value now.
  func notifyInitial(_ id: Int, value: ObservedValue, of object: NSObject) {
    guard let registration = state.withLock({ $0.registrations.first { $0.id == id } }) else { return }
    let notification = KeyValueNotification(
      new: registration.options.contains(.new) ? value : nil, old: nil, isPrior: false)
    deliver(notification, of: registration.key, from: object, to: registration)
  }

  private func deliver(
    _ notification: KeyValueNotification, of key: String, from object: NSObject, to registration: Registration
  ) {
    switch registration.target {
    case .handler(let handler):
      handler(object, notification)
    case .observer(let weak, let context):
      guard let observer = weak.object else {
        // Gone without removing itself: nothing to tell (iOS would message a freed object).
        remove(registration.id)
        return
      }
      var change: [NSKeyValueChangeKey: Any] = [.kindKey: NSNumber(value: notification.kind.rawValue)]
      if let new = notification.new { change[.newKey] = new.object }
      if let old = notification.old { change[.oldKey] = old.object }
      if notification.isPrior { change[.notificationIsPriorKey] = NSNumber(value: true) }
      guard let observing = observer as? any NSKeyValueObserving else {
        Self.unhandled(by: observer, key: key, of: object, change: change, context: context)
      }
      observing.observeValue(
        forKeyPath: key, of: object, change: change, context: UnsafeMutableRawPointer(bitPattern: context))
    }
  }

  /// What `NSObject`'s `observeValue` does on iOS when the observer's class did not implement it:
  /// raises `NSInternalInconsistencyException`, which ends the app.
  static func unhandled(
    by observer: AnyObject, key: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?, context: UInt
  ) -> Never {
    let changed = (change ?? [:]).map { "\($0.key.rawValue) = \($0.value)" }.sorted().joined(separator: "; ")
    UncaughtException.raise(
      "NSInternalInconsistencyException",
      reason:
        "\(observer): An -observeValueForKeyPath:ofObject:change:context: message was received but not handled.\n"
        + "Key path: \(key ?? "")\nObserved object: \(object.map { "\($0)" } ?? "nil")\nChange: {\(changed)}\n"
        + "Context: 0x\(String(context, radix: 16))")
  }
}

/// An object whose properties ProtFSKit changes and tells observers of: a task, a progress.
protocol KeyValueObservable: NSObject {
  /// Its observers.
  var keyValueObservers: KeyValueObservers { get }
  /// The value of its property `key` (a key path of Foundation's: `state`, `progress.fractionCompleted`),
  /// nil for a key it does not have.
  func observedValue(forKey key: String) -> ObservedValue?
}

extension KeyValueObservable {
  /// `addObserver(_:forKeyPath:options:context:)`: registers, then sends the `.initial` notification.
  func register(
    _ observer: NSObject, forKeyPath keyPath: String, options: NSKeyValueObservingOptions,
    context: UnsafeMutableRawPointer?
  ) {
    let context = UInt(bitPattern: context)
    let id = keyValueObservers.add(
      key: keyPath, options: options, target: .observer(KeyValueObservers.WeakObserver(observer), context: context))
    guard options.contains(.initial) else { return }
    keyValueObservers.notifyInitial(id, value: value(forKeyPath: keyPath), of: self)
  }

  /// `removeObserver(_:forKeyPath:context:)`: raises as Foundation does when `observer` is not
  /// registered for `keyPath` (with `context`, when given).
  func unregister(_ observer: NSObject, forKeyPath keyPath: String, context: UnsafeMutableRawPointer??) {
    let context = context.map { UInt(bitPattern: $0) }
    guard !keyValueObservers.remove(observer, key: keyPath, context: context) else { return }
    UncaughtException.raise(
      "NSRangeException",
      reason:
        "Cannot remove an observer \(observer) for the key path \"\(keyPath)\" from \(self) because it is not "
        + "registered as an observer.")
  }

  /// `observe(_:options:changeHandler:)`, `key` naming `keyPath` among the keys that change (nil for
  /// one that never does: only `.initial` is sent).
  func observation<Value>(
    of keyPath: KeyPath<Self, Value>, key: String?, options: NSKeyValueObservingOptions,
    changeHandler: @escaping @Sendable (Self, NSKeyValueObservedChange<Value>) -> Void
  ) -> NSKeyValueObservation {
    let observers = keyValueObservers
    let id = observers.add(
      key: key ?? "", options: options,
      target: .handler { object, notification in
        guard let object = object as? Self else { return }
        changeHandler(
          object,
          NSKeyValueObservedChange(
            kind: notification.kind, newValue: notification.new.flatMap { $0.value as? Value },
            oldValue: notification.old.flatMap { $0.value as? Value }, indexes: nil, isPrior: notification.isPrior))
      })
    let observation = NSKeyValueObservation(observers: observers, registration: id)
    if options.contains(.initial) {
      let value = options.contains(.new) ? self[keyPath: keyPath] : nil
      changeHandler(
        self, NSKeyValueObservedChange(kind: .setting, newValue: value, oldValue: nil, indexes: nil, isPrior: false))
    }
    return observation
  }

  /// The value at `keyPath`, as `value(forKeyPath:)` on iOS: one the object does not have raises
  /// `NSUnknownKeyException`, which ends the app.
  private func value(forKeyPath keyPath: String) -> ObservedValue {
    if let value = observedValue(forKey: keyPath) { return value }
    UncaughtException.raise(
      "NSUnknownKeyException",
      reason:
        "[<\(type(of: self)) \(Unmanaged.passUnretained(self).toOpaque())> valueForUndefinedKey:]: this class is "
        + "not key value coding-compliant for the key \(keyPath).")
  }
}
