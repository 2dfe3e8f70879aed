import Foundation
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// A Ctrl-C (SIGINT) or SIGTERM while `download` or `tasks resume` transfers in the foreground:
/// the transfers stop and their tasks are recorded as interrupted (`DownloadSession.interrupt()`),
/// so that `tasks`, `cache ls` and `sessions` do not show them running with no process behind
/// them; the command then says how to go on and exits as the signal would have (130, 143).
///
/// A second signal while the first is handled ends the process at once.
package final class TransferInterruption: Sendable {
  /// The signal caught first, 0 before any.
  private let caught = Atomic<Int32>(0)
  /// The tasks the signal stopped while they ran, once the session recorded them.
  private let stopped = Mutex<[DownloadTaskRecord]>([])
  /// Signalled once the session is stopped and `stopped` is set.
  private let recorded = DispatchSemaphore(value: 0)

  private init() {}

  /// Catches SIGINT and SIGTERM from now on: the first stops `session`.
  package static func catching(_ session: DownloadSession) throws -> TransferInterruption {
    let interruption = TransferInterruption()
    try SignalForwarding.forward([SIGINT, SIGTERM]) { signal in
      guard
        interruption.caught.compareExchange(expected: 0, desired: signal, ordering: .acquiringAndReleasing).exchanged
      else {
        // Asked again while stopping: the user does not want to wait.
        Kernel._exit(128 + signal)
      }
      let records = session.interrupt()
      interruption.stopped.withLock { $0 = records }
      interruption.recorded.signal()
    }
    return interruption
  }

  /// The signal that interrupted the transfers, if one did; once it did, its tasks are recorded.
  package var signal: Int32? {
    let signal = caught.load(ordering: .acquiring)
    guard signal != 0 else { return nil }
    // The session is being stopped on the signal's thread: its tasks are recorded when it is.
    recorded.wait()
    recorded.signal()
    return signal
  }

  /// Says on standard error, in one line, what the signal stopped and the command that goes on
  /// with it (spelled by `spelling`); returns the exit status, 128 + the signal.
  package func report(_ signal: Int32, spelling: CommandSpelling) -> Int32 {
    let tasks = stopped.withLock { $0 }
    let name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)"
    if let task = tasks.first, tasks.count == 1 {
      let expected = task.bytesExpected < 0 ? "" : " of \(ByteSize.format(task.bytesExpected))"
      Console.err(
        "Interrupted (\(name)) download task \(task.id) (\(task.url)) at \(ByteSize.format(task.bytesReceived))\(expected); \(spelling.command("tasks resume \(task.id)")) goes on from there."
      )
    } else if !tasks.isEmpty {
      let ids = tasks.map { String($0.id) }.joined(separator: ", ")
      Console.err(
        "Interrupted (\(name)) download tasks \(ids); the same command again goes on with them, as \(spelling.command("tasks resume ID")) does with one."
      )
    } else {
      Console.err("Interrupted (\(name)) before a transfer ran; the same command again starts the downloads.")
    }
    return 128 + signal
  }
}
