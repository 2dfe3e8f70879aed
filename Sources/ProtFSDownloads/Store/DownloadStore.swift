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
}
