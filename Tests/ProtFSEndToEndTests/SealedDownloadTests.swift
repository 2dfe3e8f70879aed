import Foundation
import ProtFS
import ProtFSSeal
import ProtFSTestSupport
import Testing

/// The README's Quickstart on a sealed device (`init --sealed`, docs/sealed.md): the same failure,
/// the same fix and the same outcomes as on an unsealed device, but the downloaded file is
/// ciphertext behind the mount, under a key of its class.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SealedDownloadTests {
  let app = "com.example.app"
  let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]

  @Test func theQuickstartOnASealedDeviceFailsTheSameWayAndItsFixWrapsTheDownloadsKey() async throws {
    let t = try TestDevice(initialize: false)
    let source = NSTemporaryDirectory() + "sealed-report-\(UUID().uuidString).txt"
    let secret = Data("a secret report, line after line\n".utf8)
    try Data((0..<300).flatMap { _ in secret }).write(to: URL(fileURLWithPath: source))
    defer { try? FileManager.default.removeItem(atPath: source) }
    let url = URL(fileURLWithPath: source).standardizedFileURL.absoluteString
    let protfs = { (arguments: [String]) in try await Protfs.run(["--device", t.root] + arguments, environment: cheap) }

    let made = try await protfs(["init", "--sealed", app, "--default-class", "complete"])
    try #require(made.status == 0, "\(made)")
    let store = SealStore(device: t.device)
    let keyring = ClassKeyring(keybagUUID: try store.keybag(deviceKey: try store.deviceKey()).uuid)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys

    #expect(try await protfs(["lock", "--grace", "0"]).status == 0)
    let broken = try await protfs(["download", "--bundle", app, url])
    #expect(broken.status == 1, "\(broken)")
    #expect(broken.stderr.contains("Cannot write the temp file of '\(url)'"), "\(broken)")
    #expect(
      broken.stderr.contains("Operation not permitted")
        && broken.stderr.contains("`protfs --device \(t.root) init-cache \(app)`"), "\(broken)")
    #expect(try await protfs(["unlock"]).status == 0)
    #expect(try await protfs(["init-cache", app]).status == 0)
    #expect(try await protfs(["lock", "--grace", "0"]).status == 0)
    let waiting = try await protfs(["download", "--bundle", app, url])
    #expect(waiting.status == 75, "\(waiting)")
    let unlock = try await protfs(["unlock"])
    #expect(unlock.status == 0 && unlock.stdout.contains("Moved the download of \(url)"), "\(unlock)")
    let destination = t.containerPath(app, "Documents/" + URL(fileURLWithPath: source).lastPathComponent)
    let effective = try await protfs(["get-class", destination])
    #expect(effective.stdout.hasPrefix("NSFileProtectionComplete "), "\(effective)")

    // Behind the mount: ciphertext of the same length, under a key of class A.
    let backing = try #require(FileManager.default.contents(atPath: destination))
    #expect(backing.count == secret.count * 300 && !backing.contains(secret))
    let fd = open(destination, O_RDONLY)
    try #require(fd >= 0)
    defer { close(fd) }
    let sealed = try #require(try SealedFiles(device: t.device))
    #expect(try SealedFiles.record(of: fd).code == .a)
    let read = try SealedFileIO(fd: fd, cipher: try sealed.cipher(of: fd), path: destination).read(
      at: 0, count: backing.count)
    #expect(Data(read) == Data((0..<300).flatMap { _ in secret }))

    #expect(try await protfs(["lock", "--grace", "0"]).status == 0)
    let cat = try await protfs(["exec", "--", "cat", destination])
    #expect(cat.status == 0 && !cat.stdout.isEmpty && !cat.stdout.contains("a secret report"), "\(cat)")
    #expect(try await protfs(["unlock"]).status == 0)
  }
}
