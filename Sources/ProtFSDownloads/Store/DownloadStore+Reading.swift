import Foundation
import ProtFSSystem

/// The tasks as stored: one column list, one decoder of a row, and the queries that read them.
extension DownloadStore {
  static let columns = """
    id, session, url, destination_dir, file_name, temp_dir, temp_name, state, bytes_received, \
    bytes_expected, etag, last_modified, sha256, error_text, error_errno, description, created_at, updated_at, \
    request_timeout, resource_timeout, error_json, upload_json, hands_over, delivery, request_headers, \
    request_method, request_body, begins_at, response_json
    """

  /// How many values `columns` selects; what a query adds after them starts here.
  static let columnCount = 29

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

  /// The response body upload task `id` kept, if any.
  public func responseBody(of id: Int64) throws(ProtFSError) -> Data? {
    try database.read { db throws(ProtFSError) in
      try db.query("SELECT response FROM tasks WHERE id = ?", [.integer(id)]).first?[0].data
    }
  }
}
