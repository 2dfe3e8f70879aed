import CSQLite
import Foundation
import ProtFS
import ProtFSSystem

/// An iOS backup folder, as Finder, iTunes and `idevicebackup2` write one (docs/import-backup.md):
/// `Manifest.db`, an SQLite database with one row a file (`Files`: `fileID`, `domain`,
/// `relativePath`, `flags`, and `file`, the file's metadata as an NSKeyedArchiver plist), the
/// file store `xx/<fileID>`, and `Manifest.plist`, which says whether the backup is encrypted and
/// then holds its keybag and the key of `Manifest.db`. Read only, never followed out of the folder.
///
/// The rows are read as they are used (`forEachEntry`), not held: an import's memory does not grow
/// with the number of files.
package final class BackupManifest {
  /// The backup folder, held open: every file of it is read beneath this descriptor.
  package let folder: BackupFolder
  /// The backup folder's path, as the user gave it (for messages).
  package var path: String { folder.path }
  /// The backup's keys, when it is encrypted (unlocked with its password).
  package let keys: BackupKeys?
  /// The key of the encrypted `Manifest.db`.
  private let databaseKey: [UInt8]?
  /// The backup's `Manifest.db`, held open: SQLite reads it through this descriptor (an
  /// unencrypted backup's), or it is decrypted from it.
  private let databaseFile: FileDescriptor
  /// Its size when it was opened: an encrypted one is decrypted up to there, and no further.
  private let databaseSize: Int64
  /// An encrypted backup's `Manifest.db` decrypted, once `open(decryptingInto:)` has made it: an
  /// unnamed file of root's, held open, which SQLite reads through this descriptor.
  private var decrypted: FileDescriptor?
  /// The open database; for an encrypted backup, once `open(decryptingInto:)` has decrypted it.
  private var database: OpaquePointer?
  /// The `Manifest.db` of the backup (for messages).
  private let databasePath: String
  /// Rows that could not be read, each with why (the first `unreadableLimit`).
  package private(set) var unreadable: [String] = []

  /// How much of the database is read, and how long SQLite may work on it.
  package let limits: ManifestLimits
  /// SQLite's work so far, against `limits`.
  private let budget: QueryBudget
  /// The most unreadable rows listed one by one; the rest are counted.
  static let unreadableLimit = 1_000
  private var unreadableCount = 0
  /// The largest `Manifest.plist` read: a phone's, with every app's metadata, holds a few MiB.
  package static let plistLimit = 64 << 20

  /// Reads the backup in `folder`; `password` opens an encrypted one; `limits` bound what is read
  /// of its database. Throws when it is no backup, an encrypted one without its password or with a
  /// wrong one, or its database cannot be opened or is not one iOS writes. Nothing is written.
  package init(folder: BackupFolder, password: [UInt8]? = nil, limits: ManifestLimits = ManifestLimits())
    throws(ProtFSError)
  {
    self.folder = folder
    self.limits = limits
    budget = QueryBudget(limits: limits)
    let databasePath = folder.pathOf("Manifest.db")
    self.databasePath = databasePath
    switch folder.openFile("Manifest.db") {
    case .success(let (fd, status)):
      databaseFile = fd
      databaseSize = Int64(status.st_size)
    case .failure(.absent):
      throw ProtFSError(
        .notFound, "'\(folder.path)' is not an iOS backup: it has no Manifest.db.", path: folder.path,
        remedy: .advice("give the folder that holds Manifest.db, Manifest.plist and Info.plist"))
    case .failure(let refusal):
      throw ProtFSError(
        .malformed, "The backup's Manifest.db '\(databasePath)' is not read: \(refusal.reason).", path: databasePath)
    }
    let manifestPlist = folder.pathOf("Manifest.plist")
    guard let plist = try Self.encryption(folder) else {
      keys = nil
      databaseKey = nil
      try openDatabase(databaseFile)
      return
    }
    guard let password else {
      throw ProtFSError(
        .invalidArgument, "The backup '\(folder.path)' is encrypted; protfs needs its password to read it.",
        path: folder.path,
        remedy: .advice(
          "give the password in a file with --password-file FILE, or on standard input with --password-file -"))
    }
    guard let keybag = plist["BackupKeyBag"] as? Data, let wrapped = plist["ManifestKey"] as? Data else {
      throw ProtFSError(
        .malformed, "The encrypted backup's '\(manifestPlist)' has no BackupKeyBag or no ManifestKey.",
        path: manifestPlist)
    }
    let keys = try BackupKeys(keybag: Array(keybag), password: password, where: manifestPlist, backup: folder.path)
    guard let databaseKey = keys.key(Array(wrapped)) else {
      throw ProtFSError(
        .malformed, "The encrypted backup's ManifestKey in '\(manifestPlist)' does not unwrap with its class key.",
        path: manifestPlist)
    }
    self.keys = keys
    self.databaseKey = databaseKey
  }

  /// Whether the `Manifest.plist` in `folder` says the backup is encrypted.
  package static func isEncrypted(_ folder: BackupFolder) throws(ProtFSError) -> Bool {
    try encryption(folder) != nil
  }

  /// The `Manifest.plist` in `folder`, when it says the backup is encrypted; nil when it says not,
  /// or there is none. Throws when it is there but not a property list protfs reads (too large,
  /// expanding without end, nesting too deep, damaged) or holds no dictionary.
  private static func encryption(_ folder: BackupFolder) throws(ProtFSError) -> [String: Any]? {
    guard let bytes = try folder.read("Manifest.plist", limit: plistLimit) else { return nil }
    let path = folder.pathOf("Manifest.plist")
    let parsed: Any
    switch BoundedPropertyList.parse(bytes, limits: BoundedPropertyList.Limits(bytes: plistLimit)) {
    case .success(let value):
      parsed = value
    case .failure(let refusal):
      throw ProtFSError(
        .malformed, "The backup's Manifest.plist '\(path)' is not a property list protfs reads: \(refusal.reason).",
        path: path)
    }
    guard let plist = parsed as? [String: Any] else {
      throw ProtFSError(
        .malformed, "The backup's Manifest.plist '\(path)' is a property list without a dictionary at its top.",
        path: path)
    }
    return (plist["IsEncrypted"] as? Bool) == true ? plist : nil
  }

  deinit {
    if let database { sqlite3_close_v2(database) }
  }

  /// Makes the database readable: an encrypted backup's `Manifest.db` is decrypted into `scratch`
  /// (a file of `name`, removed as soon as it is open: nothing of it stays, whatever ends the
  /// import); an unencrypted one is open.
  package func open(decryptingInto scratch: DirectoryHandle, name: String) throws(ProtFSError) {
    guard database == nil, let databaseKey else { return }
    // Ciphertext has no holes: a sparse "database" of a terabyte, which costs its writer nothing,
    // would be a terabyte of root's disk once decrypted.
    let hole = try Kernel.lseek(databaseFile.rawValue, 0, Kernel.seekHole).orThrow(
      "read", path: databasePath)
    guard Int64(hole) >= databaseSize else {
      throw ProtFSError(
        .malformed,
        "The encrypted backup's Manifest.db '\(databasePath)' has holes, which no encrypted file has: it is not read.",
        path: databasePath)
    }
    let output = FileDescriptor(
      owning: try scratch.openFile(
        name, flags: O_RDWR | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o600)))
    _ = try Kernel.unlinkat(scratch.fd, name, 0).orThrow(
      "remove the decrypted database", path: scratch.pathOf(name))
    switch BackupCipher.decrypt(
      databaseFile.rawValue, into: output.rawValue, key: databaseKey, path: databasePath, limit: databaseSize)
    {
    case .success(let length):
      // PKCS#7 padding (a whole block for a database of whole pages) is taken off where it is.
      var last = [UInt8](repeating: 0, count: 16)
      if length >= 16,
        case .success(16) = Kernel.pread(output.rawValue, &last, 16, off_t(length - 16)),
        let pad = last.last, (1...16).contains(pad), last.suffix(Int(pad)).allSatisfy({ $0 == pad })
      {
        _ = try Kernel.ftruncate(output.rawValue, off_t(length - Int(pad))).orThrow(
          "trim the decrypted database", path: scratch.pathOf(name))
      }
    case .failure(.notWholeBlocks):
      throw ProtFSError(
        .malformed, "The encrypted backup's Manifest.db '\(databasePath)' is not whole AES blocks: it is damaged.",
        path: databasePath)
    case .failure(.failed(let error)):
      throw error
    }
    decrypted = output
    try openDatabase(output)
  }

  /// Opens the database in `file` read-only, through the descriptor (SQLite's VFS
  /// `protfs-descriptor`): never by a path, which its writer could have changed since.
  private func openDatabase(_ file: FileDescriptor) throws(ProtFSError) {
    guard Self.descriptorVFS == SQLITE_OK else {
      throw ProtFSError(.io, "Cannot read the backup's Manifest.db '\(databasePath)': SQLite refused protfs's VFS.")
    }
    var db: OpaquePointer?
    let uri = "file:\(PROTFS_SQLITE3_DESCRIPTOR_PREFIX)\(file.rawValue)?immutable=1"
    let opened = sqlite3_open_v2(
      uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, PROTFS_SQLITE3_DESCRIPTOR_VFS)
    guard opened == SQLITE_OK, let db else {
      if let db { sqlite3_close_v2(db) }
      throw ProtFSError(.malformed, "Cannot open the backup's Manifest.db '\(databasePath)'.", path: databasePath)
    }
    protfs_sqlite3_distrust(db)
    database = db
    budget.install(on: db)
    // No string, blob or row longer than this is made at all (a generated column could build
    // one of a gigabyte); the columns' own limits, below it, are checked with a clearer message.
    let longest = max(limits.fileIDBytes, limits.domainBytes, limits.relativePathBytes, limits.metadataBytes)
    sqlite3_limit(db, SQLITE_LIMIT_LENGTH, Int32(clamping: 4 * longest))
    try execute("PRAGMA cell_size_check = ON")
    try requireFilesTable()
    // A query that fails here (not SQLite, no Files table) fails before anything is built.
    sqlite3_finalize(try statement("SELECT fileID, domain, relativePath, flags, file FROM Files LIMIT 0"))
  }

  /// Whether the `protfs-descriptor` VFS is registered (SQLite's result), done once.
  private static let descriptorVFS: Int32 = protfs_sqlite3_register_descriptor_vfs()

  /// Throws unless `Files` is a table (not a view, which may compute rows without end, nor a
  /// virtual table, whose module computes them).
  private func requireFilesTable() throws(ProtFSError) {
    let query = try statement("SELECT type, sql FROM sqlite_master WHERE name = 'Files' COLLATE NOCASE")
    defer { sqlite3_finalize(query) }
    var found: (type: String, sql: String)?
    while try step(query) {
      let type = sqlite3_column_text(query, 0).map { String(cString: $0) } ?? ""
      let sql = sqlite3_column_text(query, 1).map { String(cString: $0) } ?? ""
      if found == nil || type == "table" || type == "view" { found = (type, sql) }
    }
    guard let found else {
      throw ProtFSError(
        .malformed, "The backup's Manifest.db '\(databasePath)' has no Files table: it is not an iOS backup's.",
        path: databasePath)
    }
    let words = found.sql.uppercased().split(whereSeparator: \.isWhitespace).prefix(2)
    guard found.type == "table", words.last == "TABLE" else {
      let what = found.type == "table" ? "a virtual table" : "a \(found.type)"
      throw ProtFSError(
        .malformed,
        "The backup's Manifest.db '\(databasePath)' has \(what) named Files, not a table: protfs reads the manifest from a table only (a view or a virtual table computes its rows, without end if it likes).",
        path: databasePath)
    }
  }

  /// Runs the statement `sql`, which returns no rows, within the budget.
  private func execute(_ sql: String) throws(ProtFSError) {
    let query = try statement(sql)
    defer { sqlite3_finalize(query) }
    while try step(query) {}
  }

  /// Prepares `query` within the budget (reading the schema is SQLite's work too).
  private func statement(_ query: String) throws(ProtFSError) -> OpaquePointer {
    var statement: OpaquePointer?
    let prepared = budget.run { database.map { sqlite3_prepare_v2($0, query, -1, &statement, nil) } ?? SQLITE_MISUSE }
    guard prepared == SQLITE_OK, let statement else {
      if let exceeded = budget.exceeded { throw overBudget(exceeded) }
      let why = database.map { String(cString: sqlite3_errmsg($0)) } ?? "it is not open"
      throw ProtFSError(
        .malformed, "The backup's Manifest.db '\(databasePath)' has no Files table as iOS writes it: \(why).",
        path: databasePath)
    }
    return statement
  }

  /// The next row of `query` (true) or its end (false), within the budget; throws when SQLite
  /// fails or the budget is spent.
  private func step(_ query: OpaquePointer) throws(ProtFSError) -> Bool {
    switch budget.run({ sqlite3_step(query) }) {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    case let code:
      if let exceeded = budget.exceeded { throw overBudget(exceeded) }
      let why = database.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
      throw ProtFSError(
        .malformed, "Cannot read the backup's Manifest.db '\(databasePath)': \(why).", path: databasePath)
    }
  }

  /// The error of a manifest that took more of SQLite than `limits` allow.
  private func overBudget(_ exceeded: String) -> ProtFSError {
    ProtFSError(
      .malformed,
      "Reading the backup's Manifest.db '\(databasePath)' took \(exceeded), more than any phone's backup takes: it is not read.",
      path: databasePath)
  }

  /// Throws unless `query`'s `column` (named `name`) holds at most `limit` bytes.
  private func requireLength(_ query: OpaquePointer, _ column: Int32, _ name: String, _ limit: Int)
    throws(ProtFSError)
  {
    let length = Int(sqlite3_column_bytes(query, column))
    guard length <= limit else {
      throw ProtFSError(
        .malformed,
        "The backup's Manifest.db '\(databasePath)' has a \(name) of \(length) bytes, more than the \(limit) protfs reads: it is not an iOS backup's.",
        path: databasePath)
    }
  }

  /// Throws once more than `limits.rows` rows were read.
  private func requireRows(_ count: Int) throws(ProtFSError) {
    guard count <= limits.rows else {
      throw ProtFSError(
        .malformed, "The backup's Manifest.db '\(databasePath)' holds more than \(limits.rows) files.",
        path: databasePath)
    }
  }

  /// The domains of the backup and how many rows each has, in the order of their names.
  package func domains() throws(ProtFSError) -> [(domain: String, rows: Int)] {
    let query = try statement("SELECT domain, count(*) FROM Files GROUP BY domain ORDER BY domain")
    defer { sqlite3_finalize(query) }
    var domains: [(String, Int)] = []
    var total = 0
    while try step(query) {
      total += Int(sqlite3_column_int64(query, 1))
      try requireRows(total)
      try requireLength(query, 0, "domain", limits.domainBytes)
      domains.append(
        (sqlite3_column_text(query, 0).map { String(cString: $0) } ?? "", Int(sqlite3_column_int64(query, 1))))
    }
    return domains
  }

  /// Calls `body` with every row of the app domains (`AppDomain…`), ordered by domain and then by
  /// path (parents before what they hold), one at a time. A row that cannot be read is listed in
  /// `unreadable` instead. Rows of domains that `include` refuses are passed over unread.
  package func forEachEntry(
    including include: (String) -> Bool = { _ in true }, _ body: (Entry) throws(ProtFSError) -> Void
  ) throws(ProtFSError) {
    let query = try statement(
      "SELECT fileID, domain, relativePath, flags, file FROM Files WHERE domain GLOB 'AppDomain*' "
        + "ORDER BY domain, relativePath")
    defer { sqlite3_finalize(query) }
    func text(_ column: Int32) -> String {
      sqlite3_column_text(query, column).map { String(cString: $0) } ?? ""
    }
    var domain = ""
    var domainBytes: [UInt8] = []
    var included = false
    var rows = 0
    while try step(query) {
      rows += 1
      try requireRows(rows)
      try requireLength(query, 1, "domain", limits.domainBytes)
      // The domain is the same as the last row's for all but a few rows: compared, not copied.
      let length = Int(sqlite3_column_bytes(query, 1))
      if let raw = sqlite3_column_text(query, 1),
        length != domainBytes.count || memcmp(raw, domainBytes, length) != 0
      {
        domainBytes = Array(UnsafeBufferPointer(start: raw, count: length))
        domain = String(decoding: domainBytes, as: UTF8.self)
        included = include(domain)
      }
      guard included else { continue }
      try requireLength(query, 0, "fileID", limits.fileIDBytes)
      try requireLength(query, 2, "relativePath", limits.relativePathBytes)
      try requireLength(query, 4, "file (an MBFile archive)", limits.metadataBytes)
      let relativePath = text(2)
      let flags = sqlite3_column_int64(query, 3)
      guard let kind = Kind(rawValue: Int(flags)) else {
        noteUnreadable("\(domain)/\(relativePath): flags \(flags) name no file, directory or symlink")
        continue
      }
      let count = Int(sqlite3_column_bytes(query, 4))
      let metadata = sqlite3_column_blob(query, 4).flatMap {
        BackupFileMetadata(archive: UnsafeRawBufferPointer(start: $0, count: count))
      }
      guard let metadata else {
        noteUnreadable("\(domain)/\(relativePath): its metadata is not an MBFile archive")
        continue
      }
      try body(Entry(fileID: text(0), domain: domain, relativePath: relativePath, kind: kind, metadata: metadata))
    }
    if unreadableCount > Self.unreadableLimit {
      unreadable.append("and \(unreadableCount - Self.unreadableLimit) more rows")
    }
  }

  private func noteUnreadable(_ problem: String) {
    unreadableCount += 1
    if unreadableCount <= Self.unreadableLimit { unreadable.append(problem) }
  }
}
