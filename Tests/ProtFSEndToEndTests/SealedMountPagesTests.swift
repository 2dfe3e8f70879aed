import Foundation
import ProtFS
import ProtFSSeal
import ProtFSTestSupport
import Testing

/// A sealed mount's state change drops the cached pages of the sealed files opened since the last
/// one (and of those still open) instead of every file the mount knows: a private mapping, the one
/// way a sealed file's plaintext reaches the page cache, still loses its pages at the lock.
@Suite(.serialized) struct SealedMountPagesTests {
  @Test func aMappedSealedFileLosesItsPagesAtTheLock() async throws {
    let (m, keyring) = try await SealedMountTests.sealedDevice(passcode: nil)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let set = try await Protfs.run(
      ["--device", m.root, "passcode", "set"],
      environment: ["PROTFS_PBKDF2_ITERATIONS": "1000", "PROTFS_PASSCODE": "1234"])
    #expect(set.status == 0, "\(set)")
    let made = try await m.sh(
      "mkdir '\(m.documents)/vault' && setfattr -n user.protfs.class -v complete '\(m.documents)/vault'"
        + " && head -c 20000 /dev/zero | tr '\\0' s > '\(m.documents)/vault/a.txt'"
        + " && ls '\(m.documents)/vault' > /dev/null && echo other > '\(m.documents)/other.txt'")
    #expect(made.status == 0, "\(made)")
    // An unlock and a lock between: the files written are no longer among the ones opened since.
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try await Protfs.run(["--device", m.root, "unlock"], environment: ["PROTFS_PASSCODE": "1234"]).status == 0)
    let script = """
      import mmap, sys
      f = open(sys.argv[1], "rb")
      m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
      print(m[:8].decode(), flush=True)
      sys.stdin.readline()
      print(m[:8].decode(), flush=True)
      """
    let mapped = try Conversation("/usr/bin/python3", ["-c", script, "\(m.documents)/vault/a.txt"])
    #expect(await mapped.line() == "ssssssss")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    // The pages were dropped at the lock: touching them again asks the daemon, which refuses (the
    // kernel turns that into SIGBUS for a mapping).
    #expect(await mapped.ask("again") == "")
    await offPool { mapped.process.waitUntilExit() }
    #expect(mapped.process.terminationReason == .uncaughtSignal && mapped.process.terminationStatus == SIGBUS)
  }
}
