import Foundation
import ProtFSSystem
import Synchronization

/// A program a test starts and keeps running (a service, a daemon, a server, a program on a pty),
/// with the members of Foundation's `Process` that tests use, started with `posix_spawn(3)`
/// (`PlainLaunch`).
///
/// Foundation's `Process.run()` crashed the test process (a bad read in a copy inside it) when many
/// tests started programs at once, even one start at a time; a crash there leaves every program the
/// suite started running. This type has no run loop: one spawn, and a thread that reaps the
/// process when it ends.
public final class TestProcess: @unchecked Sendable {
  /// The program (not searched for in `PATH`).
  public var executableURL: URL?
  /// Its arguments, without its name.
  public var arguments: [String]?
  /// Its environment; nil gives it this process's.
  public var environment: [String: String]?
  /// The directory it starts in; nil keeps this process's.
  public var currentDirectoryURL: URL?
  /// A `Pipe` or a `FileHandle` for its standard input; nil gives it this process's.
  public var standardInput: Any?
  /// As `standardInput`, for its standard output.
  public var standardOutput: Any?
  /// As `standardInput`, for its standard error.
  public var standardError: Any?

  private struct State {
    var pid: pid_t = 0
    /// The wait status once the process was reaped.
    var reaped: Int32?
  }
  private let state = Mutex(State())
  /// Signalled when the process has been reaped.
  private let ended = NSCondition()

  /// A process not yet started.
  public init() {}

  /// Its pid once started (0 before).
  public var processIdentifier: Int32 { state.withLock { $0.pid } }

  /// Starts the program. It leads a process group of its own (`kill(-pid, …)` reaches what it
  /// starts) and inherits no descriptor but its three standard ones.
  public func run() throws {
    guard let executableURL else { throw CocoaError(.fileNoSuchFile) }
    let path = executableURL.path
    let environment = (self.environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
    var launch = PlainLaunch(path: path, arguments: [path] + (arguments ?? []), environment: environment)
    // `FileHandle.nullDevice` has no descriptor of its own (-1): the child gets /dev/null.
    let null = open("/dev/null", O_RDWR | O_CLOEXEC)
    defer { if null >= 0 { close(null) } }
    func descriptor(_ stream: Any?, reading: Bool, otherwise: Int32) -> Int32 {
      guard let fd = Self.descriptor(stream, reading: reading) else { return otherwise }
      return fd < 0 ? null : fd
    }
    launch.input = descriptor(standardInput, reading: true, otherwise: 0)
    launch.output = descriptor(standardOutput, reading: false, otherwise: 1)
    launch.error = descriptor(standardError, reading: false, otherwise: 2)
    launch.directory = currentDirectoryURL?.path
    switch launch.start() {
    case .success(let pid):
      state.withLock { $0.pid = pid }
      reapWhenEnded(pid)
    case .failure(let error):
      throw CocoaError(
        .fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path, NSUnderlyingErrorKey: error as NSError])
    }
    // The child has its copies: a pipe's other end stays only with the child, so that a reader
    // here sees the end of the stream when the child ends.
    for (stream, reading) in [(standardInput, true), (standardOutput, false), (standardError, false)] {
      guard let pipe = stream as? Pipe else { continue }
      try? (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).close()
    }
  }

  /// As `run()`; the name tests used while `Process.run()` had to be serialized.
  public func start() throws { try run() }

  /// The descriptor the child's stream is a copy of: a pipe's end the child uses, a handle's own.
  private static func descriptor(_ stream: Any?, reading: Bool) -> Int32? {
    switch stream {
    case let pipe as Pipe: return (reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting).fileDescriptor
    case let handle as FileHandle: return handle.fileDescriptor
    default: return nil
    }
  }

  /// Reaps the process as soon as it ends, on a thread of its own, whether or not a test waits
  /// for it: a child left a zombie makes Swift Testing's exit-test monitor (a `waitid` on every
  /// child that does not reap) spin, and held the whole suite up once.
  private func reapWhenEnded(_ pid: pid_t) {
    let thread = Thread { [self] in
      // Waits without reaping, then reaps under the lock `terminate()` takes: a signal is never
      // sent to a pid already reaped, which may by then be another process's.
      var info = siginfo_t()
      while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
      ended.lock()
      state.withLock { state in
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
        state.reaped = raw
      }
      ended.broadcast()
      ended.unlock()
    }
    thread.stackSize = 64 << 10
    thread.start()
  }

  /// Whether it has started and not yet ended.
  public var isRunning: Bool {
    state.withLock { $0.pid > 0 && $0.reaped == nil }
  }

  /// Waits (blocking: from `offPool` in async code) until it has ended and was reaped.
  public func waitUntilExit() {
    guard processIdentifier > 0 else { return }
    ended.lock()
    while state.withLock({ $0.reaped == nil }) { ended.wait() }
    ended.unlock()
  }

  /// The wait status; `waitUntilExit()` first.
  private var waitStatus: Int32 {
    guard let raw = state.withLock({ $0.reaped }) else { preconditionFailure("the process has not ended") }
    return raw
  }

  /// Its exit code, or the signal that ended it.
  public var terminationStatus: Int32 {
    let raw = waitStatus
    return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
  }

  /// Whether it exited or a signal ended it.
  public var terminationReason: Process.TerminationReason {
    waitStatus & 0x7f == 0 ? .exit : .uncaughtSignal
  }

  /// Sends SIGTERM, while it runs.
  public func terminate() { signal(SIGTERM) }

  /// Sends SIGINT, while it runs.
  public func interrupt() { signal(SIGINT) }

  private func signal(_ number: Int32) {
    state.withLock { state in
      // Not once reaped: its pid may by then be another process's.
      if state.pid > 0, state.reaped == nil { kill(state.pid, number) }
    }
  }
}
