import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs mount`: real programs through a real FUSE mount (docs/semantics.md §7).
@Suite(.serialized) struct MountEndToEndTests {
  /// The five classes, by the names the tests give their files.
  static let classes: [(String, ProtectionClass)] = [
    ("complete", .complete), ("unless-open", .completeUnlessOpen),
    ("until-first-auth", .completeUntilFirstUserAuthentication),
    ("when-inactive", .completeWhenUserInactive), ("none", .none),
  ]

  /// The table of docs/semantics.md §3 as the mount must apply it: per class and state, whether
  /// opening a closed file for reading (r) and for writing (w), and creating (c) are allowed.
  static let table: [String: [String: String]] = [
    "complete": ["unlocked": "rwc", "locked": "---", "inactive": "---", "reboot": "---"],
    "unless-open": ["unlocked": "rwc", "locked": "--c", "inactive": "--c", "reboot": "---"],
    "until-first-auth": ["unlocked": "rwc", "locked": "rwc", "inactive": "rwc", "reboot": "---"],
    "when-inactive": ["unlocked": "rwc", "locked": "rwc", "inactive": "---", "reboot": "---"],
    "none": ["unlocked": "rwc", "locked": "rwc", "inactive": "rwc", "reboot": "rwc"],
  ]

  /// A mounted device with `Documents/<name>.txt` and a directory `Documents/<name>/` per class.
  static func classDevice() async throws -> MountedDevice {
    try await MountedDevice { t in
      for (name, cls) in classes {
        try MountedDevice.file(t, "Documents/\(name).txt", cls, "contents of \(name)\n")
        try MountedDevice.directory(t, "Documents/\(name)", cls)
      }
    }
  }

  @Test func mountShowsTheContainersAndUnmountEndsTheDaemon() async throws {
    let m = try await MountedDevice { t in try MountedDevice.file(t, "Documents/a.txt", nil, "hello\n") }
    let cat = try await m.sh("cat '\(m.documents)/a.txt'")
    #expect(cat.stdout == "hello\n", "\(cat)")
    let status = try await m.protfs(["status", "--json"])
    #expect(status.stdout.contains(m.mountpoint), "\(status)")
    let text = try await m.protfs(["status"])
    #expect(text.stdout.contains("Mounted at:") && text.stdout.contains(m.mountpoint), "\(text)")
    let records = MountRegistry(device: m.t.device).records()
    #expect(records.count == 1)
    let again = try await m.protfs(["mount", m.mountpoint])
    #expect(again.status == 1 && again.stderr.contains("already a protfs mount"), "\(again)")
    let unmount = try await m.protfs(["unmount", m.mountpoint])
    #expect(unmount.status == 0 && unmount.stdout.contains("Unmounted"), "\(unmount)")
    #expect(!MountRegistry.protfsMountpoints().contains(m.mountpoint))
    #expect(MountRegistry(device: m.t.device).records().isEmpty)
    #expect(!MountedDevice.isRunning(records[0].pid), "the daemon still runs")
    let twice = try await m.protfs(["unmount", m.mountpoint])
    #expect(twice.status == 1 && twice.stderr.contains("is not a protfs mount"), "\(twice)")
  }

  @Test func aMountThatCannotBeRecordedIsNotStarted() async throws {
    let t = try TestDevice(containers: [MountedDevice.bundle])
    let mountpoint = t.directory + "/mnt"
    mkdir(mountpoint, 0o755)
    // A file in the way of the registry's directory: `lock` would never find the mount to wait for.
    #expect(FileManager.default.createFile(atPath: t.device.stateDirectory + "/mounts", contents: Data()))
    let mount = try await Protfs.run(["--device", t.root, "mount", mountpoint])
    if MountRegistry.protfsMountpoints().contains(mountpoint) { umount2(mountpoint, 2 /* MNT_DETACH */) }
    #expect(mount.status == 1 && mount.stderr.contains("mounts"), "\(mount)")
    #expect(!MountRegistry.protfsMountpoints().contains(mountpoint))
  }

  @Test(arguments: ["unlocked", "locked", "inactive", "reboot"])
  func everyCellOfTheTableAsRoot(_ state: String) async throws {
    let m = try await Self.classDevice()
    switch state {
    case "locked": #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    case "inactive": #expect(try await m.protfs(["lock", "--grace", "0", "--inactive"]).status == 0)
    case "reboot": #expect(try await m.protfs(["reboot"]).status == 0)
    default: break
    }
    for (name, _) in Self.classes {
      let expected = Array(Self.table[name]![state]!)
      let file = "\(m.documents)/\(name).txt"
      let read = try await m.sh("cat '\(file)'")
      let write = try await m.sh("echo more >> '\(file)'")
      let create = try await m.sh("echo new > '\(m.documents)/\(name)/new.txt'")
      for (what, result, allowed) in [
        ("read", read, expected[0]), ("write", write, expected[1]), ("create", create, expected[2]),
      ] {
        if allowed == "-" {
          #expect(
            result.status != 0 && result.stderr.contains("Operation not permitted"),
            "\(name) \(state) \(what): \(result)")
        } else {
          #expect(result.status == 0, "\(name) \(state) \(what): \(result)")
        }
      }
      // Metadata is never gated: stat, listing, rename, chmod.
      let metadata = try await m.sh(
        "stat '\(file)' >/dev/null && ls '\(m.documents)/\(name)' >/dev/null && mv '\(file)' '\(file).moved' && mv '\(file).moved' '\(file)' && chmod 640 '\(file)' && stat -c %a '\(file)'"
      )
      #expect(metadata.status == 0 && metadata.stdout == "640\n", "\(name) \(state) metadata: \(metadata)")
    }
  }

  @Test func anUnprivilegedUserMeetsEPERMNotEACCES() async throws {
    let m = try await Self.classDevice()
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let none = try await m.sh("cat '\(m.documents)/none.txt'", as: 65534)
    #expect(none.status == 0 && none.stdout == "contents of none\n", "\(none)")
    let complete = try await m.sh("cat '\(m.documents)/complete.txt'", as: 65534)
    #expect(complete.stderr.contains("Operation not permitted"), "\(complete)")
    // The mount shows the modes the owner set, not the lock's: ls as anyone sees rw-r--r--.
    let list = try await m.sh("stat -c '%a %u' '\(m.documents)/complete.txt'", as: 65534)
    #expect(list.stdout == "644 0\n", "\(list)")
    // Permission bits still bind: nobody cannot write into the app user's directory.
    let denied = try await m.sh("echo x > '\(m.documents)/none/x.txt'", as: 65534)
    #expect(denied.stderr.contains("Permission denied"), "\(denied)")
    #expect(try await m.protfs(["unlock"]).status == 0)
    let after = try await m.sh("cat '\(m.documents)/complete.txt'", as: 65534)
    #expect(after.status == 0 && after.stdout == "contents of complete\n", "\(after)")
  }

  @Test func itemsCreatedThroughTheMountGetTheirDirectorysClassAndBelongToTheirCreator() async throws {
    let m = try await Self.classDevice()
    let script = """
      set -e
      cd '\(m.documents)/unless-open'
      echo one > file.txt
      mkdir sub
      echo two > sub/inner.txt
      ln -s file.txt link
      python3 -c 'open("py.txt", "w").write("py")'
      """
    let made = try await m.sh(script, as: 501)
    #expect(made.status == 0, "\(made)")
    let backing = m.backingDocuments + "/unless-open"
    for item in ["file.txt", "sub", "sub/inner.txt", "py.txt"] {
      #expect(m.t.rawClass(backing + "/" + item) == "NSFileProtectionCompleteUnlessOpen", "\(item)")
      var s = stat()
      lstat(backing + "/" + item, &s)
      #expect(s.st_uid == 501 && s.st_gid == 501, "\(item) belongs to \(s.st_uid):\(s.st_gid)")
    }
    var link = stat()
    lstat(backing + "/link", &link)
    #expect(link.st_uid == 501 && link.st_mode & S_IFMT == S_IFLNK)
    // cp and mv: a copy is a new item (the destination's class); a move keeps its class.
    let copy = try await m.sh(
      "cp '\(m.documents)/none.txt' '\(m.documents)/complete/copied.txt' && mv '\(m.documents)/until-first-auth.txt' '\(m.documents)/complete/moved.txt'"
    )
    #expect(copy.status == 0, "\(copy)")
    #expect(m.t.rawClass(m.backingDocuments + "/complete/copied.txt") == "NSFileProtectionComplete")
    #expect(
      m.t.rawClass(m.backingDocuments + "/complete/moved.txt") == "NSFileProtectionCompleteUntilFirstUserAuthentication"
    )
  }

  /// Class none's writes go to the kernel's page cache and are written back to the daemon later:
  /// a write-only handle's partial page is completed by reading the backing file, appends land
  /// where the kernel places them, and a write-only file (mode 0200) takes a partial write.
  @Test func classNoneWritesThroughThePageCacheReachTheBackingFileAsWritten() async throws {
    let m = try await Self.classDevice()
    let script = """
      import os
      path = "\(m.documents)/none/cached.bin"
      with open(path, "wb") as f: f.write(bytes(range(256)) * 40)
      fd = os.open(path, os.O_WRONLY)
      os.pwrite(fd, b"XYZ", 5000); os.close(fd)
      fd = os.open(path, os.O_WRONLY | os.O_APPEND)
      os.write(fd, b"END"); os.close(fd)
      os.chmod(path, 0o200)
      fd = os.open(path, os.O_WRONLY)
      os.pwrite(fd, b"Q", 100); os.fsync(fd); os.close(fd)
      os.chmod(path, 0o644)
      """
    let wrote = try await m.sh("python3 -c '\(script)'", as: 501)
    #expect(wrote.status == 0, "\(wrote)")
    var expected = [UInt8]((0..<40).flatMap { _ in 0...255 })
    expected.replaceSubrange(5000..<5003, with: Array("XYZ".utf8))
    expected += Array("END".utf8)
    expected[100] = UInt8(ascii: "Q")
    let backing = FileManager.default.contents(atPath: m.backingDocuments + "/none/cached.bin")
    #expect(backing.map { [UInt8]($0) } == expected, "backing size \(backing?.count ?? -1)")
    let through = try await m.sh("cmp '\(m.documents)/none/cached.bin' '\(m.backingDocuments)/none/cached.bin'")
    #expect(through.status == 0, "\(through)")
  }

  /// On a nearly full disk class none is written through the daemon: the `write` that finds no
  /// room fails (as on the phone), not the `close` after it, which a program may not check.
  @Test func aFullDiskFailsTheWriteItself() async throws {
    let small = try await SessionServiceFullDiskTests.mountSmallDisk(size: "16m")
    defer { SessionServiceFullDiskTests.unmount(small) }
    let m = try await MountedDevice(in: small) { t in try MountedDevice.directory(t, "Documents/none", .none) }
    let script = """
      import os
      fd = os.open("\(m.documents)/none/fill", os.O_WRONLY | os.O_CREAT)
      try:
          for i in range(32): os.write(fd, bytes(1 << 20))
          print("written")
      except OSError as e: print("write", e.errno)
      os.close(fd)
      """
    let run = try await m.sh("python3 -c '\(script)'")
    #expect(run.stdout == "write \(ENOSPC)\n", "\(run)")
    #expect(try await m.protfs(["unmount", m.mountpoint]).status == 0)
  }

  /// An append-only file (chattr +a) cannot be opened read-write, as the writeback cache would
  /// open it: its appends go through the daemon, each exactly once.
  @Test func anAppendOnlyFileTakesAppendsThroughTheMount() async throws {
    let m = try await Self.classDevice()
    let backing = m.backingDocuments + "/none.txt"
    #expect(try await m.sh("chattr +a '\(backing)'").status == 0)
    let appended = try await m.sh(
      "printf one >> '\(m.documents)/none.txt' && printf two >> '\(m.documents)/none.txt'")
    let overwrite = try await m.sh("printf x > '\(m.documents)/none.txt'")
    #expect(try await m.sh("chattr -a '\(backing)'").status == 0)
    #expect(appended.status == 0, "\(appended)")
    #expect(overwrite.status != 0 && overwrite.stderr.contains("Operation not permitted"), "\(overwrite)")
    let contents = try String(contentsOfFile: backing, encoding: .utf8)
    #expect(contents == "contents of none\nonetwo", "\(contents)")
  }

  /// The kernel may list a directory again from its cache: changes through the mount show at
  /// once, and one made behind it within the cache time (10 s).
  @Test func aRepeatedListingShowsEveryChange() async throws {
    let m = try await Self.classDevice()
    let directory = "\(m.documents)/none"
    func listing() async throws -> [String] {
      let result = try await m.sh("ls -1 '\(directory)'")
      #expect(result.status == 0, "\(result)")
      return result.stdout.split(separator: "\n").map(String.init)
    }
    #expect(try await listing() == [])
    #expect(try await listing() == [])
    #expect(try await m.sh("touch '\(directory)/a' '\(directory)/b'", as: 501).status == 0)
    #expect(try await listing() == ["a", "b"])
    #expect(try await m.sh("mv '\(directory)/a' '\(directory)/c' && rm '\(directory)/b'", as: 501).status == 0)
    #expect(try await listing() == ["c"])
    // Behind the mount: the kernel's cache is not told, and keeps the listing for the cache time.
    try MountedDevice.file(m.t, "Documents/none/behind", nil)
    let deadline = ContinuousClock.now + .seconds(15)
    var seen = try await listing()
    while seen != ["behind", "c"] && ContinuousClock.now < deadline {
      try await Task.sleep(for: .milliseconds(200))
      seen = try await listing()
    }
    #expect(seen == ["behind", "c"])
    let size = try await m.sh("stat -c %s '\(directory)/behind'")
    #expect(size.stdout == "5\n", "\(size)")
  }

  /// A name that is not UTF-8 never reaches its decoded look-alike (another item, with its own
  /// class): it is listed, and its lookup is refused.
  @Test func aNameThatIsNotUTF8IsNeverServedAsItsLookAlike() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/n\u{FFFD}", .none, "decoy\n")
    }
    let made = try await m.sh("printf 'secret\\n' > \"\(m.backingDocuments)/$(printf 'n\\377')\"")
    #expect(made.status == 0, "\(made)")
    let read = try await m.sh("cat \"\(m.documents)/$(printf 'n\\377')\"")
    #expect(read.status != 0 && !read.stdout.contains("decoy"), "\(read)")
    #expect(read.stderr.contains("Invalid or incomplete multibyte"), "\(read)")
    let listed = try await m.sh("ls '\(m.documents)' | od -c")
    #expect(listed.status == 0 && listed.stdout.contains("377"), "\(listed)")
  }

  @Test func setfattrThroughTheMountSetsAClassAsSetClassDoes() async throws {
    let m = try await Self.classDevice()
    let file = "\(m.documents)/none.txt"
    let set = try await m.sh(
      "setfattr -n user.protfs.class -v complete '\(file)' && getfattr --only-values -n user.protfs.class '\(file)'")
    #expect(set.status == 0 && set.stdout == "NSFileProtectionComplete", "\(set)")
    #expect(m.t.rawClass(m.backingDocuments + "/none.txt") == "NSFileProtectionComplete")
    let get = try await m.protfs(["get-class", m.backingDocuments + "/none.txt"])
    #expect(get.stdout.hasPrefix("NSFileProtectionComplete "), "\(get)")
    let garbage = try await m.sh("setfattr -n user.protfs.class -v garbage '\(file)'")
    #expect(garbage.status != 0 && garbage.stderr.contains("Invalid argument"), "\(garbage)")
    let forged = try await m.sh("setfattr -n user.protfs.saved-mode -v '0644 0 0 00' '\(file)'")
    #expect(forged.status != 0 && forged.stderr.contains("Operation not permitted"), "\(forged)")
    let other = try await m.sh("setfattr -n user.note -v hi '\(file)' && getfattr --only-values -n user.note '\(file)'")
    #expect(other.status == 0 && other.stdout == "hi", "\(other)")
    // The new class applies at once: locked, the file is complete now.
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let read = try await m.sh("cat '\(file)'")
    #expect(read.stderr.contains("Operation not permitted"), "\(read)")
    // And cannot be taken away while its key is gone.
    let downgrade = try await m.sh("setfattr -n user.protfs.class -v none '\(file)'")
    #expect(downgrade.stderr.contains("Operation not permitted"), "\(downgrade)")
    // A relabelled directory: what inherits follows it; what has its own class does not.
    #expect(try await m.protfs(["unlock"]).status == 0)
    let dir = "\(m.documents)/none"
    #expect(
      try await m.sh(
        "echo x > '\(dir)/own.txt' && setfattr -x user.protfs.class '\(dir)/own.txt' && echo y > '\(dir)/labelled.txt'"
      ).status == 0)
    #expect(try await m.sh("setfattr -n user.protfs.class -v complete '\(dir)'").status == 0)
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try await m.sh("cat '\(dir)/own.txt'").stderr.contains("Operation not permitted"))
    #expect(try await m.sh("cat '\(dir)/labelled.txt'").stdout == "y\n")
  }

  @Test func aClassSetBehindTheMountDecidesTheNextCreateAtOnce() async throws {
    let m = try await Self.classDevice()
    // The mount has looked the directory up (as class none), then protfs sets it behind the mount.
    #expect(try await m.sh("ls '\(m.documents)/none' >/dev/null").status == 0)
    let set = try await m.protfs(["set-class", "complete", m.backingDocuments + "/none"])
    #expect(set.status == 0, "\(set)")
    #expect(try await m.sh("echo new > '\(m.documents)/none/made-after.txt'").status == 0)
    #expect(m.t.rawClass(m.backingDocuments + "/none/made-after.txt") == "NSFileProtectionComplete")
  }

  @Test func chmodOfALockedFileWaitsForTheUnlock() async throws {
    let m = try await Self.classDevice()
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let file = "\(m.documents)/complete.txt"
    let chmod = try await m.sh("chmod 600 '\(file)' && stat -c %a '\(file)' && cat '\(file)'")
    #expect(chmod.stdout == "600\n" && chmod.stderr.contains("Operation not permitted"), "\(chmod)")
    #expect(m.t.mode(m.backingDocuments + "/complete.txt") == 0, "the backing file stays locked out")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(m.t.mode(m.backingDocuments + "/complete.txt") == 0o600)
    #expect(try await m.sh("cat '\(file)'").stdout == "contents of complete\n")
  }

  @Test func theAppUserCopiesMovesAndChmodsThroughTheMount() async throws {
    let m = try await Self.classDevice()
    let docs = m.documents
    let script = """
      set -e
      echo mine > '\(docs)/unless-open/mine.txt'
      cp '\(docs)/unless-open/mine.txt' '\(docs)/none/copy.txt'
      mv '\(docs)/none/copy.txt' '\(docs)/complete/moved.txt'
      chmod 600 '\(docs)/complete/moved.txt'
      stat -c '%a %u' '\(docs)/complete/moved.txt'
      cat '\(docs)/complete/moved.txt'
      """
    let made = try await m.sh(script, as: 501)
    #expect(made.stdout == "600 501\nmine\n", "\(made)")
    // The copy took the class of the directory it was made in (none) and kept it through the move.
    #expect(m.t.rawClass(m.backingDocuments + "/complete/moved.txt") == "NSFileProtectionNone")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let locked = try await m.sh(
      "cat '\(docs)/unless-open/mine.txt'; chmod 644 '\(docs)/unless-open/mine.txt' && mv '\(docs)/unless-open/mine.txt' '\(docs)/unless-open/renamed.txt' && echo moved",
      as: 501)
    #expect(locked.stderr.contains("Operation not permitted") && locked.stdout == "moved\n", "\(locked)")
    let cp = try await m.sh("cp '\(docs)/unless-open/renamed.txt' /tmp/protfs-mount-copy-$$", as: 501)
    #expect(cp.status != 0 && cp.stderr.contains("Operation not permitted"), "\(cp)")
  }

  @Test func aForegroundMountServesUntilInterrupted() async throws {
    let t = try TestDevice(containers: [MountedDevice.bundle])
    let mountpoint = t.directory + "/mnt"
    mkdir(mountpoint, 0o755)
    let daemon = TestProcess()
    daemon.executableURL = URL(fileURLWithPath: Protfs.binary)
    daemon.arguments = ["--device", t.root, "mount", "--foreground", mountpoint]
    let errors = Pipe()
    daemon.standardError = errors
    daemon.standardOutput = FileHandle.nullDevice
    try daemon.start()
    defer {
      if MountRegistry.protfsMountpoints().contains(mountpoint) { umount2(mountpoint, 2) }
      if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) }
    }
    let reader = errors.fileHandleForReading
    let said = await offPool { String(decoding: reader.read(until: "\n"), as: UTF8.self) }
    #expect(said.hasPrefix("Serving "), "\(said)")
    #expect(FileManager.default.fileExists(atPath: mountpoint + "/" + MountedDevice.bundle + "/Documents"))
    kill(daemon.processIdentifier, SIGTERM)
    await offPool { daemon.waitUntilExit() }
    #expect(daemon.terminationStatus == 0)
    #expect(!MountRegistry.protfsMountpoints().contains(mountpoint))
    #expect(MountRegistry(device: t.device).records().isEmpty)
  }

  @Test func mountingWithoutRootIsOneClearError() async throws {
    let t = try TestDevice(containers: [MountedDevice.bundle])
    chmod(t.directory, 0o755)
    mkdir(t.directory + "/mnt", 0o777)
    let result = try await Protfs.runProgram(
      "/usr/bin/setpriv",
      [
        "--reuid=65534", "--regid=65534", "--clear-groups", Protfs.binary, "--device", t.root, "mount",
        t.directory + "/mnt",
      ])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.hasPrefix("Error: Cannot mount"), "\(result)")
    #expect(!MountRegistry.protfsMountpoints().contains(t.directory + "/mnt"))
  }
}
