import Foundation
import Synchronization

// The Objective-C runtime's associated objects, `import ObjectiveC` becoming `import ProtFSKit`:
// a value kept for an object under a key, as extensions use them for stored properties. Swift on
// Linux has no Objective-C runtime to keep them in the object, so a side table keeps them, by the
// object's identity, with a weak reference that tells a live object from one that ended.

/// How an associated value is held, as the Objective-C runtime's `objc_AssociationPolicy`.
public enum objc_AssociationPolicy: UInt, Sendable {
  /// Not retained: the value is held weakly, so it reads as nil once it ended (on Apple's
  /// platforms it would dangle). A value that is not an object is kept as it is.
  case OBJC_ASSOCIATION_ASSIGN = 0
  /// Retained.
  case OBJC_ASSOCIATION_RETAIN_NONATOMIC = 1
  /// Copied (`copy()` of an `NSCopying` value; a Swift value is a copy already).
  case OBJC_ASSOCIATION_COPY_NONATOMIC = 3
  /// Retained (every association is set and read under one lock).
  case OBJC_ASSOCIATION_RETAIN = 769
  /// Copied.
  case OBJC_ASSOCIATION_COPY = 771
}

/// Keeps `value` for `object` under `key` (the address of a variable of the app's, `&key`), held as
/// `policy` says, in place of what was there; nil removes it. The value is released after the
/// object ends: within about a second (on Apple's platforms, as it ends). An object that is not an
/// instance of a class (a struct passed as `Any`) keeps nothing, as its box on Apple's platforms
/// ends at once.
public func objc_setAssociatedObject(
  _ object: Any, _ key: UnsafeRawPointer, _ value: Any?, _ policy: objc_AssociationPolicy
) {
  guard type(of: object) is AnyClass else { return }
  let owner = object as AnyObject
  let held = value.map { AssociatedValue($0, policy) }
  // What is replaced is released here, after the lock is given back: a deinit may use associations.
  let released = Associations.table.withLock { $0.set(held, for: owner, key: key) }
  withExtendedLifetime(released) {}
  Associations.scheduleSweep()
}

/// The value kept for `object` under `key`, or nil.
public func objc_getAssociatedObject(_ object: Any, _ key: UnsafeRawPointer) -> Any? {
  guard type(of: object) is AnyClass else { return nil }
  let owner = object as AnyObject
  return Associations.table.withLock { $0.value(of: owner, key: key) }?.value
}

/// Removes every value kept for `object`.
public func objc_removeAssociatedObjects(_ object: Any) {
  guard type(of: object) is AnyClass else { return }
  let owner = object as AnyObject
  let released = Associations.table.withLock { $0.removeAll(of: owner) }
  withExtendedLifetime(released) {}
}

/// A value as its policy holds it.
///
/// `@unchecked Sendable`: the app's values, which it hands over and gets back as on Apple's
/// platforms; the table only keeps them.
private enum AssociatedValue: @unchecked Sendable {
  /// Retained (or copied first).
  case strong(Any)
  /// Not retained (`OBJC_ASSOCIATION_ASSIGN`).
  case weak(WeakReference)

  /// `value` held as `policy` says.
  init(_ value: Any, _ policy: objc_AssociationPolicy) {
    switch policy {
    case .OBJC_ASSOCIATION_ASSIGN where type(of: value) is AnyClass:
      self = .weak(WeakReference(value as AnyObject))
    case .OBJC_ASSOCIATION_COPY, .OBJC_ASSOCIATION_COPY_NONATOMIC:
      self = .strong((value as? NSCopying)?.copy(with: nil) ?? value)
    default:
      self = .strong(value)
    }
  }

  /// The value, or nil when it was held weakly and ended.
  var value: Any? {
    switch self {
    case .strong(let value): value
    case .weak(let reference): reference.object
    }
  }
}

/// A weak reference, as a value.
private struct WeakReference {
  weak var object: AnyObject?
  init(_ object: AnyObject) { self.object = object }
}

/// The associations of one object.
private struct Associated {
  /// The object, weakly: nil once it ended (its identity may then be another object's).
  weak var owner: AnyObject?
  /// Its values by key.
  var values: [UnsafeRawPointer: AssociatedValue] = [:]
}

/// What a change of the table lets go, to be released once the lock is given back.
///
/// `@unchecked Sendable`: the app's values (see `AssociatedValue`), only carried out of the lock.
private struct Released: @unchecked Sendable {
  var items: [Any] = []
  mutating func append(_ item: Any) { items.append(item) }
  mutating func append(_ other: Released) { items += other.items }
}

/// Every object's associations, by identity.
///
/// `@unchecked Sendable`: it keeps the app's values (see `AssociatedValue`), under the lock alone.
private struct AssociationTable: @unchecked Sendable {
  var objects: [ObjectIdentifier: Associated] = [:]
  /// The size at which the next `set` sweeps out the objects that ended (twice the live ones after
  /// the last sweep): sweeping costs a visit of every object, so it is amortised.
  var sweepAt = 64
  /// Whether a timed sweep is on its way.
  var sweepScheduled = false

  /// Sets (or, with nil, removes) `owner`'s value for `key`; returns what is to be released.
  mutating func set(_ held: AssociatedValue?, for owner: AnyObject, key: UnsafeRawPointer) -> Released {
    var released = Released()
    let id = ObjectIdentifier(owner)
    var entry = objects[id] ?? Associated(owner: owner)
    if entry.owner !== owner {
      // An object that ended had this identity: its values go now.
      released.append(entry.values)
      entry = Associated(owner: owner)
    }
    if let previous = entry.values[key] { released.append(previous) }
    entry.values[key] = held
    objects[id] = entry.values.isEmpty ? nil : entry
    if objects.count >= sweepAt {
      released.append(sweep())
      sweepAt = max(64, 2 * objects.count)
    }
    return released
  }

  /// `owner`'s value for `key`.
  func value(of owner: AnyObject, key: UnsafeRawPointer) -> AssociatedValue? {
    guard let entry = objects[ObjectIdentifier(owner)], entry.owner === owner else { return nil }
    return entry.values[key]
  }

  /// Removes all of `owner`'s values; returns them, to be released.
  mutating func removeAll(of owner: AnyObject) -> Released {
    var released = Released()
    if let entry = objects.removeValue(forKey: ObjectIdentifier(owner)) { released.append(entry.values) }
    return released
  }

  /// Removes the objects that ended; returns their values and the owners the sweep held for a
  /// moment (an owner whose last reference another thread dropped meanwhile ends when the caller
  /// lets it go, outside the lock, since its deinit may use associations).
  mutating func sweep() -> Released {
    var released = Released()
    for (id, entry) in objects {
      if let owner = entry.owner {
        released.append(owner)
      } else {
        released.append(entry.values)
        objects[id] = nil
      }
    }
    return released
  }
}

/// The process's association table and its timed sweep.
private enum Associations {
  /// The table.
  static let table = Mutex(AssociationTable())

  /// Sweeps in a second, unless a sweep is on its way, and again after that while objects have
  /// associations: the values of an object that ended are released within about a second.
  static func scheduleSweep() {
    let schedule = table.withLock { associations -> Bool in
      guard !associations.sweepScheduled, !associations.objects.isEmpty else { return false }
      associations.sweepScheduled = true
      return true
    }
    guard schedule else { return }
    DispatchQueue.global(qos: .utility).asyncAfter(deadline: .now() + 1) {
      let released = table.withLock { associations -> Released in
        associations.sweepScheduled = false
        return associations.sweep()
      }
      withExtendedLifetime(released) {}
      scheduleSweep()
    }
  }
}
