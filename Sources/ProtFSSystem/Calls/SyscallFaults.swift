#if DEBUG
  import Foundation
  import Synchronization

  /// Debug builds only: makes the next calls of chosen system calls fail with a chosen errno, so
  /// that tests reach the error paths (swift-system's and NIOFS's syscall mocking).
  ///
  /// `valueOrErrno` asks `take(_:)` before each attempt of a named call (`Syscall`); an injected
  /// errno is then handled exactly as the kernel's would be (EINTR retried, anything else
  /// returned), without the call being made.
  ///
  /// Scope: a thread. A test makes a `SyscallFaults`, plans failures with `fail(_:with:times:)`
  /// and runs the code under test inside `during(_:)`, which installs the plan in a thread-local
  /// slot for the closure's duration; tests running in parallel on other threads never see it.
  /// (A task-local would not do: the walkers run their work on threads of their own, which task
  /// locals do not reach, and a thread-local is what a syscall wrapper can read without an async
  /// context.) Code that hands work to other threads propagates explicitly: it captures `current`
  /// on the spawning thread and runs each worker inside `during(_:)` of the same instance, which
  /// is safe to share. `during(_:)` wraps synchronous code only: an `await` inside it could resume
  /// on another thread.
  ///
  /// Release builds compile none of this, and `valueOrErrno` ignores the name there.
  package final class SyscallFaults: Sendable {
    /// The errnos still to inject, per call, the next one first (0: let that call through).
    private let planned = Mutex<[Syscall: [Int32]]>([:])
    /// How many failures were injected, per call.
    private let injected = Mutex<[Syscall: Int]>([:])

    /// An empty plan: nothing fails until `fail(_:with:times:)` says so.
    package init() {}

    /// Makes the next `times` calls of `call` fail with `errno` (after any failures planned before).
    package func fail(_ call: Syscall, with errno: Int32, times: Int = 1) {
      planned.withLock { $0[call, default: []] += Array(repeating: errno, count: times) }
    }

    /// Lets the next `times` calls of `call` through (after anything planned before), so that a
    /// failure planned after them reaches a later call.
    package func pass(_ call: Syscall, times: Int) {
      planned.withLock { $0[call, default: []] += Array(repeating: 0, count: times) }
    }

    /// How many failures planned for `call` were not injected yet.
    package func remaining(_ call: Syscall) -> Int { planned.withLock { $0[call]?.count { $0 != 0 } ?? 0 } }

    /// How many failures were injected into `call`.
    package func injectedCount(_ call: Syscall) -> Int { injected.withLock { $0[call] ?? 0 } }

    /// Runs `body` with this plan installed on the current thread (restoring whatever was there).
    package func during<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
      let previous = pthread_getspecific(Self.key)
      pthread_setspecific(Self.key, Unmanaged.passUnretained(self).toOpaque())
      defer { pthread_setspecific(Self.key, previous) }
      return try withExtendedLifetime(self) { () throws(E) -> R in try body() }
    }

    /// The plan installed on the current thread, to hand to threads it spawns.
    package static var current: SyscallFaults? {
      pthread_getspecific(key).map { Unmanaged<SyscallFaults>.fromOpaque($0).takeUnretainedValue() }
    }

    /// The errno to inject into this attempt of `call`, if the current thread's plan has one.
    static func take(_ call: Syscall) -> Int32? {
      guard let faults = current else { return nil }
      let errno: Int32? = faults.planned.withLock { planned in
        guard var queue = planned[call], !queue.isEmpty else { return nil }
        let next = queue.removeFirst()
        planned[call] = queue
        return next
      }
      guard let errno, errno != 0 else { return nil }
      faults.injected.withLock { $0[call, default: 0] += 1 }
      return errno
    }

    /// The thread-local slot holding the installed plan (unretained: `during` keeps it alive).
    private static let key: pthread_key_t = {
      var key = pthread_key_t()
      let status = pthread_key_create(&key, nil)
      precondition(status == 0, "pthread_key_create failed: \(status)")
      return key
    }()
  }
#endif
