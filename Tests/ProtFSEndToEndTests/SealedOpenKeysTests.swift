import Foundation
import ProtFS
import ProtFSLock
import ProtFSTestSupport
import Testing

/// The key of a sealed file held open through the mount (docs/sealed.md): a lock takes a class-A
/// file's from its open handle as it takes the class key, as iOS discards it; class B's stays, its
/// open file usable while locked; after the unlock the class-A handle reads again, its key
/// unwrapped anew. The mount's root tells how many open handles hold a key
/// (`user.protfs.mount-file-keys`).
@Suite(.serialized, .timeLimit(.minutes(2))) struct SealedOpenKeysTests {
  @Test func aLockTakesAnOpenClassAFilesKeyAndLeavesClassBs() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.directory(t, "Documents/vault", .complete)
      try MountedDevice.directory(t, "Documents/inbox", .completeUnlessOpen)
      #expect(try LockController(device: t.device, passcodeIterations: 1000).sealEmptyDevice())
    }
    defer { SealedInitTests.evictKeys(m.t) }
    let (a, b) = (m.documents + "/vault/a.txt", m.documents + "/inbox/b.txt")
    let write = try await m.sh("echo 'class a' > '\(a)' && echo 'class b' > '\(b)'")
    #expect(write.status == 0, "\(write)")
    // One process holds both files open across the lock and the unlock it runs itself.
    let script = """
      import os, subprocess, sys
      mount, a, b, protfs, device = sys.argv[1:]
      keys = lambda: os.getxattr(mount, 'user.protfs.mount-file-keys').decode()
      def read(fd):
          try: return os.pread(fd, 64, 0).decode().strip()
          except OSError as e: return 'errno %d' % e.errno
      fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_RDONLY)
      print('open', keys(), read(fa), read(fb))
      subprocess.run([protfs, '--device', device, 'lock', '--grace', '0'], check=True, stdout=subprocess.DEVNULL)
      print('locked', keys(), read(fa), read(fb))
      subprocess.run([protfs, '--device', device, 'unlock'], check=True, stdout=subprocess.DEVNULL)
      print('unlocked', keys())
      print('read', read(fa), keys())
      """
    let run = try await Protfs.runProgram(
      "/usr/bin/python3", ["-c", script, m.mountpoint, a, b, Protfs.binary, m.root])
    #expect(run.status == 0, "\(run)")
    let lines = run.stdout.split(separator: "\n").map(String.init)
    #expect(
      lines == [
        #"open {"complete":1,"complete-unless-open":1} class a class b"#,
        #"locked {"complete-unless-open":1} errno 1 class b"#,
        #"unlocked {"complete-unless-open":1}"#,
        #"read class a {"complete":1,"complete-unless-open":1}"#,
      ], "\(run)")
  }
}
