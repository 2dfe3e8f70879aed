import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem

/// `protfs tasks prune [--older-than DURATION | --all] [--session ID]`: forgets finished tasks.
package enum TasksPruneCommand {
  package static let command = Command(
    name: "prune",
    abstract: "Remove finished (completed, failed or cancelled) task records older than a duration.",
    discussion: """
      Removes the records of tasks that completed or failed (cancelled ones included) and have
      not changed for --older-than (default 7d), or every finished one with --all; prints how
      many it removed. A task that is running, suspended, cancelling or waiting for unlock is
      never removed, nor one whose completion its app has not acknowledged yet. A failed task's
      temp file is left where it is: `protfs cache purge --orphans` removes it.

      When the session service runs it prunes, as it owns the task store; inside an app (below
      `protfs app launch`, as the app user) only the app's own tasks are pruned, root prunes any.
      With --json: one object {"removed": N, "ids": [...]}.
      """,
    options: [olderThan, all, TasksCommand.session, CommonOptions.json],
    run: run
  )

  /// `--older-than DURATION`.
  package static let olderThan = Option.value(
    "older-than", "duration", help: "Only tasks finished longer ago than this, e.g. 12h, 7d, 2w (default 7d).")
  /// `--all`.
  package static let all = Option.flag("all", help: "Every finished task, however recent.")

  /// How long a finished task is kept when `--older-than` is not given.
  package static let defaultAge: TimeInterval = 7 * 86_400

  /// What `--json` prints.
  struct Outcome: Encodable {
    /// How many task records were removed.
    var removed: Int
    /// Their ids, oldest first.
    var ids: [Int64]
  }

  static func run(_ invocation: Invocation) throws -> Int32 {
    if invocation.flag(Self.all) && invocation.value(Self.olderThan) != nil {
      throw invocation.usageError("Give --older-than DURATION or --all, not both.")
    }
    var age: TimeInterval? = defaultAge
    if invocation.flag(Self.all) {
      age = nil
    } else if let text = invocation.value(Self.olderThan) {
      do {
        age = try HumanDuration.parse(text)
      } catch {
        throw invocation.usageError("--older-than: \(invocation.describe(error))")
      }
    }
    let session = invocation.value(TasksCommand.session)
    let ids = try prune(invocation, olderThan: age, session: session)
    if invocation.flag(CommonOptions.json) {
      try Console.json(Outcome(removed: ids.count, ids: ids))
    } else {
      let what = age.map { "finished more than \(HumanDuration.format($0)) ago" } ?? "finished"
      Console.out("Removed \(ids.count) task\(ids.count == 1 ? "" : "s") \(what).")
    }
    return 0
  }

  /// Prunes through the session service when this process runs as an app (which cannot open the
  /// task store) or the service runs (it owns the store); else in the store itself.
  private static func prune(_ invocation: Invocation, olderThan age: TimeInterval?, session: String?) throws
    -> [Int64]
  {
    if AppTransfers.app(invocation) != nil {
      return try AppTransfers.prune(invocation, olderThan: age, session: session)
    }
    let device = invocation.device
    try device.requireInitialized()
    let socketName = SessionServiceClient.socketName(device: device)
    if SessionServiceClient.ping(socketName: socketName) != nil {
      return try SessionServiceClient.prune(olderThan: age, session: session, socketName: socketName)
    }
    guard let store = try TasksCommand.store(device) else {
      if let session { throw SessionService.unknownSession(session) }
      return []
    }
    if let session, try !store.sessions().contains(where: { $0.identifier == session }) {
      throw SessionService.unknownSession(session)
    }
    return try store.prune(
      finishedBefore: age.map { Date().addingTimeInterval(-$0) }, sessions: session.map { [$0] })
  }
}
