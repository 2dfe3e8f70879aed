import Foundation

// Key-value observing, as Foundation's, for what ProtFSKit makes and changes itself: a task's
// state, byte counts, response, error and hints, and its progress. Foundation on Linux has no
// key-value observing (no Objective-C runtime to find an observer's method by its selector), so
// an observer's class adopts `NSKeyValueObserving` (docs/protfskit.md says what a port changes).

/// What a change notification carries, as Foundation's `NSKeyValueObservingOptions`.
public struct NSKeyValueObservingOptions: OptionSet, Sendable {
  /// The options' bits, as Foundation's.
  public let rawValue: UInt

  /// Options with bits `rawValue`.
  public init(rawValue: UInt) { self.rawValue = rawValue }

  /// The change carries the new value (`NSKeyValueChangeKey.newKey`).
  public static let new = NSKeyValueObservingOptions(rawValue: 0x01)
  /// The change carries the old value (`NSKeyValueChangeKey.oldKey`).
  public static let old = NSKeyValueObservingOptions(rawValue: 0x02)
  /// A notification is sent at once, before the registration returns (with the value as new).
  public static let initial = NSKeyValueObservingOptions(rawValue: 0x04)
  /// A notification is sent before each change as well as after it (`notificationIsPriorKey`).
  public static let prior = NSKeyValueObservingOptions(rawValue: 0x08)
}

/// The kind of a change, as Foundation's `NSKeyValueChange` (the properties observed here are
/// only ever set).
public enum NSKeyValueChange: UInt, Sendable {
  /// The value was set.
  case setting = 1
  /// Objects were inserted into a to-many relationship.
  case insertion = 2
  /// Objects were removed from a to-many relationship.
  case removal = 3
  /// Objects of a to-many relationship were replaced.
  case replacement = 4
}

/// A key of a change dictionary, as Foundation's `NSKeyValueChangeKey`.
public struct NSKeyValueChangeKey: RawRepresentable, Hashable, Sendable {
  /// The key's string, as Foundation's.
  public let rawValue: String

  /// The key `rawValue`.
  public init(rawValue: String) { self.rawValue = rawValue }

  /// The key `rawValue`.
  public init(_ rawValue: String) { self.rawValue = rawValue }

  /// The kind of change: an `NSNumber` of an `NSKeyValueChange`'s raw value.
  public static let kindKey = NSKeyValueChangeKey("kind")
  /// The new value (`NSNull` for nil), with `.new`.
  public static let newKey = NSKeyValueChangeKey("new")
  /// The old value (`NSNull` for nil), with `.old`.
  public static let oldKey = NSKeyValueChangeKey("old")
  /// The indexes of a to-many change (never here: the properties observed are set).
  public static let indexesKey = NSKeyValueChangeKey("indexes")
  /// `true` in the notification sent before a change, with `.prior`.
  public static let notificationIsPriorKey = NSKeyValueChangeKey("notificationIsPrior")
}

/// A change as `observe(_:options:changeHandler:)` hands it, as Foundation's
/// `NSKeyValueObservedChange`: the values typed.
public struct NSKeyValueObservedChange<Value> {
  /// The kind of change.
  public typealias Kind = NSKeyValueChange
  /// The kind of change (`.setting`).
  public let kind: Kind
  /// The new value, with `.new` (and not before the change).
  public let newValue: Value?
  /// The old value, with `.old`.
  public let oldValue: Value?
  /// The indexes of a to-many change (nil here).
  public let indexes: IndexSet?
  /// Whether this is the notification sent before the change, with `.prior`.
  public let isPrior: Bool
}

extension NSKeyValueObservedChange: Sendable where Value: Sendable {}

/// What an observer registered with `addObserver(_:forKeyPath:options:context:)` adopts to hear
/// of changes: Foundation's `NSObject` method, which Swift on Linux cannot let a class override,
/// made a protocol. A port adds it to the observer's class and drops `override` (and any
/// `super.observeValue` call); a `UIResponder` subclass needs neither change.
public protocol NSKeyValueObserving: AnyObject {
  /// Called when the value at `keyPath` of `object` changed, on the thread that changed it.
  func observeValue(
    forKeyPath keyPath: String?, of object: Any?, change: [NSKeyValueChangeKey: Any]?,
    context: UnsafeMutableRawPointer?)
}

/// An observation made by `observe(_:options:changeHandler:)`, as Foundation's: it ends when
/// invalidated or released.
public class NSKeyValueObservation: NSObject, @unchecked Sendable {
  // @unchecked: immutable; the registration it ends lives in the observed object's observers.
  private let observers: KeyValueObservers
  private let registration: Int

  init(observers: KeyValueObservers, registration: Int) {
    self.observers = observers
    self.registration = registration
  }

  /// Ends the observation: its handler is not called again (calling it twice does nothing).
  public func invalidate() { observers.remove(registration) }

  deinit { invalidate() }
}

/// The types `observe(_:options:changeHandler:)` is declared for, as Foundation's (here a task and
/// a progress, whose changes ProtFSKit makes).
public protocol _KeyValueCodingAndObserving {}
