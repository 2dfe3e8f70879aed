import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFSBackup

/// A backup's `Manifest.db` is read within bounds (`ManifestLimits`): from a table named `Files`
/// only, with a budget of SQLite's steps and seconds, and rows of bounded number and lengths. Each
/// refusal is one error naming the database and the limit.
@Suite struct ManifestLimitsTests {
  /// A backup of `files` files (scripts/make-backup.py --bulk) in `t`'s directory, then `sql` run
  /// on its Manifest.db.
  func backup(_ t: TestDevice, files: Int = 2_000, sql: String = "") async throws -> String {
    let path = t.directory + "/backup"
    let script = RepositoryLayout.packageRoot + "/scripts/make-backup.py"
    let made = try await Protfs.runProgram("/usr/bin/python3", [script, path, "--bulk", String(files)])
    #expect(made.status == 0, "\(made)")
    if !sql.isEmpty {
      let changed = try await Protfs.runProgram(
        "/usr/bin/python3",
        [
          "-c", "import sqlite3, sys; d = sqlite3.connect(sys.argv[1]); d.executescript(sys.argv[2]); d.commit()",
          path + "/Manifest.db", sql,
        ])
      #expect(changed.status == 0, "\(changed)")
    }
    return path
  }

  /// The error of reading every row of the backup at `path` within `limits`, or nil.
  func refusal(_ path: String, _ limits: ManifestLimits = ManifestLimits()) -> ProtFSError? {
    do throws(ProtFSError) {
      let manifest = try BackupManifest(folder: BackupFolder(path: path), limits: limits)
      _ = try manifest.domains()
      try manifest.forEachEntry { _ in }
      return nil
    } catch {
      return error
    }
  }

  @Test func aBackupWithinTheLimitsIsRead() async throws {
    let t = try TestDevice()
    let error = refusal(try await backup(t))
    #expect(error == nil, "\(String(describing: error))")
  }

  @Test func filesMustBeATable() async throws {
    let t = try TestDevice()
    for (sql, what) in [
      ("ALTER TABLE Files RENAME TO Real; CREATE VIEW Files AS SELECT * FROM Real;", "a view named Files"),
      (
        "DROP TABLE Files; CREATE VIRTUAL TABLE Files USING fts5(fileID, domain, relativePath, flags, file);",
        "a virtual table named Files"
      ),
      ("DROP TABLE Files;", "has no Files table"),
    ] {
      TestDevice.removeTree(t.directory + "/backup")
      let path = try await backup(t, files: 10, sql: sql)
      let error = try #require(refusal(path), "\(sql)")
      #expect(error.message.contains(what) && error.message.contains(path + "/Manifest.db"), "\(error)")
    }
  }

  @Test func sqlitesStepsAndSecondsAreBounded() async throws {
    let t = try TestDevice()
    let path = try await backup(t)
    var steps = ManifestLimits()
    steps.steps = 20_000
    let slow = try #require(refusal(path, steps))
    #expect(slow.message.contains("more than 20000 steps of SQLite's work"), "\(slow)")
    var seconds = ManifestLimits()
    seconds.seconds = 0
    let late = try #require(refusal(path, seconds))
    #expect(late.message.contains("more than 0 seconds of SQLite's work"), "\(late)")
    #expect(late.message.contains(path + "/Manifest.db"), "\(late)")
  }

  @Test(arguments: ["rows", "relativePath", "domain", "fileID", "file"])
  func rowsAreBoundedInNumberAndLength(limit: String) async throws {
    let t = try TestDevice()
    let path = try await backup(t, files: 20)
    var limits = ManifestLimits()
    switch limit {
    case "rows": limits.rows = 10
    case "relativePath": limits.relativePathBytes = 10
    case "domain": limits.domainBytes = 10
    case "fileID": limits.fileIDBytes = 10
    default: limits.metadataBytes = 10
    }
    let error = try #require(refusal(path, limits))
    let said = limit == "rows" ? "more than 10 files" : "has a \(limit) "
    #expect(error.message.contains(said) && error.message.contains("10"), "\(error)")
  }

  @Test func aGeneratedValueLongerThanAnyLimitIsNeverMade() async throws {
    let t = try TestDevice()
    let path = try await backup(
      t, files: 10,
      sql: """
        ALTER TABLE Files RENAME TO Real;
        CREATE TABLE Files (fileID TEXT, domain TEXT, relativePath AS (zeroblob(100000000)), flags INTEGER, file BLOB);
        INSERT INTO Files (fileID, domain, flags, file) SELECT fileID, domain, flags, file FROM Real;
        """)
    let error = try #require(refusal(path))
    #expect(error.message.contains("too big"), "\(error)")
  }
}
