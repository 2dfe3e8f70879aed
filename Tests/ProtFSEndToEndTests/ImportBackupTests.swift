import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs import-backup` on backups the tests write (scripts/make-backup.py: Manifest.db, MBFile
/// archives, the file store): every class number, a symlink, absent contents, contents that do not
/// have their digest, hostile paths, a domain that is no app's, encrypted backups (the right, a
/// wrong and no password; hostile keybags) and garbage metadata; then the audit on the result.
@Suite struct ImportBackupTests {
  static let app = "com.example.notes"

  /// A fresh device and a backup written by the script (`--encrypted` when asked).
  func make(encrypted: Bool = false) async throws -> (TestDevice, String) {
    let t = try TestDevice()
    let backup = t.directory + "/backup"
    let script = RepositoryLayout.packageRoot + "/scripts/make-backup.py"
    let made = try await Protfs.runProgram("/usr/bin/python3", [script, backup] + (encrypted ? ["--encrypted"] : []))
    #expect(made.status == 0, "\(made)")
    return (t, backup)
  }

  /// Counts of one read in the singular: "1 symlink", "1 entry of 1 domain" (issue 64).
  @Test func theTextCountsOneInTheSingular() async throws {
    let (t, backup) = try await make()
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.contains("Imported \(Self.app): 7 files, 3 directories, 1 symlink ("), "\(result)")
    #expect(result.stdout.contains("Skipped 1 entry of 1 domain that is not an app container."), "\(result)")
  }

  @Test func everyClassNumberSymlinkAndAbsentFileIsImportedAndNothingLeavesTheContainer() async throws {
    let (t, backup) = try await make()
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup, "--json"])
    #expect(result.status == 0, "\(result)")
    let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    let containers = report["containers"] as? [[String: Any]] ?? []
    #expect(containers.map { $0["bundleID"] as? String } == [Self.app, "group.com.example.shared"], "\(report)")
    let notes = containers.first ?? [:]
    #expect(notes["files"] as? Int == 7 && notes["directories"] as? Int == 3 && notes["symlinks"] as? Int == 1)
    #expect(notes["missingContents"] as? [String] == ["Documents/missing.bin"])
    #expect(notes["mismatchedContents"] as? [String] == ["Documents/tampered.db"], "\(notes)")
    #expect(notes["unknownClasses"] as? [String] == ["tmp/odd.bin: 7"])
    #expect((notes["skipped"] as? [String])?.count == 2, "\(notes)")
    #expect(report["skippedDomains"] as? [String: Int] == ["HomeDomain": 1])
    #expect((report["unreadable"] as? [String])?.first?.contains("flags 8") == true)

    let root = t.containerPath(Self.app) + "/"
    #expect(t.rawClass(root + "Documents/secret.txt") == "NSFileProtectionComplete")
    #expect(t.rawClass(root + "Library/Preferences/com.example.notes.plist") == "NSFileProtectionCompleteUnlessOpen")
    #expect(t.rawClass(root + "Documents/notes.sqlite") == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    #expect(t.rawClass(root + "Library/Caches/cache.bin") == "NSFileProtectionNone")
    #expect(t.rawClass(root + "Library/Caches") == "NSFileProtectionNone")
    #expect(t.rawClass(root + "tmp/odd.bin") == nil)
    #expect(FileManager.default.contents(atPath: root + "Documents/secret.txt") == Data("the passcode is 1234\n".utf8))
    #expect(try FileManager.default.destinationOfSymbolicLink(atPath: root + "Documents/latest") == "notes.sqlite")
    var status = stat()
    #expect(lstat(root + "Documents/secret.txt", &status) == 0)
    #expect(status.st_mode & 0o7777 == 0o600 && status.st_mtim.tv_sec == 1_700_000_000)
    #expect(status.st_uid == (geteuid() == 0 ? 501 : geteuid()))
    #expect(stat(root + "Documents/missing.bin", &status) == 0 && status.st_size == 5000 && status.st_blocks == 0)
    // Contents that do not have their digest are not trusted: the file is sparse, of the recorded size.
    #expect(stat(root + "Documents/tampered.db", &status) == 0 && status.st_size == 18 && status.st_blocks == 0)
    #expect(t.rawClass(root + "Documents/tampered.db") == "NSFileProtectionComplete")
    // Contents with their digest, and contents whose MBFile records none, are copied.
    #expect(FileManager.default.contents(atPath: root + "Documents/notes.sqlite")?.count == 4016)
    #expect(
      FileManager.default.contents(atPath: root + "Library/Caches/cache.bin")
        == Data(String(repeating: "cache", count: 100).utf8))
    #expect(stat(root + "Documents", &status) == 0 && status.st_mtim.tv_sec == 1_700_000_000)
    for escaped in ["escaped", "escaped2"] {
      for directory in [t.directory, t.root, t.root + "/Containers", root] {
        #expect(!FileManager.default.fileExists(atPath: directory + "/" + escaped), "\(directory)/\(escaped)")
      }
    }
    // Nothing is left in staging.
    let staging = (try? FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs/staging")) ?? []
    #expect(staging.isEmpty, "\(staging)")

    // The audit runs on the imported containers as on any: the unless-open plist is world-readable.
    let audit = try await Protfs.run(["--device", t.root, "audit", "--format", "json"])
    #expect(audit.stdout.contains("PFS003") && audit.stdout.contains("com.example.notes.plist"), "\(audit)")
  }

  @Test func anExistingContainerIsRefusedUnlessReplacedAndBundleAndMetadataOnlyLimitTheImport() async throws {
    let (t, backup) = try await make()
    let first = try await Protfs.run(["--device", t.root, "import-backup", backup, "--bundle", Self.app])
    #expect(first.status == 0 && first.stdout.contains("Imported \(Self.app)"), "\(first)")
    #expect(first.stdout.contains("contents do not match the manifest's digest (sparse): Documents/tampered.db"))
    #expect(!FileManager.default.fileExists(atPath: t.root + "/Containers/group.com.example.shared"))
    let again = try await Protfs.run(["--device", t.root, "import-backup", backup, "--bundle", Self.app])
    #expect(again.status == 1 && again.stderr.contains("exists on the device") && again.stderr.contains("--replace"))
    let replaced = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--bundle", Self.app, "--replace", "--metadata-only"])
    #expect(replaced.status == 0 && replaced.stdout.contains("(replaced)"), "\(replaced)")
    let notes = t.containerPath(Self.app, "Documents/notes.sqlite")
    var status = stat()
    #expect(stat(notes, &status) == 0 && status.st_size == 4016 && status.st_blocks == 0)
    let unknown = try await Protfs.run(["--device", t.root, "import-backup", backup, "--bundle", "com.example.none"])
    #expect(unknown.status == 1 && unknown.stderr.contains("holds no app domain for 'com.example.none'"))
  }

  @Test func anEncryptedBackupImportsWithItsPasswordFromAFileOrStandardInput() async throws {
    let (t, backup) = try await make(encrypted: true)
    let password = t.directory + "/password"
    try "protfs test password\n".write(toFile: password, atomically: true, encoding: .utf8)
    let result = try await Protfs.run([
      "--device", t.root, "import-backup", backup, "--password-file", password, "--json",
    ])
    #expect(result.status == 0, "\(result)")
    let report = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    let notes = (report["containers"] as? [[String: Any]])?.first ?? [:]
    #expect(notes["files"] as? Int == 8 && notes["directories"] as? Int == 3, "\(notes)")
    #expect(notes["undecryptableContents"] as? [String] == ["Documents/unopenable.bin"], "\(notes)")
    #expect(notes["mismatchedContents"] as? [String] == ["Documents/tampered.db"], "\(notes)")
    #expect(notes["missingContents"] as? [String] == ["Documents/missing.bin"], "\(notes)")
    let root = t.containerPath(Self.app) + "/"
    // Each file decrypted with its own key and cut to its size; its class is the manifest's.
    #expect(FileManager.default.contents(atPath: root + "Documents/secret.txt") == Data("the passcode is 1234\n".utf8))
    #expect(
      FileManager.default.contents(atPath: root + "Library/Caches/cache.bin")
        == Data(String(repeating: "cache", count: 100).utf8))
    #expect(FileManager.default.contents(atPath: root + "Documents/notes.sqlite")?.count == 4016)
    #expect(t.rawClass(root + "Documents/secret.txt") == "NSFileProtectionComplete")
    var status = stat()
    #expect(stat(root + "Documents/unopenable.bin", &status) == 0 && status.st_size == 6 && status.st_blocks == 0)
    // The decrypted Manifest.db was staging's only, and is gone.
    let staging = (try? FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs/staging")) ?? []
    #expect(staging.isEmpty, "\(staging)")

    let piped = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--password-file", "-", "--replace", "--bundle", Self.app],
      stdin: "protfs test password\n")
    #expect(
      piped.status == 0 && piped.stdout.contains("contents cannot be decrypted (sparse): Documents/unopenable.bin"))
  }

  @Test func anEncryptedBackupWithoutItsPasswordOrWithAWrongOneIsOneClearErrorAndNothingIsWritten() async throws {
    let (t, backup) = try await make(encrypted: true)
    let missing = try await Protfs.run(["--device", t.root, "import-backup", backup], stdin: "")
    #expect(
      missing.status == 1 && missing.stderr.contains("is encrypted") && missing.stderr.contains("--password-file"))
    let wrong = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--password-file", "-"], stdin: "not the password\n")
    #expect(wrong.status != 0 && wrong.stderr.contains("The password does not open the encrypted backup '\(backup)'"))
    let empty = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--password-file", "-"], stdin: "\n")
    #expect(empty.status == 2 || empty.status == 1, "\(empty)")
    #expect(empty.stderr.contains("holds no password"), "\(empty)")
    let none = try await Protfs.run(["--device", t.root, "import-backup", t.directory + "/nothing"])
    #expect(none.status == 1 && none.stderr.contains("has no Manifest.db"), "\(none)")
    // Nothing of the device was made by any of them.
    #expect(!FileManager.default.fileExists(atPath: t.root + "/Containers/" + Self.app))
    #expect(!FileManager.default.fileExists(atPath: t.root + "/.protfs/staging"))
  }

  @Test func aHostileEncryptedBackupIsRefusedNamingWhatIsWrong() async throws {
    let (t, backup) = try await make(encrypted: true)
    let password = t.directory + "/password"
    try "protfs test password\n".write(toFile: password, atomically: true, encoding: .utf8)
    let plistPath = backup + "/Manifest.plist"
    let original = try #require(FileManager.default.contents(atPath: plistPath))
    let plist = try #require(try PropertyListSerialization.propertyList(from: original, format: nil) as? [String: Any])
    let keybag = try #require(plist["BackupKeyBag"] as? Data)
    func importing(_ changed: [String: Any]) async throws -> RunResult {
      let data = try PropertyListSerialization.data(fromPropertyList: changed, format: .binary, options: 0)
      try data.write(to: URL(fileURLWithPath: plistPath))
      return try await Protfs.run(["--device", t.root, "import-backup", backup, "--password-file", password])
    }
    // A keybag that asks for more rounds than protfs runs (a hold of hours), cut short, or with
    // a ManifestKey no class key unwraps.
    var rounds = Array(keybag)
    let at = try #require((0..<rounds.count - 12).first { Array(rounds[$0..<$0 + 4]) == Array("DPIC".utf8) })
    rounds.replaceSubrange(at + 8..<at + 12, with: [0x7F, 0xFF, 0xFF, 0xFF])
    var changed = plist
    changed["BackupKeyBag"] = Data(rounds)
    let slow = try await importing(changed)
    #expect(slow.status == 1 && slow.stderr.contains("rounds of PBKDF2"), "\(slow)")
    changed["BackupKeyBag"] = keybag.prefix(keybag.count - 3)
    let cut = try await importing(changed)
    #expect(cut.status == 1 && cut.stderr.contains("keybag") && cut.stderr.contains("damaged"), "\(cut)")
    changed["BackupKeyBag"] = keybag
    changed["ManifestKey"] = Data([4, 0, 0, 0] + [UInt8](repeating: 7, count: 40))
    let manifestKey = try await importing(changed)
    #expect(manifestKey.status == 1 && manifestKey.stderr.contains("ManifestKey"), "\(manifestKey)")
    // A Manifest.db that is not whole AES blocks.
    try original.write(to: URL(fileURLWithPath: plistPath))
    let database = try #require(FileManager.default.contents(atPath: backup + "/Manifest.db"))
    try database.prefix(database.count - 5).write(to: URL(fileURLWithPath: backup + "/Manifest.db"))
    let blocks = try await importing(plist)
    #expect(blocks.status == 1 && blocks.stderr.contains("not whole AES blocks"), "\(blocks)")
    // A Manifest.db with a hole of a GiB (free to make, a GiB of root's disk once decrypted).
    try database.write(to: URL(fileURLWithPath: backup + "/Manifest.db"))
    #expect(truncate(backup + "/Manifest.db", off_t(database.count + (1 << 30))) == 0)
    let sparse = try await importing(plist)
    #expect(sparse.status == 1 && sparse.stderr.contains("has holes"), "\(sparse)")
    #expect(!FileManager.default.fileExists(atPath: t.root + "/Containers/" + Self.app))
    let staging = (try? FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs/staging")) ?? []
    #expect(staging.isEmpty, "\(staging)")
  }

  @Test func garbageMetadataIsReportedWithoutStoppingTheImport() async throws {
    let (t, backup) = try await make()
    let database = backup + "/Manifest.db"
    let garbage = try await Protfs.runProgram(
      "/usr/bin/python3",
      [
        "-c",
        """
        import sqlite3, plistlib, os
        db = sqlite3.connect('\(database)')
        rows = [
            ('a' * 40, os.urandom(300)),
            ('b' * 40, plistlib.dumps({'$archiver': 'NSKeyedArchiver'}, fmt=plistlib.FMT_BINARY)),
            ('c' * 40, plistlib.dumps({'$archiver': 'NSKeyedArchiver', '$top': {'root': plistlib.UID(9)},
                                       '$objects': ['$null']}, fmt=plistlib.FMT_BINARY)),
            ('d' * 40, b''),
        ]
        \(RepositoryLayout.makeBackupModule)
        # A symlink out of the container, then a file below it: never followed.
        db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', ('e' * 40, 'AppDomain-com.example.notes', 'Library/out', 4,
                   make.archive('Library/out', 0o120755, 0, 0, '/tmp')))
        db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', ('1' * 40, 'AppDomain-com.example.notes',
                   'Library/out/planted', 1, make.archive('Library/out/planted', 0o100644, 3, 4, None)))
        # A file whose store bucket is a symlink to a directory outside the backup.
        os.makedirs('\(t.directory)/outside', exist_ok=True)
        open('\(t.directory)/outside/' + '9' * 40, 'w').write('root only')
        os.symlink('\(t.directory)/outside', '\(backup)/99')
        db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', ('9' * 40, 'AppDomain-com.example.notes',
                   'Documents/d', 1, make.archive('Documents/d', 0o100644, 9, 4, None)))
        # A FIFO in the store: opened without blocking, never read; that file is sparse.
        os.makedirs('\(backup)/88', exist_ok=True)
        os.mkfifo('\(backup)/88/' + '8' * 40)
        db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', ('8' * 40, 'AppDomain-com.example.notes',
                   'Documents/fifo', 1, make.archive('Documents/fifo', 0o100644, 9, 4, None)))
        for file_id, blob in rows:
            db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)',
                       (file_id, 'AppDomain-com.example.notes', 'Documents/' + file_id[:1], 1, blob))
        db.commit()
        """,
      ])
    #expect(garbage.status == 0, "\(garbage)")
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(result.status == 0 && result.stdout.contains("Imported \(Self.app)"), "\(result)")
    #expect(result.stderr.components(separatedBy: "is not an MBFile archive").count - 1 == 4, "\(result.stderr)")
    #expect(result.stdout.contains("skipped: Library/out/planted"), "\(result.stdout)")
    // A store whose bucket is a symlink out of the backup is not followed, and a FIFO is no
    // regular file: both are refused, and their files sparse.
    #expect(
      result.stdout.contains("stored contents refused (sparse): Documents/d: its path passes through a symbolic link"),
      "\(result.stdout)")
    #expect(
      result.stdout.contains("stored contents refused (sparse): Documents/fifo: it is a FIFO"), "\(result.stdout)")
    let planted = t.containerPath(Self.app, "Documents/d")
    #expect(FileManager.default.contents(atPath: planted).map { $0.allSatisfy { $0 == 0 } } == true)
    #expect(!FileManager.default.fileExists(atPath: "/tmp/planted"))
    #expect(
      try FileManager.default.destinationOfSymbolicLink(atPath: t.containerPath(Self.app, "Library/out")) == "/tmp")
  }
  /// A backup is anyone's to write (`nobody`'s too): the modes it records are not applied as they
  /// are (issue 61). A set-user-ID program made the app user's would give its writer the app
  /// user's identity, and a world-writable directory every app's data; an iOS container holds
  /// neither, so set-user-ID, set-group-ID, sticky and group or other write bits are dropped.
  @Test func aBackupsModesAreOnlyThoseAContainerCanHold() async throws {
    let (t, backup) = try await make()
    let hostile = try await Protfs.runProgram(
      "/usr/bin/python3",
      [
        "-c",
        """
        import sqlite3
        \(RepositoryLayout.makeBackupModule)
        db = sqlite3.connect('\(backup)/Manifest.db')
        for file_id, relative, flags, mode in [('7' * 40, 'Documents/setuid', 1, 0o106777),
                                               ('6' * 40, 'Documents/drop', 2, 0o41777),
                                               ('5' * 40, 'Documents/shared.txt', 1, 0o100666)]:
            db.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', (file_id, 'AppDomain-com.example.notes', relative,
                       flags, make.archive(relative, mode, 9 if flags == 1 else 0, 4, None)))
        db.commit()
        """,
      ])
    #expect(hostile.status == 0, "\(hostile)")
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(result.status == 0, "\(result)")
    for (relative, mode) in [("Documents/setuid", 0o755), ("Documents/drop", 0o755), ("Documents/shared.txt", 0o644)] {
      var status = stat()
      #expect(lstat(t.containerPath(Self.app, relative), &status) == 0, "\(relative)")
      #expect(status.st_mode & 0o7777 == mode, "\(relative): \(String(status.st_mode & 0o7777, radix: 8))")
    }
  }
}
