import Foundation
import ProtFSKit
import Synchronization
import Testing

/// CoreFoundation's clock, autorelease pools and `objc_sync_enter`, as iOS code uses them.
@Suite(.timeLimit(.minutes(1))) struct CoreFoundationAdditionsTests {
  /// A download's speed as download managers measure it: seconds since 2001 on the system clock.
  @Test func theAbsoluteTimeIsSecondsSince2001() {
    let before = Date().timeIntervalSinceReferenceDate
    let now: CFAbsoluteTime = CFAbsoluteTimeGetCurrent()
    let after = Date().timeIntervalSinceReferenceDate
    #expect(before <= now && now <= after)
    let elapsed: CFTimeInterval = CFAbsoluteTimeGetCurrent() - now
    #expect(elapsed >= 0)
  }

  /// An autorelease pool runs its body, returns what it returns and passes on what it throws.
  @Test func anAutoreleasePoolRunsItsBody() {
    #expect(autoreleasepool { 42 } == 42)
    #expect(throws: CocoaError.self) { try autoreleasepool { throw CocoaError(.fileNoSuchFile) } }
  }

  /// A counter kept by `@synchronized`-style code.
  final class Counter: @unchecked Sendable {
    var value = 0
  }

  /// `objc_sync_enter` excludes other threads, lets its own enter again, and an exit by a thread
  /// that is not inside is refused.
  @Test func objcSyncExcludesOtherThreadsAndIsRecursive() {
    let counter = Counter()
    DispatchQueue.concurrentPerform(iterations: 4) { _ in
      for round in 0..<5_000 {
        objc_sync_enter(counter)
        objc_sync_enter(counter)
        let seen = counter.value
        if round % 250 == 0 { sched_yield() }
        counter.value = seen + 1
        objc_sync_exit(counter)
        objc_sync_exit(counter)
      }
    }
    #expect(counter.value == 20_000)

    #expect(objc_sync_exit(NSObject()) == OBJC_SYNC_NOT_OWNING_THREAD_ERROR)
    #expect(objc_sync_enter(counter) == OBJC_SYNC_SUCCESS)
    let elsewhere = Mutex<Int32>(0)
    let done = DispatchSemaphore(value: 0)
    Thread {
      elsewhere.withLock { $0 = objc_sync_exit(counter) }
      done.signal()
    }.start()
    done.wait()
    #expect(elsewhere.withLock { $0 } == OBJC_SYNC_NOT_OWNING_THREAD_ERROR)
    #expect(objc_sync_exit(counter) == OBJC_SYNC_SUCCESS)
  }
}
