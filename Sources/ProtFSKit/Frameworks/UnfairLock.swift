import Foundation
import ProtFSSystem

// The `os` module's unfair lock, `import os` becoming `import ProtFSKit`, as Alamofire's
// `UnfairLock` and its many copies use it: a lock of one 32-bit word, on the kernel's
// priority-inheriting futexes (`FutexLock`).

/// A lock, as the `os` module's `os_unfair_lock`: one word, 0 when free, else its owner's thread
/// id. Threads that wait sleep in the kernel and lend the owner their priority, as on Apple's
/// platforms; the lock is not fair (a thread that gives it back may take it again first). A free
/// lock is plain memory, so it may be copied and moved; a held one must stay where it is, as on
/// Apple's platforms.
public struct os_unfair_lock_s: Sendable {
  /// The word: 0 when free, else its owner's thread id and the kernel's waiters bit.
  public var _os_unfair_lock_opaque: UInt32

  /// A free lock (`OS_UNFAIR_LOCK_INIT`).
  public init() { _os_unfair_lock_opaque = 0 }

  /// A lock with the word `_os_unfair_lock_opaque`.
  public init(_os_unfair_lock_opaque: UInt32) { self._os_unfair_lock_opaque = _os_unfair_lock_opaque }
}

/// A lock, as the `os` module's `os_unfair_lock`.
public typealias os_unfair_lock = os_unfair_lock_s
/// Where a lock is, as `os_unfair_lock_t`: what the lock calls take.
public typealias os_unfair_lock_t = UnsafeMutablePointer<os_unfair_lock_s>

/// Takes `lock`, waiting while another thread holds it. A thread that holds it already is stopped,
/// as on Apple's platforms (the lock is not recursive).
public func os_unfair_lock_lock(_ lock: os_unfair_lock_t) {
  switch FutexLock.lock(word(lock)) {
  case 0: return
  case EDEADLK: fatalError("BUG IN CLIENT OF LIBPLATFORM: Trying to recursively lock an os_unfair_lock")
  case let error: fatalError("os_unfair_lock_lock: \(String(cString: strerror(error)))")
  }
}

/// Takes `lock` if no thread holds it; whether it did. It does not wait.
public func os_unfair_lock_trylock(_ lock: os_unfair_lock_t) -> Bool {
  FutexLock.tryLock(word(lock)) == 0
}

/// Gives `lock` back. A thread that does not hold it is stopped, as on Apple's platforms.
public func os_unfair_lock_unlock(_ lock: os_unfair_lock_t) {
  switch FutexLock.unlock(word(lock)) {
  case 0: return
  case EPERM: fatalError("BUG IN CLIENT OF LIBPLATFORM: Unlock of an os_unfair_lock not owned by current thread")
  case let error: fatalError("os_unfair_lock_unlock: \(String(cString: strerror(error)))")
  }
}

/// Returns when this thread holds `lock`; stops the app otherwise.
public func os_unfair_lock_assert_owner(_ lock: UnsafePointer<os_unfair_lock>) {
  guard FutexLock.isOwned(word(lock)) else {
    fatalError("BUG IN CLIENT OF LIBPLATFORM: Assertion failed: Lock unexpectedly not owned by current thread")
  }
}

/// Returns when this thread does not hold `lock`; stops the app otherwise.
public func os_unfair_lock_assert_not_owner(_ lock: UnsafePointer<os_unfair_lock>) {
  guard !FutexLock.isOwned(word(lock)) else {
    fatalError("BUG IN CLIENT OF LIBPLATFORM: Assertion failed: Lock unexpectedly owned by current thread")
  }
}

/// The word of the lock at `lock`: memory bound to a struct is bound to its stored property's type
/// at its offset, here 0.
private func word(_ lock: os_unfair_lock_t) -> UnsafeMutablePointer<UInt32> {
  UnsafeMutableRawPointer(lock).assumingMemoryBound(to: UInt32.self)
}

/// The word of the lock at `lock`, to read.
private func word(_ lock: UnsafePointer<os_unfair_lock>) -> UnsafePointer<UInt32> {
  UnsafeRawPointer(lock).assumingMemoryBound(to: UInt32.self)
}
