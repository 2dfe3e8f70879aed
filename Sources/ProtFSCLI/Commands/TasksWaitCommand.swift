import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem

/// `protfs tasks wait [--session ID] [TASK-ID ...]`: returns once the session service has settled
/// tasks, without polling (docs/semantics.md §9).
package enum TasksWaitCommand {
  package static let command = Command(
    name: "wait",
    abstract: "Wait until the session service has completed the given tasks (or a session's unfinished ones).",
    discussion: """
      Returns once every named task is completed (a download in place), failed or waiting for
      unlock; the session service says so when it stores each outcome, so nothing polls. With
      --session and no task numbers, waits for the session's tasks unfinished when it begins (the
      exit status is theirs); with both, the tasks must be of that session. A suspended task is waited for until it is resumed and settles, or
      cancelled. Prints nothing when every task completed; a failed task's error goes to stderr.
      Exit status: 0 every task completed; 1 a task failed (or cannot be waited for: unknown, or
      unfinished and not run by the service); 75 none failed but one waits for unlock.
      """,
    arguments: [taskIDs],
    options: [session],
    run: run
  )

  /// `--session IDENTIFIER`.
  package static let session = Option.value(
    "session", "identifier", help: "The session whose tasks to wait for (with task numbers: theirs).")
  /// `<task-id> ...`.
  package static let taskIDs = Argument(
    name: "task-id", help: "A task's number, as `protfs tasks` or `download --detach` prints it.",
    arity: .zeroOrMore)

  static func run(_ invocation: Invocation) throws -> Int32 {
    let identifier = invocation.value(session)
    var ids = try taskNumbers(invocation)
    if ids.isEmpty && identifier == nil {
      throw invocation.usageError("Give the task numbers to wait for, or '--session <identifier>'.")
    }
    if AppTransfers.app(invocation) != nil {
      return try AppTransfers.wait(invocation, ids: ids, session: identifier)
    }
    let device = invocation.device
    guard let store = try TasksCommand.store(device) else {
      if let id = ids.first { throw TasksCommand.noSuchTask(id, on: device) }
      throw SessionService.unknownSession(identifier ?? "")
    }
    if let identifier {
      guard try store.sessions().contains(where: { $0.identifier == identifier }) else {
        throw SessionService.unknownSession(identifier)
      }
      if ids.isEmpty {
        ids = try store.tasks(session: identifier).filter { !$0.state.isSettled }.map(\.id)
      }
    }
    let unsettled = try anyUnsettled(ids, in: store, session: identifier, invocation)
    // The service names the tasks that did not complete: only those are read again, for their
    // errors (none, usually), instead of every task's state once more.
    var toRead = ids
    if unsettled {
      let socketName =
        ProcessEnvironment.value(SessionServiceClient.socketEnvironment)
        ?? SessionServiceClient.socketName(device: device)
      toRead = try SessionServiceClient.waitUntilSettled(ids, socketName: socketName)
    }
    guard !toRead.isEmpty else { return 0 }
    // Only the tasks that did not complete are read whole, for their errors.
    return outcome(
      of: toRead, records: try store.tasks(ids: toRead, excluding: .completed), spelling: invocation.spelling)
  }

  /// The numbers `<task-id> ...` give, or a usage error.
  static func taskNumbers(_ invocation: Invocation) throws -> [Int64] {
    try invocation.arguments(taskIDs).map { text in
      guard let id = Int64(text), id > 0 else {
        throw invocation.usageError(
          "'\(text)' is not a task number; \(invocation.spelling.command("tasks")) lists them.")
      }
      return id
    }
  }

  /// Whether any of the tasks `ids` of `store` has not settled; an error for a task the store does
  /// not have, or one of another session than `identifier`.
  static func anyUnsettled(
    _ ids: [Int64], in store: DownloadStore, session identifier: String?, _ invocation: Invocation
  )
    throws -> Bool
  {
    // States only: decoding thousands of whole records would cost more than the wait's own work.
    let stored = try store.states(ids: ids)
    var unsettled = false
    for id in ids {
      guard let (state, session) = stored[id] else { throw TasksCommand.noSuchTask(id, on: invocation.device) }
      if let identifier, session != identifier {
        throw invocation.usageError("Task \(id) is of the session '\(session)', not of '\(identifier)'.")
      }
      unsettled = unsettled || !state.isSettled
    }
    return unsettled
  }

  /// The exit status of the settled tasks `ids`, their failures on stderr (remedies spelled by
  /// `spelling`); `stored` has their records (a completed one may be missing).
  static func outcome(of ids: [Int64], records stored: [Int64: DownloadTaskRecord], spelling: CommandSpelling)
    -> Int32
  {
    var failed = false
    var waiting = false
    for id in ids {
      guard let record = stored[id] else { continue }
      switch record.state {
      case .completed: continue
      case .failed:
        failed = true
        Console.err("task \(id): \(record.commandLineErrorText(spelling) ?? "failed")")
      case .waitingForUnlock:
        waiting = true
        Console.err(
          "task \(id): the download finished; it waits for \(spelling.command("unlock")) to move it into place.")
      case .interrupted:
        failed = true
        Console.err(
          "task \(id): interrupted: its process ended before it settled; \(spelling.command("tasks resume \(id)")) goes on with it."
        )
      case .running, .suspended, .canceling:
        // The service ended before the task settled: it goes on at its next start.
        failed = true
        Console.err("task \(id): still \(record.state.rawValue); the session service ended before it settled.")
      }
    }
    return failed ? DownloadCommand.exitFailed : waiting ? DownloadCommand.exitWaitingForUnlock : 0
  }
}
