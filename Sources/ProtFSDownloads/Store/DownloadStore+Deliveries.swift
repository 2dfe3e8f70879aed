import Foundation
import ProtFSSystem

/// Handed-over tasks and their deliveries, and the sessions the session service owns
/// (docs/semantics.md §9): columns added to a store made before them, in a block of their own.
extension DownloadStore {
  /// Adds the handover and service columns to a store made before them.
  static func migrateHandover(_ database: SQLiteDatabase) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      let tasks = Set(try db.query("PRAGMA table_info(tasks)").compactMap { $0[1].string })
      if !tasks.contains("hands_over") {
        try db.query("ALTER TABLE tasks ADD COLUMN hands_over INTEGER NOT NULL DEFAULT 0")
      }
      if !tasks.contains("delivery") { try db.query("ALTER TABLE tasks ADD COLUMN delivery TEXT") }
      if !tasks.contains("cancelled_reason") {
        try db.query("ALTER TABLE tasks ADD COLUMN cancelled_reason INTEGER")
      }
      // A download's request headers came later still: JSON, NULL for none.
      if !tasks.contains("request_headers") { try db.query("ALTER TABLE tasks ADD COLUMN request_headers TEXT") }
      // And a download's method (NULL for GET) and body after them.
      if !tasks.contains("request_method") { try db.query("ALTER TABLE tasks ADD COLUMN request_method TEXT") }
      if !tasks.contains("request_body") { try db.query("ALTER TABLE tasks ADD COLUMN request_body BLOB") }
      // And the time before which a task does not begin (`earliestBeginDate`; NULL: at once).
      if !tasks.contains("begins_at") { try db.query("ALTER TABLE tasks ADD COLUMN begins_at REAL") }
      // And a handed-over download's final response (status and header fields, JSON).
      if !tasks.contains("response_json") { try db.query("ALTER TABLE tasks ADD COLUMN response_json TEXT") }
      let sessions = Set(try db.query("PRAGMA table_info(sessions)").compactMap { $0[1].string })
      if !sessions.contains("service_configuration") {
        try db.query("ALTER TABLE sessions ADD COLUMN service_configuration TEXT")
      }
      if !sessions.contains("relaunch_error") { try db.query("ALTER TABLE sessions ADD COLUMN relaunch_error TEXT") }
    }
  }

  /// Queues the delivery of a handed-over task that settled (completed or failed); a task that
  /// runs again (resumed after a failure) has nothing to deliver until it settles again.
  static func queueDelivery(_ r: DownloadTaskRecord, in db: SQLiteDatabase.Connection) throws(ProtFSError) {
    if r.state == .completed || r.state == .failed {
      try db.query(
        "UPDATE tasks SET delivery = 'pending' WHERE id = ? AND delivery IS NULL", [.integer(r.id)])
    } else {
      try db.query("UPDATE tasks SET delivery = NULL WHERE id = ? AND delivery = 'pending'", [.integer(r.id)])
    }
  }

  /// The handed-over tasks of `session` whose completion the app has not acknowledged, oldest first.
  public func pendingDeliveries(session: String) throws(ProtFSError) -> [DownloadTaskRecord] {
    try tasks(session: session).filter(\.awaitsDelivery)
  }

  /// The app is done with task `id`'s completion: it is marked delivered (never sent again) and a
  /// handed-over temp file still at its name is deleted, through its directory's descriptor
  /// (`unlinkat` removes the name itself, never what a link points to). A file the app moved away
  /// stays where it put it. Returns the task as it was.
  ///
  /// With `fileOnly`, the app's `didFinishDownloadingTo` returned and its `didCompleteWithError`
  /// is still to come: the file goes as above, and the completion stays queued (without the file)
  /// until the full acknowledgement, so that an app that dies between the two calls still gets
  /// the second when it makes its session again.
  @discardableResult
  public func acknowledge(
    task id: Int64, fileOnly: Bool = false, fileSystem: any DownloadFileSystem = PlainDownloadFileSystem()
  ) throws(ProtFSError) -> DownloadTaskRecord {
    let record = try database.transaction { db throws(ProtFSError) -> DownloadTaskRecord in
      guard let record = try taskLocked(id, db) else {
        throw ProtFSError(
          .notFound, "There is no download task \(id) in the task store '\(path)'.", path: path, remedy: .listTasks)
      }
      // A full acknowledgement is final; a file's never undoes one.
      let delivery: DownloadDelivery = fileOnly ? .fileDelivered : .delivered
      try db.query(
        "UPDATE tasks SET delivery = ?, temp_name = CASE WHEN state = 'completed' THEN NULL ELSE temp_name END WHERE id = ?"
          + (fileOnly ? " AND delivery = 'pending'" : ""),
        [.text(delivery.rawValue), .integer(id)])
      return record
    }
    if record.handsOver, record.state == .completed, let name = record.temporaryFileName,
      let directory = try? fileSystem.openDirectory(record.temporaryDirectory, creating: false)
    {
      directory.removeFile(name, ifStill: nil)
    }
    return record
  }

  /// Records (or clears, with nil) why the system rather than the app cancels tasks `ids`: a
  /// number the session service gives meaning (Apple's `NSURLErrorCancelledReason…` values),
  /// kept with the task so that its app learns it whenever its completion is delivered.
  public func setCancelledReason(_ reason: Int?, tasks ids: [Int64]) throws(ProtFSError) {
    guard !ids.isEmpty else { return }
    try database.transaction { db throws(ProtFSError) in
      for id in ids {
        try db.query(
          "UPDATE tasks SET cancelled_reason = ? WHERE id = ?",
          [reason.map { .integer(Int64($0)) } ?? .null, .integer(id)])
      }
    }
  }

  /// The cancellation reasons recorded for `session`'s tasks, by task id.
  public func cancelledReasons(session: String) throws(ProtFSError) -> [Int64: Int] {
    try database.read { db throws(ProtFSError) in
      var reasons: [Int64: Int] = [:]
      for row in try db.query(
        "SELECT id, cancelled_reason FROM tasks WHERE session = ? AND cancelled_reason IS NOT NULL", [.text(session)])
      {
        if let id = row[0].int64, let reason = row[1].int64 { reasons[id] = Int(reason) }
      }
      return reasons
    }
  }

  private func taskLocked(_ id: Int64, _ db: SQLiteDatabase.Connection) throws(ProtFSError) -> DownloadTaskRecord? {
    try db.query("SELECT \(Self.columns) FROM tasks WHERE id = ?", [.integer(id)]).first.map(Self.record)
  }

  // MARK: Service sessions

  /// Marks session `identifier` as owned by the session service, with the configuration (JSON) it
  /// was opened with, so that a restarted service opens it again.
  public func registerServiceSession(identifier: String, bundleID: String, configuration: String)
    throws(ProtFSError)
  {
    try registerSession(identifier: identifier, bundleID: bundleID)
    try database.transaction { db throws(ProtFSError) in
      try db.query(
        "UPDATE sessions SET service_configuration = ? WHERE identifier = ?",
        [.text(configuration), .text(identifier)])
    }
  }

  /// Removes session `identifier` and every record of its tasks (their temp files stay, for
  /// `protfs cache purge --orphans`): its identifier then names no session.
  public func forgetSession(_ identifier: String) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      // Its tasks go with it (ON DELETE CASCADE).
      try db.query("DELETE FROM sessions WHERE identifier = ?", [.text(identifier)])
    }
  }

  /// The sessions of `bundleID` that hold nothing for anyone, oldest first: no task of theirs is
  /// unfinished (waiting for unlock counts as unfinished), and no handed-over task's completion is
  /// still owed to the app.
  public func idleSessions(of bundleID: String) throws(ProtFSError) -> [String] {
    try database.read { db throws(ProtFSError) in
      try db.query(
        """
        SELECT identifier FROM sessions s WHERE bundle_id = ? AND NOT EXISTS (
          SELECT 1 FROM tasks t WHERE t.session = s.identifier AND (
            t.state NOT IN ('\(DownloadState.completed.rawValue)', '\(DownloadState.failed.rawValue)')
            OR (t.hands_over != 0 AND t.delivery IN ('\(DownloadDelivery.pending.rawValue)', '\(DownloadDelivery.fileDelivered.rawValue)'))))
        ORDER BY created_at, identifier
        """, [.text(bundleID)]
      ).compactMap { $0[0].string }
    }
  }

  /// The sessions the session service owns: identifier, bundle and configuration (JSON).
  public func serviceSessions() throws(ProtFSError) -> [(identifier: String, bundleID: String, configuration: String)] {
    try database.read { db throws(ProtFSError) in
      try db.query(
        "SELECT identifier, bundle_id, service_configuration FROM sessions WHERE service_configuration IS NOT NULL ORDER BY identifier"
      ).map { ($0[0].string ?? "", $0[1].string ?? "", $0[2].string ?? "") }
    }
  }

  /// Records (or clears, with nil) the last failure to tell session `identifier`'s app its events wait.
  public func setRelaunchError(_ message: String?, session identifier: String) throws(ProtFSError) {
    try database.transaction { db throws(ProtFSError) in
      try db.query(
        "UPDATE sessions SET relaunch_error = ? WHERE identifier = ?", [SQLiteValue(message), .text(identifier)])
    }
  }

  /// The last failure to tell session `identifier`'s app its events wait, if any.
  public func relaunchError(session identifier: String) throws(ProtFSError) -> String? {
    try database.read { db throws(ProtFSError) in
      try db.query("SELECT relaunch_error FROM sessions WHERE identifier = ?", [.text(identifier)]).first?[0].string
    }
  }
}
