import Foundation
import ProtFSTestSupport
import Testing

/// libcrypto is loaded by the first command that hashes, not at start-up (it cost every command
/// about a quarter of its start): the commands that need none start without it, and one that needs
/// it while it cannot be loaded fails with one error before it changes anything.
@Suite(.timeLimit(.minutes(2))) struct LibcryptoLoadingTests {
  let app = "com.example.app"

  @Test func commandsThatHashNothingDoNotLoadLibcrypto() async throws {
    let t = try TestDevice(initialize: false)
    for command in [
      ["init", app], ["ls", "--bundle", app, "Documents"], ["set-class", "complete", "--bundle", app, "Documents"],
      ["get-class", "--bundle", app, "Documents"], ["audit"], ["cache", "du"], ["--version"],
    ] {
      let result = try await Protfs.run(["--device", t.root] + command, environment: ["LD_DEBUG": "files"])
      #expect(result.status == 0, "\(command): \(result)")
      #expect(!result.stderr.contains("file=libcrypto"), "\(command) loaded libcrypto:\n\(result.stderr)")
    }
    // The report is what it seems: the lock authenticates the modes it saves, with libcrypto.
    let lock = try await Protfs.run(["--device", t.root, "lock", "--grace", "0"], environment: ["LD_DEBUG": "files"])
    #expect(lock.status == 0, "\(lock)")
    #expect(lock.stderr.contains("file=libcrypto.so.3"), "\(lock)")
  }

  @Test func aLibcryptoThatCannotBeLoadedStopsTheLockBeforeItChangesAnything() async throws {
    let t = try TestDevice(containers: [app])
    try t.device.writeFile(app, "Documents/secret", class: .complete, mode: 0o644)
    let missing = t.root + "/no-such-libcrypto.so.3"
    let locked = try await Protfs.run(
      ["--device", t.root, "lock", "--grace", "0"], environment: ["PROTFS_LIBCRYPTO": missing])
    #expect(locked.status == 1, "\(locked)")
    #expect(locked.stderr.contains("libcrypto cannot be loaded"), "\(locked)")
    #expect(locked.stderr.contains(missing), "the loader's reason names the library: \(locked)")
    #expect(locked.stderr.contains("libssl3"), "the remedy names the package: \(locked)")
    // Nothing half-done: the file keeps its mode, the device is unlocked and no journal is left.
    var status = stat()
    #expect(lstat(t.containerPath(app, "Documents/secret"), &status) == 0)
    #expect(status.st_mode & 0o777 == 0o644)
    let state = try await Protfs.run(["--device", t.root, "status"])
    #expect(state.status == 0 && state.stdout.contains("unlocked"), "\(state)")
    // With the library back, the same lock runs.
    let again = try await Protfs.run(["--device", t.root, "lock", "--grace", "0"])
    #expect(again.status == 0, "\(again)")
    #expect(lstat(t.containerPath(app, "Documents/secret"), &status) == 0 && status.st_mode & 0o777 == 0)
  }
}
