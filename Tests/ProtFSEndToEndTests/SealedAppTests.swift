import Foundation
import ProtFS
import ProtFSLock
import ProtFSTestSupport
import Testing

/// An app on a sealed device (docs/sealed.md): it reads and writes plaintext through the mount
/// `app launch` serves it, while the files behind the mount hold ciphertext; without a mount it
/// would read noise, so it does not run.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SealedAppTests {
  static let script = """
    #!/bin/sh
    cd "$HOME" || exit 1
    echo 'a sealed secret' > Documents/note.txt
    cat Documents/note.txt
    echo done
    """

  @Test func anAppWritesAndReadsPlaintextThroughItsMountAndCiphertextLandsBehindIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    #expect(try LockController(device: d.t.device, passcodeIterations: 1000).sealEmptyDevice())
    defer { SealedInitTests.evictKeys(d.t) }
    let app = try d.launch([], [try d.script("sealed.sh", Self.script)])
    defer { app.stop() }
    #expect(await app.line(containing: "done") != nil, "\(app.output)")
    #expect(app.output.contains("a sealed secret"), "\(app.output)")
    #expect(await app.exit().0 == 0, "\(app.output)")
    let backing = try #require(
      FileManager.default.contents(atPath: d.t.containerPath(AppDevice.bundle, "Documents/note.txt")))
    #expect(backing.count == 16 && !backing.contains(Data("secret".utf8)), "the backing file holds plaintext")
  }

  @Test func withoutAMountAnAppOnASealedDeviceDoesNotRun() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    #expect(try LockController(device: d.t.device, passcodeIterations: 1000).sealEmptyDevice())
    defer { SealedInitTests.evictKeys(d.t) }
    let refused = try await d.protfs(["app", "launch", AppDevice.bundle, "--no-mount", "--", "/bin/true"])
    #expect(refused.status == 1, "\(refused)")
    #expect(refused.stderr.contains("is sealed") && refused.stderr.contains("--no-mount"), "\(refused)")
  }

  /// The test: on a sealed, locked device a class-A file's backing file is ciphertext and
  /// through the mount "Operation not permitted", for root too; unlocked, the mount reads it again;
  /// unmounted, `exec` says its program reads ciphertext, and it does.
  @Test func aLockedSealedDevicesClassAFileIsCiphertextBehindTheMountAndRefusedThroughItForRoot() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.directory(t, "Documents/vault", .complete)
      #expect(try LockController(device: t.device, passcodeIterations: 1000).sealEmptyDevice())
    }
    defer { SealedInitTests.evictKeys(m.t) }
    let file = m.documents + "/vault/a.txt"
    let backing = m.backingDocuments + "/vault/a.txt"
    let write = try await m.sh("echo 'top secret' > '\(file)' && cat '\(file)'")
    #expect(write.status == 0 && write.stdout == "top secret\n", "\(write)")
    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let raw = try await m.sh("cat '\(backing)' | od -An -c")
    let bytes = try #require(FileManager.default.contents(atPath: backing))
    #expect(raw.status == 0 && bytes.count == 11 && !bytes.contains(Data("secret".utf8)), "\(raw)")
    let refused = try await m.sh("cat '\(file)'")
    #expect(refused.status != 0 && refused.stderr.contains("Operation not permitted"), "\(refused)")
    #expect(try await m.protfs(["unlock"]).status == 0)
    #expect(try await m.sh("cat '\(file)'").stdout == "top secret\n")
    #expect(try await m.protfs(["unmount", m.mountpoint]).status == 0)
    let exec = try await m.protfs(["exec", "--", "cat", backing])
    #expect(exec.stderr.contains("is sealed and not mounted") && !exec.stdout.contains("secret"), "\(exec)")
  }
}
