import CSQLite
import Foundation
import ProtFSSystem
import Synchronization

/// A value bound to or read from an SQLite statement.
package enum SQLiteValue: Sendable, Equatable {
  case integer(Int64)
  case real(Double)
  case text(String)
  /// Bytes (an upload's response body).
  case blob(Data)
  case null
}

/// One SQLite connection, used by several threads one at a time.
///
/// `@unchecked Sendable`: the raw `sqlite3*` is only touched while `lock` is held.
package final class SQLiteDatabase: @unchecked Sendable {
  private let handle: OpaquePointer
  private let lock = Mutex<Void>(())
  /// The database file, for messages.
  package let path: String

  /// Opens (creating) the database at `path` in WAL mode, waiting up to `busyTimeout` for other
  /// processes' locks.
  package init(path: String, busyTimeoutMilliseconds: Int32 = 10_000) throws(ProtFSError) {
    self.path = path
    var db: OpaquePointer?
    let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
    let rc = sqlite3_open_v2(path, &db, flags, nil)
    guard rc == SQLITE_OK, let db else {
      let text = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
      if let db { sqlite3_close_v2(db) }
      throw ProtFSError(.io, "Cannot open the task store '\(path)': \(text).", path: path)
    }
    handle = db
    _ = protfs_sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    // The log is not checkpointed on close (that costs two flushes at the end of every command);
    // it is checkpointed as it grows (every 1,000 pages), and by the next open when it is large.
    _ = protfs_sqlite3_no_checkpoint_on_close(db)
    // WAL lets `protfs tasks` read while a download writes; NORMAL syncs at checkpoints only,
    // which is durable against a killed process (the case that matters here).
    try execute("PRAGMA journal_mode=WAL")
    try execute("PRAGMA synchronous=NORMAL")
    try execute("PRAGMA foreign_keys=ON")
    checkpointLargeLog(busyTimeoutMilliseconds: busyTimeoutMilliseconds)
  }

  /// A log left larger than this by earlier processes is checkpointed when the store opens.
  package static let checkpointOnOpenBytes = 1 << 20

  /// Every process's first read replays the whole log into the shared index (milliseconds of CPU
  /// for the few MiB a long download list leaves), so a large log left by an earlier process is
  /// folded into the database once, now, rather than replayed by every later command. Best effort,
  /// without waiting: while another process is in a transaction the log is left for a later open.
  private func checkpointLargeLog(busyTimeoutMilliseconds: Int32) {
    var info = stat()
    guard case .success = Kernel.stat(path + "-wal", &info),
      Int(info.st_size) > Self.checkpointOnOpenBytes
    else { return }
    _ = protfs_sqlite3_busy_timeout(handle, 0)
    _ = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_TRUNCATE, nil, nil)
    _ = protfs_sqlite3_busy_timeout(handle, busyTimeoutMilliseconds)
  }

  /// Prepared statements by SQL text, reused across calls (parsing costs more than running the
  /// small statements the store issues). Touched only while `lock` is held.
  private var statements: [String: OpaquePointer] = [:]

  deinit {
    for statement in statements.values { sqlite3_finalize(statement) }
    sqlite3_close_v2(handle)
  }

  /// The error of the last failed call, naming the store file and what to do; never the statement,
  /// which tells a user nothing.
  private func failure() -> ProtFSError {
    let text = String(cString: sqlite3_errmsg(handle))
    let directory = (path as NSString).deletingLastPathComponent
    let hint: String?
    switch sqlite3_errcode(handle) & 0xFF {
    case SQLITE_READONLY, SQLITE_PERM, SQLITE_CANTOPEN, SQLITE_AUTH:
      hint =
        "make '\(path)' and its directory '\(directory)' writable (a read-only or immutable file or filesystem), then run the command again"
    case SQLITE_FULL:
      hint = "free space on the filesystem of '\(directory)', then run the command again"
    case SQLITE_IOERR:
      hint = "check the disk holding '\(directory)'"
    case SQLITE_CORRUPT, SQLITE_NOTADB:
      hint = "the store is damaged; move '\(path)' away to start again with no download tasks"
    case SQLITE_BUSY, SQLITE_LOCKED:
      hint = "another process holds the store; wait for it to finish, then run the command again"
    default:
      hint = nil
    }
    return ProtFSError(
      .io, "Cannot use the download task store '\(path)': \(text).", path: path, remedy: hint.map(Remedy.advice))
  }

  /// Runs statements without results.
  package func execute(_ sql: String) throws(ProtFSError) {
    try lock.withLock { _ throws(ProtFSError) in try executeLocked(sql) }
  }

  private func executeLocked(_ sql: String) throws(ProtFSError) {
    guard sqlite3_exec(handle, sql, nil, nil, nil) == SQLITE_OK else { throw failure() }
  }

  /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT`, so concurrent processes serialise their writes
  /// instead of failing to upgrade a read lock.
  @discardableResult
  package func transaction<T>(_ body: (Connection) throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    try lock.withLock { _ throws(ProtFSError) -> T in
      try executeLocked("BEGIN IMMEDIATE")
      do throws(ProtFSError) {
        let value = try body(Connection(database: self))
        try executeLocked("COMMIT")
        return value
      } catch {
        _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
        throw error
      }
    }
  }

  /// Runs `body` with the connection, for reads and single statements.
  @discardableResult
  package func read<T>(_ body: (Connection) throws(ProtFSError) -> T) throws(ProtFSError) -> T {
    try lock.withLock { _ throws(ProtFSError) -> T in try body(Connection(database: self)) }
  }

  /// The connection while the lock is held.
  package struct Connection {
    fileprivate let database: SQLiteDatabase

    /// Runs `sql` with `arguments`, returning every row.
    @discardableResult
    package func query(_ sql: String, _ arguments: [SQLiteValue] = []) throws(ProtFSError) -> [[SQLiteValue]] {
      try database.run(sql, arguments)
    }

    /// The rowid of the last insert.
    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(database.handle) }
    /// How many rows the last statement changed.
    var changes: Int { Int(sqlite3_changes(database.handle)) }
  }

  private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

  fileprivate func run(_ sql: String, _ arguments: [SQLiteValue]) throws(ProtFSError) -> [[SQLiteValue]] {
    let statement: OpaquePointer
    if let cached = statements[sql] {
      statement = cached
    } else {
      var prepared: OpaquePointer?
      guard sqlite3_prepare_v2(handle, sql, -1, &prepared, nil) == SQLITE_OK, let prepared else {
        throw failure()
      }
      statements[sql] = prepared
      statement = prepared
    }
    defer {
      sqlite3_reset(statement)
      sqlite3_clear_bindings(statement)
    }
    for (index, argument) in arguments.enumerated() {
      let position = Int32(index + 1)
      switch argument {
      case .integer(let value): sqlite3_bind_int64(statement, position, value)
      case .real(let value): sqlite3_bind_double(statement, position, value)
      case .text(let value): sqlite3_bind_text(statement, position, value, -1, Self.transient)
      case .blob(let value):
        _ = value.withUnsafeBytes { raw in
          sqlite3_bind_blob64(statement, position, raw.baseAddress, sqlite3_uint64(raw.count), Self.transient)
        }
      case .null: sqlite3_bind_null(statement, position)
      }
    }
    var rows: [[SQLiteValue]] = []
    while true {
      let rc = sqlite3_step(statement)
      if rc == SQLITE_DONE { return rows }
      guard rc == SQLITE_ROW else { throw failure() }
      var row: [SQLiteValue] = []
      for column in 0..<sqlite3_column_count(statement) {
        switch sqlite3_column_type(statement, column) {
        case SQLITE_INTEGER: row.append(.integer(sqlite3_column_int64(statement, column)))
        case SQLITE_FLOAT: row.append(.real(sqlite3_column_double(statement, column)))
        case SQLITE_NULL: row.append(.null)
        case SQLITE_BLOB:
          let count = Int(sqlite3_column_bytes(statement, column))
          let bytes = sqlite3_column_blob(statement, column)
          row.append(.blob(bytes.map { Data(bytes: $0, count: count) } ?? Data()))
        default: row.append(.text(String(cString: sqlite3_column_text(statement, column))))
        }
      }
      rows.append(row)
    }
  }
}

extension SQLiteValue {
  package var int64: Int64? { if case .integer(let v) = self { return v } else { return nil } }
  package var string: String? { if case .text(let v) = self { return v } else { return nil } }
  package var data: Data? { if case .blob(let v) = self { return v } else { return nil } }
  package var double: Double? {
    switch self {
    case .real(let v): return v
    case .integer(let v): return Double(v)
    default: return nil
    }
  }
  package init(_ string: String?) { self = string.map { .text($0) } ?? .null }
}
