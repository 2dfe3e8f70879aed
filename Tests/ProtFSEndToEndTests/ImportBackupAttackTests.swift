import Foundation
import ProtFSTestSupport
import Testing

/// `protfs import-backup` run by root on a backup someone else wrote (issue 61, hole 6): `nobody`
/// owns the folder and every byte in it, swaps it while root reads, links root's files into it,
/// and writes databases and plists meant to hang or exhaust the import. Each attack is run as that
/// user would run it, and each must end in a clear refusal or a harmless container.
@Suite struct ImportBackupAttackTests {
  /// `nobody`.
  static let nobody: uid_t = 65534
  /// The Python prelude that loads scripts/make-backup.py as `make`, for scripts run as `nobody`:
  /// from the copy `make()` puts in the test's directory, since `nobody` may not read the clone
  /// (CI clones into a 0700 temporary directory).
  static func prelude(_ t: TestDevice) -> String {
    RepositoryLayout.makeBackupModule.replacingOccurrences(of: script, with: t.directory + "/make-backup.py")
  }
  /// scripts/make-backup.py.
  static let script = RepositoryLayout.packageRoot + "/scripts/make-backup.py"

  /// A fresh device, and beside it a folder of `nobody`'s and a copy of scripts/make-backup.py.
  func make() throws -> (TestDevice, String) {
    let t = try TestDevice()
    try FileManager.default.copyItem(atPath: Self.script, toPath: t.directory + "/make-backup.py")
    #expect(chmod(t.directory + "/make-backup.py", 0o644) == 0)
    let folder = t.directory + "/nobody"
    #expect(mkdir(folder, 0o755) == 0 && chown(folder, Self.nobody, Self.nobody) == 0)
    return (t, folder)
  }

  /// Runs the Python `script` with `arguments`, as `nobody` when `uid` says so, to its end.
  func python(_ script: String, _ arguments: [String] = [], as uid: uid_t = 0) async throws -> RunResult {
    let command = ["/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3"]
    let result = try await Protfs.runProgram(command[0], Array(command.dropFirst()) + ["-c", script] + arguments)
    #expect(result.status == 0, "\(result)")
    return result
  }

  /// The report of `import-backup --json`.
  func report(_ result: RunResult) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result)")
  }

  /// The report of the container `id` in `report`.
  func container(_ report: [String: Any], _ id: String) -> [String: Any] {
    (report["containers"] as? [[String: Any]])?.first { $0["bundleID"] as? String == id } ?? [:]
  }

  /// `nobody` writes a backup whose first app has 2,000 files and whose second asks, by its
  /// file ID, for the contents of root's own `Documents/secret.txt`. When root's import opens
  /// the first app's first file, `nobody` swaps its backup folder for a link to root's backup
  /// (which it cannot read itself); an import that opened the folder again by its path for the
  /// second app would copy root's secret into the container `nobody`'s backup made.
  @Test func aBackupFolderSwappedForALinkDuringTheImportGivesNothingOfWhereItPoints() async throws {
    let (t, folder) = try make()
    let roots = t.directory + "/root"
    #expect(mkdir(roots, 0o700) == 0)
    let rootsMade = try await Protfs.runProgram("/usr/bin/python3", [Self.script, roots + "/backup"])
    #expect(rootsMade.status == 0, "\(rootsMade)")
    let backup = folder + "/backup"
    let made = try await python(
      """
      import os, sys
      \(Self.prelude(t))
      out = sys.argv[1]
      database = make.new_manifest(out)
      rows = []
      for index in range(2000):
          relative = 'f%04d' % index
          file_id = make.file_id('AppDomain-com.attacker.first', relative)
          rows.append((file_id, 'AppDomain-com.attacker.first', relative, 1,
                       make.archive(relative, 0o100644, 1, 4, None)))
          os.makedirs(os.path.join(out, file_id[:2]), exist_ok=True)
          with open(os.path.join(out, file_id[:2], file_id), 'wb') as handle:
              handle.write(b'x')
      # Root's secret, by the file ID every backup gives it; no digest, nothing in this store.
      rows.append((make.file_id('AppDomain-com.example.notes', 'Documents/secret.txt'),
                   'AppDomain-com.attacker.second', 'loot', 1, make.archive('loot', 0o100644, 21, 4, None)))
      database.executemany('INSERT INTO Files VALUES (?, ?, ?, ?, ?)', rows)
      database.commit()
      database.close()
      make.write_plists(out, {'IsEncrypted': False}, {})
      print(make.file_id('AppDomain-com.attacker.first', 'f0000')[:2])
      """, [backup], as: Self.nobody)
    let bucket = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    let swapper = try Attacker.Running([
      "/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "/usr/bin/python3",
      "-c",
      """
      import ctypes, os, select, sys
      backup, target, bucket = sys.argv[1:4]
      libc = ctypes.CDLL('libc.so.6', use_errno=True)
      watch = libc.inotify_init()
      libc.inotify_add_watch(watch, (backup + '/' + bucket).encode(), 0x20)  # IN_OPEN
      print('watching', flush=True)
      # Bounded: an import that never opens the bucket ends the attack, not the test's wait.
      if not select.select([watch], [], [], 60)[0]:
          print('never opened', flush=True)
          sys.exit(1)
      os.read(watch, 4096)
      os.rename(backup, backup + '.real')
      os.symlink(target, backup)
      print('swapped', flush=True)
      """,
      backup, roots + "/backup", bucket,
    ])
    defer { swapper.stop() }
    #expect(await swapper.read(until: "watching").contains("watching"))
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup, "--json"])
    #expect(await swapper.read(until: "swapped").contains("swapped"), "the attack never ran")
    #expect(result.status == 0, "\(result)")
    let loot = t.containerPath("com.attacker.second", "loot")
    #expect(FileManager.default.contents(atPath: loot) != Data("the passcode is 1234\n".utf8), "root's secret leaked")
    #expect(container(try report(result), "com.attacker.second")["missingContents"] as? [String] == ["loot"])
  }

  /// A store file that is a hard link to a file of root's (which `nobody` makes where
  /// `fs.protected_hardlinks` is 0; the test makes it as root), and one far larger than the
  /// `Size` its row records (24 KiB of data in a sparse 256 MiB file), are refused: each is made
  /// a sparse file of its recorded size and listed. A sparse file of its own size stays sparse.
  @Test func storeFilesAreRegularSingleLinkedAndNoLargerThanTheirSize() async throws {
    let (t, folder) = try make()
    let backup = folder + "/backup"
    let secret = t.directory + "/root-secret"
    try "root's only\n".write(toFile: secret, atomically: false, encoding: .utf8)
    #expect(chmod(secret, 0o600) == 0)
    let made = try await python(
      """
      import os, sys
      \(Self.prelude(t))
      out = sys.argv[1]
      database = make.new_manifest(out)
      domain = 'AppDomain-com.attacker.app'
      def row(relative, size):
          file_id = make.file_id(domain, relative)
          database.execute('INSERT INTO Files VALUES (?, ?, ?, ?, ?)',
                           (file_id, domain, relative, 1, make.archive(relative, 0o100644, size, 4, None)))
          os.makedirs(os.path.join(out, file_id[:2]), exist_ok=True)
          return os.path.join(out, file_id[:2], file_id)
      row('linked', 12)
      with open(row('bloated', 24576), 'wb') as handle:
          handle.write(b'b' * 24576)
          handle.truncate(256 << 20)
      with open(row('sparse', 64 << 20), 'wb') as handle:
          handle.write(b'head')
          handle.seek(32 << 20)
          handle.write(b'middle')
          handle.truncate(64 << 20)
      database.commit()
      make.write_plists(out, {'IsEncrypted': False}, {})
      print(make.file_id(domain, 'linked'))
      """, [backup], as: Self.nobody)
    let id = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    #expect(link(secret, backup + "/" + id.prefix(2) + "/" + id) == 0)

    let result = try await Protfs.run(["--device", t.root, "import-backup", backup, "--json"])
    #expect(result.status == 0, "\(result)")
    let refused = container(try report(result), "com.attacker.app")["refusedContents"] as? [String] ?? []
    #expect(refused.contains { $0.hasPrefix("linked: ") && $0.contains("link") }, "\(result)")
    #expect(refused.contains { $0.hasPrefix("bloated: ") && $0.contains("24576") }, "\(result)")
    var status = stat()
    let linkedCopy = t.containerPath("com.attacker.app", "linked")
    #expect(FileManager.default.contents(atPath: linkedCopy) == Data(count: 12), "root's file was copied")
    #expect(stat(t.containerPath("com.attacker.app", "bloated"), &status) == 0)
    #expect(status.st_size == 24576 && status.st_blocks == 0, "\(status.st_size) bytes, \(status.st_blocks) blocks")
    let sparse = t.containerPath("com.attacker.app", "sparse")
    #expect(stat(sparse, &status) == 0 && status.st_size == 64 << 20)
    #expect(status.st_blocks * 512 <= 1 << 20, "\(status.st_blocks) blocks: the holes were filled")
    let handle = try #require(FileHandle(forReadingAtPath: sparse))
    defer { try? handle.close() }
    #expect(try handle.read(upToCount: 4) == Data("head".utf8))
    try handle.seek(toOffset: 32 << 20)
    #expect(try handle.read(upToCount: 6) == Data("middle".utf8))
  }

  /// `protfs ARGS`, stopped after 60 s and limited to 2 GiB of address space: a hostile plist
  /// that hangs the import or takes gigabytes ends it (124 or a crash) instead of the machine.
  func bounded(_ arguments: [String]) async throws -> RunResult {
    try await Protfs.runProgram(
      "/usr/bin/timeout", ["60", "/usr/bin/prlimit", "--as=\(2 << 30)", Protfs.binary] + arguments)
  }

  /// A `Files` that is a view recursing forever (the import once ran it at 100% CPU until
  /// killed) is refused at once: the manifest is read from a table of that name only.
  @Test func aFilesViewIsRefusedAtOnce() async throws {
    let (t, folder) = try make()
    let backup = folder + "/backup"
    let made = try await Protfs.runProgram("/usr/bin/python3", [Self.script, backup])
    #expect(made.status == 0, "\(made)")
    _ = try await python(
      """
      import sqlite3, sys
      database = sqlite3.connect(sys.argv[1])
      database.execute('DROP TABLE Files')
      database.execute('''CREATE VIEW Files AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
                          SELECT printf('%040x', i) AS fileID, 'AppDomain-com.example.loop' AS domain,
                                 'f' || i AS relativePath, 1 AS flags, x'' AS file FROM n''')
      database.commit()
      """, [backup + "/Manifest.db"])
    let started = Date()
    let result = try await bounded(["--device", t.root, "import-backup", backup])
    #expect(result.status == 1 && result.stderr.contains("view"), "\(result)")
    #expect(result.stderr.contains(backup + "/Manifest.db"), "\(result)")
    #expect(Date().timeIntervalSince(started) < 30)
  }

  /// The Python that writes a hostile binary plist to `sys.argv[1]`: `bomb`, 60 arrays each
  /// holding the one before twice (2^60 nodes once expanded, in some 350 bytes), under a
  /// dictionary's `IsEncrypted`; `cycle`, an array that holds itself.
  static let hostilePlist = """
    import struct, sys
    def bplist(objects, top):
        body, offsets = b'bplist00', []
        for encoded in objects:
            offsets.append(len(body))
            body += encoded
        table = len(body)
        body += b''.join(struct.pack('>H', offset) for offset in offsets)
        return body + b'\\0' * 6 + bytes([2, 1]) + struct.pack('>QQQ', len(objects), top, table)
    if sys.argv[2] == 'bomb':
        objects = [bytes([0xA0])] + [bytes([0xA2, level - 1, level - 1]) for level in range(1, 60)]
        objects += [bytes([0x5B]) + b'IsEncrypted', bytes([0xD1, 60, 59])]
        data = bplist(objects, 61)
    else:
        data = bplist([bytes([0xA1, 0])], 0)
    with open(sys.argv[1], 'wb') as handle:
        handle.write(data)
    """

  /// A `Manifest.plist` whose object graph expands without end, one that holds itself, and a
  /// sparse one of 512 MiB are each refused with a clear error, promptly; nothing is imported.
  @Test func aHostileManifestPlistIsRefusedPromptly() async throws {
    let (t, folder) = try make()
    let backup = folder + "/backup"
    let made = try await Protfs.runProgram("/usr/bin/python3", [Self.script, backup])
    #expect(made.status == 0, "\(made)")
    let plist = backup + "/Manifest.plist"
    for kind in ["bomb", "cycle"] {
      _ = try await python(Self.hostilePlist, [plist, kind])
      let started = Date()
      let result = try await bounded(["--device", t.root, "import-backup", backup])
      #expect(result.status == 1, "\(kind): \(result)")
      #expect(result.stderr.contains(plist) && result.stderr.contains("property list"), "\(kind): \(result)")
      #expect(Date().timeIntervalSince(started) < 30, "\(kind)")
    }
    #expect(truncate(plist, 512 << 20) == 0)
    let huge = try await bounded(["--device", t.root, "import-backup", backup])
    #expect(huge.status == 1 && huge.stderr.contains(plist) && huge.stderr.contains("larger than"), "\(huge)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.notes")))
  }

  /// The same plists as an app's `Info.plist`: `app install` refuses them, promptly.
  @Test func aHostileInfoPlistIsRefusedPromptlyByAppInstall() async throws {
    let t = try TestDevice(containers: ["com.example.hostile"])
    let plist = t.directory + "/Info.plist"
    for kind in ["bomb", "cycle"] {
      _ = try await python(Self.hostilePlist, [plist, kind])
      let result = try await bounded(
        ["--device", t.root, "app", "install", "com.example.hostile", "--info-plist", plist, "--", "/bin/true"])
      #expect(result.status == 1, "\(kind): \(result)")
      #expect(result.stderr.contains(plist) && result.stderr.contains("property list"), "\(kind): \(result)")
    }
  }

  /// Importing into a locked device leaves each item as a lock would have left it, had it been
  /// there at the lock: a class-A file is out of the app user's reach until the unlock, which
  /// gives it its mode back.
  @Test func importedItemsMeetTheDevicesLockStateAsIfTheyHadBeenThereAtTheLock() async throws {
    let t = try TestDevice()
    let backup = t.directory + "/backup"
    let made = try await Protfs.runProgram("/usr/bin/python3", [Self.script, backup])
    #expect(made.status == 0, "\(made)")
    let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]
    #expect(
      try await Protfs.run(["--device", t.root, "passcode", "set", "--passcode", "1234"], environment: cheap).status
        == 0)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let imported = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(imported.status == 0, "\(imported)")
    let secret = t.containerPath("com.example.notes", "Documents/secret.txt")
    let asApp = ["/usr/bin/setpriv", "--reuid=501", "--regid=501", "--clear-groups", "/bin/cat", secret]
    var status = stat()
    #expect(stat(secret, &status) == 0 && status.st_mode & 0o777 == 0, "\(String(status.st_mode, radix: 8))")
    let locked = try await Protfs.runProgram(asApp[0], Array(asApp.dropFirst()))
    #expect(locked.status != 0 && !locked.stdout.contains("passcode"), "\(locked)")
    // Class C (until first authentication) stays readable after the first unlock, as on iOS.
    let notes = t.containerPath("com.example.notes", "Documents/notes.sqlite")
    #expect(stat(notes, &status) == 0 && status.st_mode & 0o777 == 0o644)

    #expect(try await Protfs.run(["--device", t.root, "unlock", "--passcode", "1234"]).status == 0)
    #expect(stat(secret, &status) == 0 && status.st_mode & 0o7777 == 0o600 && status.st_uid == 501)
    let unlocked = try await Protfs.runProgram(asApp[0], Array(asApp.dropFirst()))
    #expect(unlocked.status == 0 && unlocked.stdout == "the passcode is 1234\n", "\(unlocked)")
  }
}
