import Foundation
import ProtFSSystem

/// The persistent record of download sessions and their tasks: an SQLite database in WAL mode
/// (`<device>/.protfs/downloads.sqlite`), shared safely by concurrent protfs processes.
///
/// Ownership of unfinished tasks is leased to one live session at a time (its owner token and
/// process id), so two processes opening the same session do not both transfer the same task.
public final class DownloadStore: Sendable {
  package let database: SQLiteDatabase
  /// The database file.
  public var path: String { database.path }

  /// Opens (creating) the store at `path`.
  public init(path: String) throws(ProtFSError) {
    database = try SQLiteDatabase(path: path)
    try database.transaction { db throws(ProtFSError) in
      try db.query(
        """
        CREATE TABLE IF NOT EXISTS sessions (
          identifier TEXT PRIMARY KEY,
          bundle_id TEXT NOT NULL,
          created_at REAL NOT NULL)
        """)
      try db.query(
        """
        CREATE TABLE IF NOT EXISTS tasks (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          session TEXT NOT NULL REFERENCES sessions(identifier) ON DELETE CASCADE,
          url TEXT NOT NULL,
          destination_dir TEXT NOT NULL,
          file_name TEXT,
          temp_dir TEXT NOT NULL,
          temp_name TEXT,
          state TEXT NOT NULL,
          bytes_received INTEGER NOT NULL DEFAULT 0,
          bytes_expected INTEGER NOT NULL DEFAULT -1,
          etag TEXT,
          last_modified TEXT,
          sha256 TEXT,
          error_text TEXT,
          error_errno INTEGER,
          description TEXT,
          owner TEXT,
          owner_pid INTEGER,
          request TEXT,
          created_at REAL NOT NULL,
          updated_at REAL NOT NULL)
        """)
      // By session alone: a task's state changes as it runs and settles, and an index holding the
      // state would be rewritten with each of those updates.
      try db.query("DROP INDEX IF EXISTS tasks_by_session")
      try db.query("CREATE INDEX IF NOT EXISTS tasks_of_session ON tasks(session)")
      // Only leased tasks are indexed by owner: a completed task leaves the index (one delete)
      // instead of moving its entry to NULL, and the index stays the size of the open work.
      try db.query("DROP INDEX IF EXISTS tasks_by_owner")
      try db.query("CREATE INDEX IF NOT EXISTS tasks_by_live_owner ON tasks(owner) WHERE owner IS NOT NULL")
      // The timeouts came later: a store made before them gets the columns, empty (the session's apply).
      let known = Set(try db.query("PRAGMA table_info(tasks)").compactMap { $0[1].string })
      for column in ["request_timeout", "resource_timeout"] where !known.contains(column) {
        try db.query("ALTER TABLE tasks ADD COLUMN \(column) REAL")
      }
      // So did the error as a whole (code, errno, typed remedy), as JSON beside its text.
      if !known.contains("error_json") { try db.query("ALTER TABLE tasks ADD COLUMN error_json TEXT") }
      // And uploads: their details as JSON (NULL for a download) and the response body they kept.
      if !known.contains("upload_json") { try db.query("ALTER TABLE tasks ADD COLUMN upload_json TEXT") }
      if !known.contains("response") { try db.query("ALTER TABLE tasks ADD COLUMN response BLOB") }
    }
    try Self.migrateHandover(database)
  }

  // MARK: Sessions

  /// Records the session `identifier` for `bundleID`; an existing session must belong to the same bundle.
  package func registerSession(identifier: String, bundleID: String) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      let rows = try db.query("SELECT bundle_id FROM sessions WHERE identifier = ?", [.text(identifier)])
      if let existing = rows.first?.first?.string {
        guard existing == bundleID else {
          throw ProtFSError(
            .alreadyExists,
            "The download session '\(identifier)' belongs to '\(existing)', not to '\(bundleID)'.",
            remedy: .advice("use another session identifier"))
        }
        return
      }
      try db.query(
        "INSERT INTO sessions (identifier, bundle_id, created_at) VALUES (?, ?, ?)",
        [.text(identifier), .text(bundleID), .real(Date().timeIntervalSince1970)])
    }
  }

  /// The sessions in the store, as (identifier, bundle id) pairs.
  public func sessions() throws(ProtFSError) -> [(identifier: String, bundleID: String)] {
    try database.read { db throws(ProtFSError) in
      try db.query("SELECT identifier, bundle_id FROM sessions ORDER BY identifier").map {
        ($0[0].string ?? "", $0[1].string ?? "")
      }
    }
  }

  /// How many tasks of `sessions` are not finished (neither completed nor failed).
  public func unfinishedTaskCount(sessions: [String]) throws(ProtFSError) -> Int {
    guard !sessions.isEmpty else { return 0 }
    return try database.read { db throws(ProtFSError) in
      let marks = Array(repeating: "?", count: sessions.count).joined(separator: ", ")
      let rows = try db.query(
        "SELECT COUNT(*) FROM tasks WHERE session IN (\(marks)) AND state NOT IN ('completed', 'failed')",
        sessions.map { .text($0) })
      return Int(rows.first?.first?.int64 ?? 0)
    }
  }

  // MARK: Tasks

  static let columns = """
    id, session, url, destination_dir, file_name, temp_dir, temp_name, state, bytes_received, \
    bytes_expected, etag, last_modified, sha256, error_text, error_errno, description, created_at, updated_at, \
    request_timeout, resource_timeout, error_json, upload_json, hands_over, delivery, request_headers, \
    request_method, request_body, begins_at, response_json
    """

  /// How many values `columns` selects; what a query adds after them starts here.
  private static let columnCount = 29

  static func record(_ row: [SQLiteValue]) -> DownloadTaskRecord {
    var record = DownloadTaskRecord(
      id: row[0].int64 ?? 0, sessionIdentifier: row[1].string ?? "", url: row[2].string ?? "",
      destinationDirectory: row[3].string ?? "", fileName: row[4].string, temporaryDirectory: row[5].string ?? "",
      temporaryFileName: row[6].string, state: DownloadState(rawValue: row[7].string ?? "") ?? .failed,
      bytesReceived: row[8].int64 ?? 0, bytesExpected: row[9].int64 ?? -1, entityTag: row[10].string,
      lastModified: row[11].string, expectedSHA256: row[12].string, errorMessage: row[13].string,
      errorNumber: row[14].int64.flatMap { Int32(exactly: $0) }, taskDescription: row[15].string,
      createdAt: row[16].double ?? 0, updatedAt: row[17].double ?? 0)
    record.requestTimeout = row[18].double
    record.resourceTimeout = row[19].double
    record.failure = row[20].string.flatMap { try? JSONDecoder().decode(ProtFSError.self, from: Data($0.utf8)) }
    record.upload = row[21].string.flatMap { try? JSONDecoder().decode(UploadDetails.self, from: Data($0.utf8)) }
    record.handsOver = (row[22].int64 ?? 0) != 0
    record.delivery = row[23].string.flatMap(DownloadDelivery.init(rawValue:))
    record.requestHeaders =
      row[24].string.flatMap { try? JSONDecoder().decode([UploadHeader].self, from: Data($0.utf8)) } ?? []
    record.requestMethod = row[25].string
    record.requestBody = row[26].data
    record.earliestBegin = row[27].double
    record.response = row[28].string.flatMap { try? JSONDecoder().decode(DownloadResponse.self, from: Data($0.utf8)) }
    return record
  }

  /// Every task, or those of one session, oldest first.
  public func tasks(session: String? = nil) throws(ProtFSError) -> [DownloadTaskRecord] {
    try database.read { db throws(ProtFSError) in
      if let session {
        return try db.query("SELECT \(Self.columns) FROM tasks WHERE session = ? ORDER BY id", [.text(session)])
          .map(Self.record)
      }
      return try db.query("SELECT \(Self.columns) FROM tasks ORDER BY id").map(Self.record)
    }
  }

  /// Every task, or those of one session, oldest first, as a listing shows them: a task stored as
  /// running that no live process owns is interrupted (its process was killed, or let it go
  /// without settling it), as a process that is signalled stores its tasks itself. Nothing is
  /// written: the next session that claims the task goes on with it.
  public func listedTasks(session: String? = nil) throws(ProtFSError) -> [DownloadTaskRecord] {
    try database.read { db throws(ProtFSError) in
      let select = "SELECT \(Self.columns), owner, owner_pid FROM tasks"
      let rows =
        if let session {
          try db.query(select + " WHERE session = ? ORDER BY id", [.text(session)])
        } else {
          try db.query(select + " ORDER BY id")
        }
      // Thousands of tasks have a few owners: each is looked up in /proc once.
      var alive: [String: Bool] = [:]
      return rows.map { row in
        var record = Self.record(row)
        guard record.state == .running else { return record }
        let owner = row[Self.columnCount].string
        let pid = row[Self.columnCount + 1].int64.flatMap { pid_t(exactly: $0) }
        let lives: Bool
        if let owner, let pid {
          lives = alive[owner] ?? Self.ownerIsAlive(owner, pid: pid)
          alive[owner] = lives
        } else {
          lives = false
        }
        if !lives { record.state = .interrupted }
        return record
      }
    }
  }

  /// The tasks `ids` the store has, by id, read in one query (`protfs tasks wait` reads thousands);
  /// with `excluding`, only those in another state (none of the others is decoded).
  public func tasks(ids: [Int64], excluding state: DownloadState? = nil) throws(ProtFSError)
    -> [Int64: DownloadTaskRecord]
  {
    try database.read { db throws(ProtFSError) in
      var found: [Int64: DownloadTaskRecord] = [:]
      var sql = "SELECT \(Self.columns) FROM tasks WHERE id IN (SELECT value FROM json_each(?))"
      var values = [Self.idList(ids)]
      if let state {
        sql += " AND state != ?"
        values.append(.text(state.rawValue))
      }
      let rows = try db.query(sql, values)
      for row in rows {
        let record = Self.record(row)
        found[record.id] = record
      }
      return found
    }
  }

  /// The state and session of each of the tasks `ids` the store has, by id: what `protfs tasks
  /// wait` needs of thousands of tasks, without decoding their whole records.
  public func states(ids: [Int64]) throws(ProtFSError) -> [Int64: (state: DownloadState, session: String)] {
    try database.read { db throws(ProtFSError) in
      var found: [Int64: (state: DownloadState, session: String)] = [:]
      found.reserveCapacity(ids.count)
      let rows = try db.query(
        "SELECT id, state, session FROM tasks WHERE id IN (SELECT value FROM json_each(?))", [Self.idList(ids)])
      for row in rows {
        guard let id = row[0].int64 else { continue }
        found[id] = (DownloadState(rawValue: row[1].string ?? "") ?? .failed, row[2].string ?? "")
      }
      return found
    }
  }

  /// The requests waiting on the tasks `ids` (those without one are absent).
  package func pendingRequests(ids: [Int64]) throws(ProtFSError) -> [Int64: DownloadTaskRequest] {
    try database.read { db throws(ProtFSError) in
      var found: [Int64: DownloadTaskRequest] = [:]
      let rows = try db.query(
        "SELECT id, request FROM tasks WHERE request IS NOT NULL AND id IN (SELECT value FROM json_each(?))",
        [Self.idList(ids)])
      for row in rows {
        guard let id = row[0].int64, let request = row[1].string.flatMap(DownloadTaskRequest.init) else { continue }
        found[id] = request
      }
      return found
    }
  }

  /// `ids` as a JSON array, bound as one value that `json_each` unfolds: one statement for any
  /// number of tasks.
  static func idList(_ ids: [Int64]) -> SQLiteValue {
    .text("[" + ids.map(String.init).joined(separator: ",") + "]")
  }

  /// The task `id`, or nil.
  public func task(id: Int64) throws(ProtFSError) -> DownloadTaskRecord? {
    try database.read { db throws(ProtFSError) in
      try db.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.integer(id)]).first.map(Self.record)
    }
  }

  /// Inserts new tasks in one transaction, owned by `owner`, and returns them with their ids.
  /// With `requesting`, each carries that request from the start, for whichever session takes it.
  package func insert(
    _ records: [DownloadTaskRecord], owner: String, requesting: DownloadTaskRequest? = nil
  ) throws(ProtFSError) -> [DownloadTaskRecord] {
    try database.transaction { db throws(ProtFSError) in
      try Self.insert(records, owner: owner, requesting: requesting, db)
    }
  }

  /// Inserts `record`, which continues the temp file of the failed task `source` of its session:
  /// in one transaction, the file is taken from `source` (its record no longer names it) if that
  /// record still names it, else `record` starts with no temp file and no bytes. Returns the
  /// record as stored.
  package func insert(
    _ record: DownloadTaskRecord, owner: String, takingTemporaryFileFrom source: Int64
  ) throws(ProtFSError) -> DownloadTaskRecord {
    try database.transaction { db throws(ProtFSError) -> DownloadTaskRecord in
      var record = record
      var taken = false
      if let name = record.temporaryFileName {
        try db.query(
          "UPDATE tasks SET temp_name = NULL WHERE id = ? AND session = ? AND state = 'failed' AND temp_name = ?",
          [.integer(source), .text(record.sessionIdentifier), .text(name)])
        taken = db.changes == 1
      }
      if !taken {
        record.temporaryFileName = nil
        record.bytesReceived = 0
      }
      return try Self.insert([record], owner: owner, requesting: nil, db)[0]
    }
  }

  private static func insert(
    _ records: [DownloadTaskRecord], owner: String, requesting: DownloadTaskRequest?, _ db: SQLiteDatabase.Connection
  ) throws(ProtFSError) -> [DownloadTaskRecord] {
    var result = records
    for index in result.indices {
      let r = result[index]
      try db.query(
        """
        INSERT INTO tasks (session, url, destination_dir, file_name, temp_dir, temp_name, state, bytes_received,
          bytes_expected, etag, last_modified, sha256, error_text, error_errno, description, owner, owner_pid,
          created_at, updated_at, request_timeout, resource_timeout, error_json, upload_json, request_headers,
          request, request_method, request_body, begins_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        Self.values(r) + [
          .text(owner), .integer(Int64(getpid())), .real(r.createdAt), .real(r.updatedAt),
          r.requestTimeout.map { .real($0) } ?? .null, r.resourceTimeout.map { .real($0) } ?? .null,
          Self.failureJSON(r), Self.uploadJSON(r), Self.headersJSON(r),
          requesting.map { .text($0.rawValue) } ?? .null, SQLiteValue(r.requestMethod),
          r.requestBody.map { .blob($0) } ?? .null, r.earliestBegin.map { .real($0) } ?? .null,
        ])
      result[index].id = db.lastInsertRowID
      if r.handsOver {
        try db.query("UPDATE tasks SET hands_over = 1 WHERE id = ?", [.integer(result[index].id)])
      }
    }
    return result
  }

  /// The task's error as JSON, so that another process can word its remedy (`Remedy`) its own way.
  private static func failureJSON(_ r: DownloadTaskRecord) -> SQLiteValue {
    guard let failure = r.failure, let data = try? JSONEncoder().encode(failure) else { return .null }
    return .text(String(decoding: data, as: UTF8.self))
  }

  /// An upload's details as JSON, or NULL for a download.
  private static func uploadJSON(_ r: DownloadTaskRecord) -> SQLiteValue {
    guard let upload = r.upload, let data = try? JSONEncoder().encode(upload) else { return .null }
    return .text(String(decoding: data, as: UTF8.self))
  }

  /// A download's request headers as JSON, or NULL when it has none.
  private static func headersJSON(_ r: DownloadTaskRecord) -> SQLiteValue {
    guard !r.requestHeaders.isEmpty, let data = try? JSONEncoder().encode(r.requestHeaders) else { return .null }
    return .text(String(decoding: data, as: UTF8.self))
  }

  /// The response body upload task `id` kept, if any.
  public func responseBody(of id: Int64) throws(ProtFSError) -> Data? {
    try database.read { db throws(ProtFSError) in
      try db.query("SELECT response FROM tasks WHERE id = ?", [.integer(id)]).first?[0].data
    }
  }

  private static func values(_ r: DownloadTaskRecord) -> [SQLiteValue] {
    [
      .text(r.sessionIdentifier), .text(r.url), .text(r.destinationDirectory), SQLiteValue(r.fileName),
      .text(r.temporaryDirectory), SQLiteValue(r.temporaryFileName), .text(r.state.rawValue),
      .integer(r.bytesReceived), .integer(r.bytesExpected), SQLiteValue(r.entityTag), SQLiteValue(r.lastModified),
      SQLiteValue(r.expectedSHA256), SQLiteValue(r.errorMessage), r.errorNumber.map { .integer(Int64($0)) } ?? .null,
      SQLiteValue(r.taskDescription),
    ]
  }

  /// Writes the mutable fields of `records` in one transaction (the engine batches its progress).
  /// A completed task leaves its owner's lease here, so that releasing a session touches only the
  /// tasks still open.
  package func update(_ records: [DownloadTaskRecord]) throws(ProtFSError) {
    guard !records.isEmpty else { return }
    try database.transaction { db throws(ProtFSError) in
      for r in records {
        try db.query(
          r.state == .completed
            ? """
            UPDATE tasks SET file_name = ?, temp_name = ?, state = ?, bytes_received = ?, bytes_expected = ?,
              etag = ?, last_modified = ?, error_text = ?, error_errno = ?, description = ?, updated_at = ?,
              error_json = ?, owner = NULL, owner_pid = NULL
            WHERE id = ?
            """
            : """
            UPDATE tasks SET file_name = ?, temp_name = ?, state = ?, bytes_received = ?, bytes_expected = ?,
              etag = ?, last_modified = ?, error_text = ?, error_errno = ?, description = ?, updated_at = ?,
              error_json = ?
            WHERE id = ?
            """,
          [
            SQLiteValue(r.fileName), SQLiteValue(r.temporaryFileName), .text(r.state.rawValue),
            .integer(r.bytesReceived), .integer(r.bytesExpected), SQLiteValue(r.entityTag),
            SQLiteValue(r.lastModified), SQLiteValue(r.errorMessage),
            r.errorNumber.map { .integer(Int64($0)) } ?? .null, SQLiteValue(r.taskDescription),
            .real(r.updatedAt), Self.failureJSON(r), .integer(r.id),
          ])
        // An upload's answer is written once, when it settles (the body can be megabytes).
        if r.upload != nil, r.state.isSettled {
          try db.query(
            "UPDATE tasks SET upload_json = ?, response = ? WHERE id = ?",
            [Self.uploadJSON(r), r.responseBody.map { .blob($0) } ?? .null, .integer(r.id)])
        }
        if r.handsOver {
          // A handed-over download's response is written once, when it completes.
          if r.state == .completed, let response = r.response, let data = try? JSONEncoder().encode(response) {
            try db.query(
              "UPDATE tasks SET response_json = ? WHERE id = ?",
              [.text(String(decoding: data, as: UTF8.self)), .integer(r.id)])
          }
          try Self.queueDelivery(r, in: db)
        }
      }
    }
  }

  /// Removes the finished tasks (completed or failed, cancelled ones included) whose record last
  /// changed before `cutoff` (every finished one when nil), of `sessions` only when given, and
  /// returns their ids, oldest first (`protfs tasks prune`).
  ///
  /// Never removed: a task that is running, suspended, cancelling or waiting for unlock; one with a
  /// request waiting for the process that runs it; and a handed-over task whose completion its app
  /// has not acknowledged (the session service still owes the app that event). A failed task's
  /// temp file stays where it is, no task's any more: `protfs cache purge --orphans` removes it.
  public func prune(finishedBefore cutoff: Date?, sessions: [String]? = nil) throws(ProtFSError) -> [Int64] {
    try database.transaction { db throws(ProtFSError) in
      var sql = """
        SELECT id FROM tasks
        WHERE state IN ('\(DownloadState.completed.rawValue)', '\(DownloadState.failed.rawValue)')
          AND request IS NULL
          AND NOT (hands_over != 0 AND delivery IN ('\(DownloadDelivery.pending.rawValue)', '\(DownloadDelivery.fileDelivered.rawValue)'))
        """
      var values: [SQLiteValue] = []
      if let cutoff {
        sql += " AND updated_at < ?"
        values.append(.real(cutoff.timeIntervalSince1970))
      }
      if let sessions {
        sql += " AND session IN (SELECT value FROM json_each(?))"
        values.append(.text(String(decoding: (try? JSONEncoder().encode(sessions)) ?? Data("[]".utf8), as: UTF8.self)))
      }
      let ids = try db.query(sql + " ORDER BY id", values).compactMap { $0[0].int64 }
      if !ids.isEmpty {
        try db.query("DELETE FROM tasks WHERE id IN (SELECT value FROM json_each(?))", [Self.idList(ids)])
      }
      return ids
    }
  }

  /// Sets the description of task `id`.
  package func updateDescription(_ description: String?, of id: Int64) throws(ProtFSError) {
    try database.read { db throws(ProtFSError) in
      try db.query("UPDATE tasks SET description = ? WHERE id = ?", [SQLiteValue(description), .integer(id)])
    }
  }

  /// Sets when task `id` may begin (seconds since 1970), or that it begins at once (nil).
  package func updateEarliestBegin(_ time: Double?, of id: Int64) throws(ProtFSError) {
    try database.read { db throws(ProtFSError) in
      try db.query("UPDATE tasks SET begins_at = ? WHERE id = ?", [time.map { .real($0) } ?? .null, .integer(id)])
    }
  }

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
          [.text(owner), .integer(Int64(getpid())), Self.idList(claimed.map(\.id))])
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
    let pid = getpid()
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
