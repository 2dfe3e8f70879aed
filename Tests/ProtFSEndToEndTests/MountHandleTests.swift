import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Open handles through the mount, decided at each read and write (docs/semantics.md §7): a
/// python3 process holds a file open while the device changes state.
@Suite(.serialized) struct MountHandleTests {
  /// A mounted device with `Documents/<name>.txt` and a directory `Documents/<name>/` per class.
  static func device() async throws -> MountedDevice { try await MountEndToEndTests.classDevice() }

  @Test func aCompleteHandleFailsOnceLockedAndWorksAgainAfterUnlock() async throws {
    let m = try await Self.device()
    let held = try Conversation.holding("\(m.documents)/complete.txt")
    #expect(await held.line() == "opened")
    #expect(await held.ask("read") == "ok contents of complete")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await held.ask("read") == "err 1")
    #expect(await held.ask("write") == "err 1")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(await held.ask("write") == "ok")
    #expect(await held.ask("read") == "ok contents of complete|more")
  }

  @Test func anUnlessOpenHandleKeepsWorkingAcrossALock() async throws {
    let m = try await Self.device()
    let held = try Conversation.holding("\(m.documents)/unless-open.txt", user: 0)
    #expect(await held.line() == "opened")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await held.ask("write") == "ok")
    #expect(await held.ask("read") == "ok contents of unless-open|more")
    let reopen = try await m.sh("cat '\(m.documents)/unless-open.txt'")
    #expect(reopen.stderr.contains("Operation not permitted"), "\(reopen)")
  }

  @Test func anUnlessOpenFileCreatedWhileLockedWorksUntilClosedThenWaitsForUnlock() async throws {
    let m = try await Self.device()
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let path = "\(m.documents)/unless-open/made-locked.txt"
    let made = try Conversation.holding(path, flags: "os.O_RDWR | os.O_CREAT | os.O_EXCL", user: 501)
    #expect(await made.line() == "opened")
    #expect(await made.ask("write") == "ok")
    #expect(await made.ask("read") == "ok more")
    #expect(await made.ask("close") == "ok")
    let backing = m.backingDocuments + "/unless-open/made-locked.txt"
    #expect(m.t.rawClass(backing) == "NSFileProtectionCompleteUnlessOpen")
    // Restricted in the backing tree as the lock would have, shown through the mount as made.
    var s = stat()
    lstat(backing, &s)
    #expect(s.st_mode & 0o7777 == 0 && s.st_uid == 0, "backing mode \(String(s.st_mode, radix: 8)) uid \(s.st_uid)")
    #expect(try await m.sh("stat -c '%a %u' '\(path)'").stdout == "644 501\n")
    let status = try await m.protfs(["status", "--json"])
    #expect(status.stdout.contains("\"inconsistencyCount\" : 0"), "\(status)")
    let again = try Conversation.holding(path, flags: "os.O_RDONLY", user: 501)
    #expect(await again.line() == "err 1")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(try await m.sh("cat '\(path)'", as: 501).stdout == "more\n")
    lstat(backing, &s)
    #expect(s.st_mode & 0o7777 == 0o644 && s.st_uid == 501)
  }

  @Test func whenInactiveExpiresAtTheInactivityEvent() async throws {
    let m = try await Self.device()
    let held = try Conversation.holding("\(m.documents)/when-inactive.txt")
    #expect(await held.line() == "opened")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await held.ask("read") == "ok contents of when-inactive")
    #expect(try await m.sh("cat '\(m.documents)/when-inactive.txt'").status == 0)
    #expect(try await m.protfs(["lock", "--grace", "0", "--inactive"]).status == 0)
    #expect(await held.ask("read") == "err 1")
    #expect(try await m.sh("cat '\(m.documents)/when-inactive.txt'").stderr.contains("Operation not permitted"))
  }

  @Test func aGracePeriodKeepsCompleteHandlesWorkingUntilItEnds() async throws {
    let m = try await Self.device()
    let held = try Conversation.holding("\(m.documents)/complete.txt")
    #expect(await held.line() == "opened")
    let unlessOpen = try Conversation.holding("\(m.documents)/unless-open.txt")
    #expect(await unlessOpen.line() == "opened")
    // The device locks at once; only the class A keys wait for the grace (iOS's 10 s, long enough
    // for what follows on a loaded machine) to end.
    let lock = try await m.protfs(["lock"])
    #expect(lock.status == 0, "\(lock)")
    #expect(try await m.protfs(["status", "--json"]).stdout.contains("classKeysUntil"))
    #expect(await held.ask("read") == "ok contents of complete")
    #expect(try await m.sh("cat '\(m.documents)/complete.txt'").stdout == "contents of complete\n")
    // Class B closes at once: a new open is refused, the open handle goes on.
    #expect(try await m.sh("cat '\(m.documents)/unless-open.txt'").stderr.contains("Operation not permitted"))
    // When the keys go (here a lock without grace ends it; the process the lock left does the
    // same at its end, as LockEndToEndTests shows), the mount refuses class A, the held handle too.
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(!(try await m.protfs(["status", "--json"]).stdout.contains("classKeysUntil")))
    #expect(await held.ask("read") == "err 1")
    #expect(await unlessOpen.ask("read") == "ok contents of unless-open")
  }

  @Test func rebootLeavesOnlyClassNone() async throws {
    let m = try await Self.device()
    let c = try Conversation.holding("\(m.documents)/until-first-auth.txt")
    let none = try Conversation.holding("\(m.documents)/none.txt")
    #expect(await c.line() == "opened")
    #expect(await none.line() == "opened")
    #expect(try await m.protfs(["reboot"]).status == 0)
    #expect(await c.ask("read") == "err 1")
    #expect(await none.ask("read") == "ok contents of none")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(await c.ask("read") == "ok contents of until-first-auth")
  }

  @Test func aMappedCompleteFileLosesItsPagesAtTheLock() async throws {
    let m = try await Self.device()
    let script = """
      import mmap, sys
      f = open(sys.argv[1], "rb")
      m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
      print(m[:8].decode(), flush=True)
      try:
          mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
          print("shared", flush=True)
      except OSError as e:
          print("shared", e.errno, flush=True)
      sys.stdin.readline()
      print(m[:8].decode(), flush=True)
      """
    let mapped = try Conversation("/usr/bin/python3", ["-c", script, "\(m.documents)/complete.txt"])
    #expect(await mapped.line() == "contents")
    #expect(await mapped.line() == "shared \(ENODEV)", "a shared mapping would bypass the daemon")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    // The pages were dropped at the lock: touching them again asks the daemon, which refuses
    // (the kernel turns that into SIGBUS for a mapping).
    #expect(await mapped.ask("again") == "")
    await offPool { mapped.process.waitUntilExit() }
    #expect(mapped.process.terminationReason == .uncaughtSignal && mapped.process.terminationStatus == SIGBUS)
  }

  @Test func unmountWithOpenFilesDetachesAndTheDaemonEndsWithTheLastOne() async throws {
    let m = try await Self.device()
    let held = try Conversation.holding("\(m.documents)/none.txt")
    #expect(await held.line() == "opened")
    let pid = MountRegistry(device: m.t.device).records()[0].pid
    let unmount = try await m.protfs(["unmount", m.mountpoint])
    #expect(unmount.status == 0 && unmount.stdout.contains("Detached"), "\(unmount)")
    #expect(!MountRegistry.protfsMountpoints().contains(m.mountpoint))
    #expect(await held.ask("read") == "ok contents of none")
    #expect(await held.ask("close") == "ok")
    #expect(await offPool { Kernel.waitForExit(of: pid, milliseconds: 10_000) })
  }

  @Test func killingTheDaemonMidReadLeavesTheBackingTreeIntactAndTheMountRecoverable() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/big.bin", nil, String(repeating: "0123456789abcdef", count: 1 << 16))
    }
    let script = """
      import sys
      f = open(sys.argv[1], "rb", buffering=0)
      print(len(f.read(4096)), flush=True)
      sys.stdin.readline()
      try:
          f.read(4096)
          print("read", flush=True)
      except OSError as e:
          print("err", e.errno, flush=True)
      """
    let reader = try Conversation("/usr/bin/python3", ["-c", script, "\(m.documents)/big.bin"])
    #expect(await reader.line() == "4096")
    let pid = MountRegistry(device: m.t.device).records()[0].pid
    #expect(kill(pid, SIGKILL) == 0)
    #expect(await offPool { Kernel.waitForExit(of: pid, milliseconds: 10_000) })
    #expect(await reader.ask("go") == "err \(ENOTCONN)")
    let stat = try await m.sh("stat '\(m.documents)'")
    #expect(stat.stderr.contains("Transport endpoint is not connected"), "\(stat)")
    let unmount = try await m.protfs(["unmount", m.mountpoint])
    #expect(unmount.status == 0, "\(unmount)")
    #expect(!MountRegistry.protfsMountpoints().contains(m.mountpoint))
    let backing = try String(contentsOfFile: m.backingDocuments + "/big.bin", encoding: .utf8)
    #expect(backing == String(repeating: "0123456789abcdef", count: 1 << 16))
    // Mounting again works, and the status no longer lists the dead daemon.
    let again = try await m.protfs(["mount", m.mountpoint])
    #expect(again.status == 0, "\(again)")
    #expect(try await m.sh("head -c 4 '\(m.documents)/big.bin'").stdout == "0123")
    let status = try await m.protfs(["status", "--json"])
    #expect(!status.stdout.contains("\"pid\" : \(pid)") && !status.stdout.contains("\"pid\":\(pid)"), "\(status)")
  }

  @Test func anSQLiteDatabaseInAnUnlessOpenDirectoryKeepsWorkingWhileOpen() async throws {
    let m = try await Self.device()
    let script = """
      import sqlite3, sys
      db = sqlite3.connect(sys.argv[1])
      db.execute("create table t (x)")
      db.commit()
      print("opened", flush=True)
      for line in sys.stdin:
          try:
              db.execute("insert into t values (1)")
              db.commit()
              print("ok", db.execute("select count(*) from t").fetchone()[0], flush=True)
          except Exception as e:
              print("err", e, flush=True)
      """
    let path = "\(m.documents)/unless-open/app.sqlite"
    let open = try Conversation("/usr/bin/python3", ["-c", script, path])
    #expect(await open.line() == "opened")
    #expect(await open.ask("insert") == "ok 1")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(await open.ask("insert") == "ok 2")
    let fresh = try await m.sh(
      "python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"select count(*) from t\").fetchone()[0])' '\(path)'"
    )
    #expect(fresh.status != 0, "\(fresh)")
    // The sqlite3 shell, a new connection too, is refused while locked and reads it after unlock.
    let shell = try await m.sh("sqlite3 '\(path)' 'select count(*) from t'")
    #expect(shell.status != 0, "\(shell)")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(try await m.sh("sqlite3 '\(path)' 'select count(*) from t'").stdout == "2\n")
    #expect(await open.ask("insert") == "ok 3")
  }
}

/// A lock while processes stream through the mount.
@Suite(.serialized) struct MountStreamingTests {
  @Test func aLockWhileEightProcessesStreamNeverCorruptsAByte() async throws {
    let m = try await MountEndToEndTests.classDevice()
    // Each writer appends 64 KiB chunks of its own pattern, prints the bytes written after each
    // chunk, and stops at the first error (printing it) or after 4 MiB.
    let script = """
      import os, sys
      path, tag = sys.argv[1], sys.argv[2].encode()
      chunk = (tag * 65536)[:65536]
      fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
      written = 0
      while written < 4 << 20:
          try:
              written += os.write(fd, chunk)
          except OSError as e:
              print("err", e.errno, written, flush=True)
              sys.exit(0)
          print("wrote", written, flush=True)
          if written == 65536:
              sys.stdin.readline()
      print("done", written, flush=True)
      """
    var writers: [(Conversation, String, String)] = []
    for index in 0..<8 {
      let directory = index % 2 == 0 ? "until-first-auth" : "complete"
      let name = "\(directory)/stream-\(index).bin"
      let writer = try Conversation("/usr/bin/python3", ["-c", script, "\(m.documents)/\(name)", "\(index)"])
      #expect(await writer.line() == "wrote 65536")
      writers.append((writer, name, directory))
    }
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    for (writer, name, directory) in writers {
      var last = await writer.ask("go")
      while true {
        let line = await writer.line()
        if line.isEmpty { break }
        last = line
      }
      let parts = last.split(separator: " ")
      let written = parts.last.flatMap { Int($0) } ?? -1
      if directory == "complete" {
        #expect(parts.first == "err" && parts[1] == "1", "\(name): \(last)")
      } else {
        #expect(last == "done \(4 << 20)", "\(name): \(last)")
      }
      let bytes = try Data(contentsOf: URL(fileURLWithPath: m.backingDocuments + "/" + name))
      let tag = name.split(separator: "-").last!.prefix(1).utf8.first!
      #expect(bytes.count == written, "\(name)")
      #expect(bytes.allSatisfy { $0 == tag }, "\(name) holds bytes it was never given")
    }
  }
}
