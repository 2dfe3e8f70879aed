import CSQLite
import Foundation
import ProtFS
import ProtFSSystem

/// An iOS backup folder, as Finder, iTunes and `idevicebackup2` write one (docs/import-backup.md):
/// `Manifest.db`, an SQLite database with one row a file (`Files`: `fileID`, `domain`,
/// `relativePath`, `flags`, and `file`, the file's metadata as an NSKeyedArchiver plist), and the
/// file store `xx/<fileID>`. Read only, never followed out of the folder.
package struct BackupManifest: Sendable {
  /// What a row describes (the `flags` column).
  package enum Kind: Int, Sendable {
    case file = 1
    case directory = 2
    case symlink = 4
  }

  /// One file, directory or symlink of the backup.
  package struct Entry: Sendable {
    /// The store's name for its contents: 40 hexadecimal digits.
    package var fileID: String
    /// Its domain (`AppDomain-com.example.app`).
    package var domain: String
    /// Its path inside the domain.
    package var relativePath: String
    /// What it is.
    package var kind: Kind
    /// Its metadata.
    package var metadata: BackupFileMetadata
  }

  /// The backup folder.
  package let path: String
  /// Every row, in the order of their paths (parents first).
  package let entries: [Entry]
  /// Rows that could not be read, each with why.
  package let unreadable: [String]

  /// The most rows read: a real phone's backup holds a few hundred thousand.
  package static let rowLimit = 5_000_000

  /// Reads the backup at `path`; throws when it is no backup, or an encrypted one.
  package init(path: String) throws(ProtFSError) {
    self.path = path
    let manifestPlist = path + "/Manifest.plist"
    if let data = FileManager.default.contents(atPath: manifestPlist),
      let plist = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any],
      (plist["IsEncrypted"] as? Bool) == true
    {
      throw ProtFSError(
        .invalidArgument, "The backup '\(path)' is encrypted; protfs imports unencrypted backups only so far.",
        path: path,
        remedy: .advice(
          "make an unencrypted backup (turn off \"Encrypt local backup\" in Finder, or idevicebackup2 encryption off)"))
    }
    let database = path + "/Manifest.db"
    var status = stat()
    guard case .success = valueOrErrno(.stat, { lstat(database, &status) }), status.st_mode & S_IFMT == S_IFREG else {
      throw ProtFSError(
        .notFound, "'\(path)' is not an iOS backup: it has no Manifest.db.", path: path,
        remedy: .advice("give the folder that holds Manifest.db, Manifest.plist and Info.plist"))
    }
    var db: OpaquePointer?
    let uri =
      "file:" + (database.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? database)
      + "?mode=ro&immutable=1"
    guard sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK, let db else {
      if let db { sqlite3_close_v2(db) }
      throw ProtFSError(.malformed, "Cannot open the backup's Manifest.db '\(database)'.", path: database)
    }
    defer { sqlite3_close_v2(db) }
    var statement: OpaquePointer?
    let query = "SELECT fileID, domain, relativePath, flags, file FROM Files ORDER BY domain, relativePath"
    guard sqlite3_prepare_v2(db, query, -1, &statement, nil) == SQLITE_OK, let statement else {
      throw ProtFSError(
        .malformed,
        "The backup's Manifest.db '\(database)' has no Files table as iOS writes it: \(String(cString: sqlite3_errmsg(db))).",
        path: database)
    }
    defer { sqlite3_finalize(statement) }
    var entries: [Entry] = []
    var unreadable: [String] = []
    func text(_ column: Int32) -> String? {
      guard let raw = sqlite3_column_text(statement, column) else { return nil }
      return String(cString: raw)
    }
    while true {
      let step = sqlite3_step(statement)
      if step == SQLITE_DONE { break }
      guard step == SQLITE_ROW else {
        throw ProtFSError(.malformed, "Cannot read the backup's Manifest.db '\(database)'.", path: database)
      }
      guard entries.count + unreadable.count < Self.rowLimit else {
        throw ProtFSError(
          .malformed, "The backup's Manifest.db '\(database)' holds more than \(Self.rowLimit) files.", path: database)
      }
      let fileID = text(0) ?? ""
      let domain = text(1) ?? ""
      let relativePath = text(2) ?? ""
      let where_ = "\(domain)/\(relativePath)"
      guard let kind = Kind(rawValue: Int(sqlite3_column_int64(statement, 3))) else {
        unreadable.append("\(where_): flags \(sqlite3_column_int64(statement, 3)) name no file, directory or symlink")
        continue
      }
      let count = Int(sqlite3_column_bytes(statement, 4))
      let blob = sqlite3_column_blob(statement, 4).map { Data(bytes: $0, count: count) } ?? Data()
      guard let metadata = BackupFileMetadata(archive: blob) else {
        unreadable.append("\(where_): its metadata is not an MBFile archive")
        continue
      }
      entries.append(
        Entry(fileID: fileID, domain: domain, relativePath: relativePath, kind: kind, metadata: metadata))
    }
    self.entries = entries
    self.unreadable = unreadable
  }

  /// Where `entry`'s contents are in the file store (`bucket/name`, below the backup folder), when
  /// its file ID names a place there: 40 lowercase hexadecimal digits.
  package func storeName(_ entry: Entry) -> (bucket: String, name: String)? {
    guard entry.fileID.utf8.count == 40,
      entry.fileID.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
    else { return nil }
    return (String(entry.fileID.prefix(2)), entry.fileID)
  }
}

/// A file's metadata, as the backup's `MBFile` archive records it.
package struct BackupFileMetadata: Sendable, Equatable {
  /// The permission and type bits.
  package var mode: UInt32
  /// The size in bytes.
  package var size: Int64
  /// The Data Protection class number (1 complete, 2 complete-unless-open, 3 until-first-auth, 4
  /// none; anything else is unknown).
  package var protectionClass: Int64
  /// Seconds since 1970.
  package var lastModified: Int64
  /// Seconds since 1970.
  package var birth: Int64
  /// A symlink's target.
  package var target: String?
  /// The digest of the contents (SHA-1, or SHA-256), where the manifest records one.
  package var digest: Data?

  /// The metadata in `archive`, or nil when it holds none.
  init?(archive: Data) {
    // Parsed first by PropertyListSerialization, which answers any bytes with an error: only an
    // archive of the expected shape reaches NSKeyedUnarchiver, which stops the process on some
    // inconsistencies unless told to fail softly (below).
    guard !archive.isEmpty, archive.count <= 1 << 20,
      let plist = try? PropertyListSerialization.propertyList(from: archive, format: nil) as? [String: Any],
      plist["$archiver"] as? String == "NSKeyedArchiver", let objects = plist["$objects"] as? [Any],
      objects.count <= 4096, plist["$top"] is [String: Any],
      let unarchiver = try? NSKeyedUnarchiver(forReadingFrom: archive)
    else { return nil }
    unarchiver.decodingFailurePolicy = .setErrorAndReturn
    unarchiver.requiresSecureCoding = false
    unarchiver.setClass(MBFileArchive.self, forClassName: "MBFile")
    guard let file = unarchiver.decodeObject(forKey: NSKeyedArchiveRootObjectKey) as? MBFileArchive,
      unarchiver.error == nil
    else { return nil }
    mode = UInt32(truncatingIfNeeded: file.mode)
    size = max(0, file.size)
    protectionClass = file.protectionClass
    lastModified = file.lastModified
    birth = file.birth
    target = file.target
    digest = file.digest
  }

  /// The class `protectionClass` names, or nil for a number that names none.
  package var knownClass: ProtectionClass? {
    switch protectionClass {
    case 1: .complete
    case 2: .completeUnlessOpen
    case 3: .completeUntilFirstUserAuthentication
    case 4: ProtectionClass.none
    default: nil
    }
  }
}

/// The `MBFile` class of a backup's archives, for NSKeyedUnarchiver.
final class MBFileArchive: NSObject, NSCoding {
  let mode: Int64
  let size: Int64
  let protectionClass: Int64
  let lastModified: Int64
  let birth: Int64
  let target: String?
  let digest: Data?

  init?(coder: NSCoder) {
    mode = coder.decodeInt64(forKey: "Mode")
    size = coder.decodeInt64(forKey: "Size")
    protectionClass = coder.decodeInt64(forKey: "ProtectionClass")
    lastModified = coder.decodeInt64(forKey: "LastModified")
    birth = coder.decodeInt64(forKey: "Birth")
    // Read only where present: a missing key is an error to this unarchiver.
    target = coder.containsValue(forKey: "Target") ? coder.decodeObject(forKey: "Target") as? String : nil
    digest = coder.containsValue(forKey: "Digest") ? coder.decodeObject(forKey: "Digest") as? Data : nil
  }

  func encode(with coder: NSCoder) {}
}
