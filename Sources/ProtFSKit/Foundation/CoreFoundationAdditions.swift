import Foundation

// What iOS code gets from Foundation through CoreFoundation and the Objective-C runtime and
// Foundation on Linux does not declare: the absolute-time clock download managers measure speed
// with, autorelease pools, and `objc_sync_enter` (`@synchronized`).

/// A time interval in seconds, as CoreFoundation's `CFTimeInterval`.
public typealias CFTimeInterval = Double
/// A moment in seconds since 1 January 2001 00:00:00 UTC, as CoreFoundation's `CFAbsoluteTime`.
public typealias CFAbsoluteTime = CFTimeInterval

/// The current moment, as CoreFoundation's `CFAbsoluteTimeGetCurrent()`: the system clock, in
/// seconds since 1 January 2001 (`Date().timeIntervalSinceReferenceDate`).
public func CFAbsoluteTimeGetCurrent() -> CFAbsoluteTime { Date().timeIntervalSinceReferenceDate }

/// Runs `body`, as Foundation's `autoreleasepool(invoking:)`: there are no autorelease pools
/// without the Objective-C runtime (what `body` lets go is released at once), so it only runs it.
public func autoreleasepool<Result>(invoking body: () throws -> Result) rethrows -> Result {
  try body()
}

/// `objc_sync_enter` and `objc_sync_exit` succeeded.
public let OBJC_SYNC_SUCCESS: Int32 = 0
/// `objc_sync_exit` was called by a thread that had not entered.
public let OBJC_SYNC_NOT_OWNING_THREAD_ERROR: Int32 = -1

/// Enters the recursive lock of `obj`, as the Objective-C runtime's `objc_sync_enter` (what
/// `@synchronized` compiles to): a thread waits while another is inside, and may enter again.
/// The lock is kept with `obj` as an associated object; a value that is not an object has none
/// to keep, so nothing is locked, as its box on Apple's platforms is a new object each time.
/// Returns `OBJC_SYNC_SUCCESS`.
@discardableResult
public func objc_sync_enter(_ obj: Any) -> Int32 {
  SyncLock.of(obj)?.lock()
  return OBJC_SYNC_SUCCESS
}

/// Leaves the lock of `obj` once; `OBJC_SYNC_NOT_OWNING_THREAD_ERROR` when this thread is not
/// inside it.
@discardableResult
public func objc_sync_exit(_ obj: Any) -> Int32 {
  guard let lock = SyncLock.of(obj, creating: false), lock.unlock() else { return OBJC_SYNC_NOT_OWNING_THREAD_ERROR }
  return OBJC_SYNC_SUCCESS
}

/// The recursive lock `objc_sync_enter` keeps for an object: a pthread mutex that knows its owner,
/// so that an exit by another thread is refused, not obeyed.
///
/// `@unchecked Sendable`: the mutex is what makes it safe.
final class SyncLock: @unchecked Sendable {
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

  init() {
    var attributes = pthread_mutexattr_t()
    pthread_mutexattr_init(&attributes)
    pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
    pthread_mutex_init(mutex, &attributes)
    pthread_mutexattr_destroy(&attributes)
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Enters, waiting while another thread is inside.
  func lock() { pthread_mutex_lock(mutex) }

  /// Leaves once; false when this thread is not inside (`EPERM`).
  func unlock() -> Bool { pthread_mutex_unlock(mutex) == 0 }

  /// The key of the lock among an object's associated objects: an address of its own, never
  /// written through (`nonisolated(unsafe)`: only the address is used).
  private nonisolated(unsafe) static let key = UnsafeRawPointer(
    UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1))
  /// Makes a lock and keeps it with its object at once, so that two threads get the same one.
  private static let making = NSLock()

  /// `obj`'s lock: made and kept with it when there is none and `creating`; nil for a value that
  /// is not an object.
  static func of(_ obj: Any, creating: Bool = true) -> SyncLock? {
    guard type(of: obj) is AnyClass else { return nil }
    if let lock = objc_getAssociatedObject(obj, key) as? SyncLock { return lock }
    guard creating else { return nil }
    making.lock()
    defer { making.unlock() }
    if let lock = objc_getAssociatedObject(obj, key) as? SyncLock { return lock }
    let lock = SyncLock()
    objc_setAssociatedObject(obj, key, lock, .OBJC_ASSOCIATION_RETAIN)
    return lock
  }
}
