import CProtFSSys

/// A lock in one 32-bit word the caller owns, on the kernel's priority-inheriting futexes
/// (CProtFSFutex.h): 0 when free, else its owner's thread id. Uncontended, taking and giving it
/// back stay in the process; a free word may be copied and moved. ProtFSKit's `os_unfair_lock` is
/// this word.
///
/// Each call returns 0 or an errno value (a futex call that fails reports its own errno, which is
/// all there is to read: no `valueOrErrno`).
package enum FutexLock {
  /// Takes the lock at `word`, waiting while another thread holds it: 0, or `EDEADLK` when this
  /// thread holds it already.
  package static func lock(_ word: UnsafeMutablePointer<UInt32>) -> Int32 { protfs_futex_lock(word) }

  /// Takes the lock at `word` if it is free: 0, else `EBUSY`.
  package static func tryLock(_ word: UnsafeMutablePointer<UInt32>) -> Int32 { protfs_futex_trylock(word) }

  /// Gives the lock at `word` back (to its first waiter, if any): 0, or `EPERM` when this thread
  /// does not hold it.
  package static func unlock(_ word: UnsafeMutablePointer<UInt32>) -> Int32 { protfs_futex_unlock(word) }

  /// Whether this thread holds the lock at `word`.
  package static func isOwned(_ word: UnsafePointer<UInt32>) -> Bool { protfs_futex_owned(word) == 1 }
}
