import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem

/// `download` in the foreground: the transfers run in this process, their progress printed.
extension DownloadCommand {
  /// Resumes `tasks`, shows their progress in `mode` until every one settles (a failure's remedy
  /// spelled by `spelling`), then ends the session's event stream once everything it held is
  /// printed. Returns the state each task settled in.
  package static func runInForeground(
    _ tasks: [DownloadTask], of session: DownloadSession, progress mode: String, spelling: CommandSpelling
  )
    -> [Int64: DownloadState]
  {
    var given: [DownloadTask]? = tasks
    // Cannot throw: the only chunk is given.
    let result = try? runInForeground(of: session, progress: mode, spelling: spelling) { () throws(ProtFSError) in
      defer { given = nil }
      return given
    }
    return result?.outcome ?? [:]
  }

  /// As `runInForeground(_:of:progress:)`, with the tasks coming from `next` a chunk at a time
  /// (nil when there are no more); each chunk starts as soon as it comes. When `next` throws, the
  /// tasks already started are still waited for before the error is passed on.
  package static func runInForeground(
    of session: DownloadSession, progress mode: String, spelling: CommandSpelling,
    _ next: () throws(ProtFSError) -> [DownloadTask]?
  ) throws(ProtFSError) -> (tasks: [DownloadTask], outcome: [Int64: DownloadState]) {
    let progress = ProgressPrinter(mode: mode, spelling: spelling)
    // Without output nobody reads the events, and the session makes none.
    var printer: Task<Void, Never>?
    if !progress.isSilent {
      let events = session.events
      printer = Task.detached { for await event in events { progress.handle(event) } }
    }
    var tasks: [DownloadTask] = []
    var failure: ProtFSError?
    do {
      while let chunk = try next() {
        progress.begin(chunk)
        for task in chunk { task.resume() }
        tasks += chunk
      }
    } catch {
      failure = error
    }
    // On this plain thread, so that `Console` output stays in order and no executor is blocked.
    let outcome = DownloadTask.waitUntilAllSettled(tasks)
    drain(session, printer)
    progress.finish()
    if let failure { throw failure }
    return (tasks, outcome)
  }

  /// Ends the session's event stream and waits until every event it held has been printed.
  package static func drain(_ session: DownloadSession, _ printer: Task<Void, Never>?) {
    session.invalidate()
    guard let printer else { return }
    let done = DispatchSemaphore(value: 0)
    Task.detached {
      await printer.value
      done.signal()
    }
    done.wait()
  }

  /// Prints what became of each of `tasks` (each settled in `outcome`, else in its own state),
  /// and with `--json` the whole run with the URLs `rejected`. Returns the exit status.
  static func report(
    _ tasks: [DownloadTask], outcome: [Int64: DownloadState], rejected: [Rejected], progress mode: String,
    _ invocation: Invocation
  ) throws -> Int32 {
    let json = invocation.flag(CommonOptions.json)
    var failed = !rejected.isEmpty
    var waiting = false
    var outcomes: [TaskOutcome] = []
    for task in tasks {
      let state = outcome[task.id] ?? task.state
      outcomes.append(TaskOutcome(task, state: state, spelling: invocation.spelling))
      switch state {
      case .completed:
        if let original = task.renamedFrom {
          Console.err(
            "note: \(task.url.absoluteString) was saved as '\(task.record.fileName ?? "")': another download of this run already wrote '\(original)'."
          )
        }
        if mode != "json" && !json { Console.out(task.record.destinationPath ?? "") }
      case .waitingForUnlock:
        waiting = true
        Console.err(
          "note: \(task.url.absoluteString) finished; it waits for \(invocation.spelling.command("unlock")) to move it to \(task.record.destinationPath ?? "its destination")."
        )
      default:
        failed = true
        Console.err(
          "Error: \(task.error.map(invocation.describe) ?? "the download of \(task.url.absoluteString) did not finish.")"
        )
      }
    }
    if json { try Console.json(Outcome(tasks: outcomes, rejected: rejected)) }
    return failed ? exitFailed : waiting ? exitWaitingForUnlock : exitCompleted
  }

  /// What `download --json` prints once every task settled.
  struct Outcome: Encodable {
    /// Every task of the run, in the order of its URLs.
    var tasks: [TaskOutcome]
    /// The URLs that did not become tasks.
    var rejected: [Rejected]
  }
}
