import Foundation
import ProtFSSystem

/// Which live session owns which task, and the requests made to that owner.
extension DownloadStore {
  /// Asks whichever process runs task `id` to cancel, suspend or resume it (`protfs tasks cancel ID`):
  /// the owning session picks the request up within its access-check interval; a session that
  /// reattaches the task later applies it then. Returns the task as it is now.
  @discardableResult
  public func request(_ request: DownloadTaskRequest, task id: Int64) throws(ProtFSError) -> DownloadTaskRecord {
    try database.transaction { db throws(ProtFSError) in
      let rows = try db.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.integer(id)])
      guard let row = rows.first else {
        throw ProtFSError(
          .notFound, "There is no download task \(id) in the task store '\(path)'.", path: path,
          remedy: .listTasks)
      }
      try db.query("UPDATE tasks SET request = ? WHERE id = ?", [.text(request.rawValue), .integer(id)])
      return Self.record(row)
    }
  }

  /// Whether a live session (in this process or another) owns task `id` and so will see requests.
  public func isOwnedByLiveSession(task id: Int64) throws(ProtFSError) -> Bool {
    try database.read { db throws(ProtFSError) in
      let rows = try db.query("SELECT owner, owner_pid FROM tasks WHERE id = ?", [.integer(id)])
      guard let row = rows.first, let owner = row[0].string, let pid = row[1].int64 else { return false }
      return Self.ownerIsAlive(owner, pid: pid_t(pid))
    }
  }

  /// The requests made for `owner`'s tasks, which are cleared as they are taken.
  package func takeRequests(owner: String) throws(ProtFSError) -> [(id: Int64, request: DownloadTaskRequest)] {
    // Asked several times a second: look first without taking the write lock.
    let any = try database.read { db throws(ProtFSError) in
      try db.query("SELECT 1 FROM tasks WHERE owner = ? AND request IS NOT NULL LIMIT 1", [.text(owner)])
    }
    guard !any.isEmpty else { return [] }
    return try database.transaction { db throws(ProtFSError) in
      let rows = try db.query(
        "SELECT id, request FROM tasks WHERE owner = ? AND request IS NOT NULL", [.text(owner)])
      guard !rows.isEmpty else { return [] }
      try db.query("UPDATE tasks SET request = NULL WHERE owner = ? AND request IS NOT NULL", [.text(owner)])
      return rows.compactMap { row in
        guard let id = row[0].int64, let request = row[1].string.flatMap(DownloadTaskRequest.init) else { return nil }
        return (id, request)
      }
    }
  }

  /// Takes ownership of the session's unfinished tasks that no live session owns, and returns them.
  ///
  /// A task is free when it has no owner or its owner's process is gone (`kill -9`). Tasks `owner`
  /// holds already are not returned: a session adopting more tasks gets only the new ones.
  package func claimUnfinished(session: String, owner: String) throws(ProtFSError) -> [DownloadTaskRecord] {
    try database.transaction { db throws(ProtFSError) in
      let states = DownloadState.allCases.filter(\.isUnfinished).map { "'\($0.rawValue)'" }.joined(separator: ",")
      let rows = try db.query(
        """
        SELECT \(Self.columns), owner, owner_pid FROM tasks
        WHERE session = ? AND state IN (\(states)) AND (owner IS NULL OR owner != ?) ORDER BY id
        """,
        [.text(session), .text(owner)])
      var claimed: [DownloadTaskRecord] = []
      for row in rows {
        let currentOwner = row[Self.columnCount].string
        let pid = row[Self.columnCount + 1].int64.map { pid_t($0) }
        if let currentOwner, let pid, Self.ownerIsAlive(currentOwner, pid: pid) { continue }
        claimed.append(Self.record(row))
      }
      if !claimed.isEmpty {
        try db.query(
          "UPDATE tasks SET owner = ?, owner_pid = ? WHERE id IN (SELECT value FROM json_each(?))",
          [.text(owner), .integer(Int64(Kernel.getpid())), Self.idList(claimed.map(\.id))])
      }
      return claimed
    }
  }

  /// Gives up ownership of the tasks `ids` that `owner` holds, so that another session with the
  /// same identifier (in this process or another) can claim them.
  package func release(tasks ids: [Int64], owner: String) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      try db.query(
        "UPDATE tasks SET owner = NULL, owner_pid = NULL WHERE owner = ? AND id IN (SELECT value FROM json_each(?))",
        [.text(owner), Self.idList(ids)])
    }
  }

  /// Gives up ownership of every task `owner` holds, so the next session with the same identifier
  /// (in this process or another) can reattach them.
  package func release(owner: String) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      try db.query("UPDATE tasks SET owner = NULL, owner_pid = NULL WHERE owner = ?", [.text(owner)])
    }
  }

  /// A session's claim on its tasks: its process, that process's start time (so that another
  /// process given the same pid later is not taken for it) and a random part (so that two sessions
  /// of one process differ): "PID-tSTART-UUID".
  package static func makeOwner() -> String {
    let pid = Kernel.getpid()
    return "\(pid)-t\(ProcessIdentity.startTime(of: pid) ?? 0)-\(UUID().uuidString)"
  }

  /// Whether the session `owner` of process `pid` may still be at work: the process lives and, when
  /// the owner names a start time (owners written before it did not), started then. Pids are
  /// reused (they wrap at 32,768 on many machines): a task whose owner died is claimable even
  /// while an unrelated process holds the pid.
  package static func ownerIsAlive(_ owner: String, pid: pid_t) -> Bool {
    guard ProcessIdentity.isRunning(pid) else { return false }
    let parts = owner.split(separator: "-", maxSplits: 2)
    guard parts.count == 3, parts[1].first == "t", let recorded = UInt64(parts[1].dropFirst()), recorded != 0,
      let current = ProcessIdentity.startTime(of: pid)
    else { return true }
    return recorded == current
  }
}
