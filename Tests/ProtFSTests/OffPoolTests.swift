import Dispatch
import ProtFSTestSupport
import Synchronization
import Testing

/// The tests' way of waiting for a process or a pipe without holding one of the threads Swift
/// concurrency shares between all running tests.
@Suite struct OffPoolTests {
  /// Blocking bodies handed to `offPool` run at once, however many there are: each waits here
  /// until all have started, which on a pool as wide as the machine (Swift's, or Dispatch's global
  /// queues, which grow by about a thread a second) would take far longer than the wait allows.
  @Test func everyBlockingBodyRunsAtOnce() async {
    let barrier = Barrier(count: 16)
    let met = await withTaskGroup(of: Bool.self) { group in
      for _ in 0..<barrier.count {
        group.addTask { await offPool { barrier.arriveAndWait(seconds: 5) } }
      }
      return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
    }
    #expect(met == barrier.count, "only \(met) of \(barrier.count) blocking bodies ran at the same time")
  }
}

/// `count` threads meet here: each waits until all have arrived.
private final class Barrier: Sendable {
  let count: Int
  private let arrived = Mutex(0)
  private let everyone = DispatchSemaphore(value: 0)

  init(count: Int) { self.count = count }

  /// Arrives, and waits at most `seconds` for the others; whether they all came.
  func arriveAndWait(seconds: Int) -> Bool {
    let last = arrived.withLock { n -> Bool in
      n += 1
      return n == count
    }
    if last { for _ in 0..<count { everyone.signal() } }
    return everyone.wait(timeout: .now() + .seconds(seconds)) == .success
  }
}
