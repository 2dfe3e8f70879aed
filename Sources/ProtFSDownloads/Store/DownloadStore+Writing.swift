import Foundation
import ProtFSSystem

/// New tasks, their changes and their removal.
extension DownloadStore {
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
          .text(owner), .integer(Int64(Kernel.getpid())), .real(r.createdAt), .real(r.updatedAt),
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
}
