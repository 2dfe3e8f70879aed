import Foundation
import ProtFSKit
import ProtFSSystem
import Synchronization
import Testing

/// `os_unfair_lock` as Alamofire's `UnfairLock` uses it: mutual exclusion between contending
/// threads, `trylock` that does not wait, ownership, and a free lock that moves as a value.
@Suite(.timeLimit(.minutes(1))) struct UnfairLockTests {
  /// Alamofire's `UnfairLock`, as it is written for iOS.
  final class UnfairLock: @unchecked Sendable {
    private let unfairLock: os_unfair_lock_t

    init() {
      unfairLock = .allocate(capacity: 1)
      unfairLock.initialize(to: os_unfair_lock())
    }

    deinit {
      unfairLock.deinitialize(count: 1)
      unfairLock.deallocate()
    }

    func around<T>(_ closure: () throws -> T) rethrows -> T {
      os_unfair_lock_lock(unfairLock)
      defer { os_unfair_lock_unlock(unfairLock) }
      return try closure()
    }

    func tryLock() -> Bool { os_unfair_lock_trylock(unfairLock) }
    func unlock() { os_unfair_lock_unlock(unfairLock) }
    func assertOwner() { os_unfair_lock_assert_owner(unfairLock) }
    func assertNotOwner() { os_unfair_lock_assert_not_owner(unfairLock) }
    var word: UInt32 { unfairLock.pointee._os_unfair_lock_opaque }
  }

  /// A counter read and written in two steps, with a yield between them: without mutual exclusion
  /// the threads' increments overwrite each other.
  final class Counter: @unchecked Sendable {
    var value = 0
  }

  /// Four threads, each adding 1 twenty thousand times under the lock, with the processor given up
  /// in the middle so that the others wait on the lock in the kernel: no increment is lost.
  @Test func contendingThreadsExcludeEachOther() {
    let lock = UnfairLock()
    let counter = Counter()
    let threads = 4
    let rounds = 20_000
    DispatchQueue.concurrentPerform(iterations: threads) { _ in
      for round in 0..<rounds {
        lock.around {
          let seen = counter.value
          if round % 500 == 0 { sched_yield() }
          counter.value = seen + 1
        }
      }
    }
    #expect(counter.value == threads * rounds)
    #expect(lock.word == 0)
  }

  /// What `body` returns, run on a thread of its own (a task may run on the thread that awaits it).
  static func onAnotherThread<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
    let result = Mutex<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    Thread {
      let value = body()
      result.withLock { $0 = value }
      done.signal()
    }.start()
    done.wait()
    return result.withLock { $0 }!
  }

  /// `trylock` takes a free lock, does not wait for a held one, and ownership is this thread's.
  @Test func tryLockDoesNotWaitAndOwnershipIsTheThreads() {
    let lock = UnfairLock()
    lock.assertNotOwner()
    #expect(lock.tryLock())
    lock.assertOwner()
    #expect(lock.word != 0)
    let elsewhere = Self.onAnotherThread {
      // Another thread: it cannot take the lock, and does not hold it.
      let taken = lock.tryLock()
      lock.assertNotOwner()
      return taken
    }
    #expect(!elsewhere)
    lock.unlock()
    #expect(lock.word == 0)
    let afterwards = Self.onAnotherThread { () -> Bool in
      guard lock.tryLock() else { return false }
      lock.unlock()
      return true
    }
    #expect(afterwards)
  }

  /// A waiting thread gets the lock when its owner gives it back.
  @Test func aWaiterGetsTheLockWhenItIsGivenBack() {
    let lock = UnfairLock()
    let holding = DispatchSemaphore(value: 0)
    let release = DispatchSemaphore(value: 0)
    let order = Mutex<[String]>([])
    let owner = Thread {
      lock.around {
        holding.signal()
        release.wait()
        order.withLock { $0.append("owner") }
      }
    }
    owner.start()
    holding.wait()
    let waiter = DispatchSemaphore(value: 0)
    Thread {
      lock.around { order.withLock { $0.append("waiter") } }
      waiter.signal()
    }.start()
    #expect(!lock.tryLock())
    release.signal()
    waiter.wait()
    #expect(order.withLock { $0 } == ["owner", "waiter"])
  }

  /// A lock kept in a `var` and passed with `&`, as much iOS code writes it, and a free lock copied
  /// to another place: each place is a lock of its own.
  @Test func aFreeLockIsAValueThatMoves() {
    var lock = os_unfair_lock()
    os_unfair_lock_lock(&lock)
    os_unfair_lock_assert_owner(&lock)
    os_unfair_lock_unlock(&lock)
    let moved = os_unfair_lock_t.allocate(capacity: 1)
    defer { moved.deallocate() }
    moved.initialize(to: lock)
    #expect(os_unfair_lock_trylock(moved))
    os_unfair_lock_assert_not_owner(&lock)
    #expect(os_unfair_lock_trylock(&lock))
    os_unfair_lock_unlock(&lock)
    os_unfair_lock_unlock(moved)
  }

  /// What os_unfair_lock_unlock stops the app for, underneath: a thread that does not hold the lock
  /// cannot give it back, and a thread that holds it cannot take it again.
  @Test func onlyTheOwnerGivesTheLockBack() {
    let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
    defer { word.deallocate() }
    word.initialize(to: 0)
    #expect(FutexLock.unlock(word) == EPERM)
    #expect(FutexLock.lock(word) == 0)
    #expect(FutexLock.lock(word) == EDEADLK)
    nonisolated(unsafe) let shared = word
    let unlockedElsewhere = Self.onAnotherThread { FutexLock.unlock(shared) }
    #expect(unlockedElsewhere == EPERM)
    #expect(FutexLock.unlock(word) == 0)
    #expect(word.pointee == 0)
  }
}
