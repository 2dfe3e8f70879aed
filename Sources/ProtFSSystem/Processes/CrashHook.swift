import Synchronization

/// Counts the mutations of a transition and, when asked, kills the process right after one of
/// them: the crash tests choose the step with `PROTFS_CRASH_AFTER=N`.
public final class CrashHook: Sendable {
  /// The step after which to die, or nil to never crash.
  public let after: Int?
  private let counter = Atomic<Int>(0)

  /// A hook that kills the process with SIGKILL right after mutation number `after` (1-based).
  public init(after: Int?) { self.after = after }

  /// The hook `PROTFS_CRASH_AFTER` asks for in this process's environment (none without it).
  package static func fromEnvironment() -> CrashHook {
    CrashHook(after: ProcessEnvironment.value("PROTFS_CRASH_AFTER").flatMap { Int($0) })
  }

  /// A hook that never fires.
  public static let none = CrashHook(after: nil)

  /// How many mutations were made so far.
  public var steps: Int { counter.load(ordering: .relaxed) }

  /// Records one mutation; dies when it is the chosen one.
  package func step() {
    let count = counter.add(1, ordering: .relaxed).newValue
    if let after, count == after { Kernel.crashNow() }
  }
}
