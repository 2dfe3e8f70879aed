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
}
