import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSFoundation
import ProtFSSeal
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// What writes a sealed device's container files outside the mount (docs/sealed.md), in process: an
/// upload's snapshot and `ProtectedFileManager`. Each backing file holds no plaintext, carries a key
/// record of its class, and reads back through its key.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SealedWritersTests {
  let app = "com.example.app"
  static let secret = Data("a secret line, ".utf8)

  /// A device with the app's container, sealed, its keys in root's keyring as `unlock` leaves them
  /// (the test evicts them at its end).
  func sealedDevice() throws -> (TestDevice, ClassKeyring) {
    let t = try TestDevice(containers: [app])
    let store = SealStore(device: t.device)
    let keys = try store.create(passcode: nil, iterations: 1_000)
    let keyring = ClassKeyring(keybagUUID: try store.keybag(deviceKey: try store.deviceKey()).uuid)
    try keyring.store(keys)
    return (t, keyring)
  }

  /// `count` bytes of repeated `secret`.
  static func plaintext(_ count: Int) -> [UInt8] {
    Array((0..<count).map { Self.secret[$0 % Self.secret.count] })
  }

  /// Writes `bytes` to the new sealed file at `path` (of class `cls`), as the mount writes one.
  static func writeSealed(_ bytes: [UInt8], to path: String, class cls: ProtectionClass, on device: Device) throws {
    let fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0o644)
    try #require(fd >= 0)
    defer { close(fd) }
    let sealed = try #require(try SealedFiles(device: device))
    let cipher = try sealed.seal(fd, class: cls)
    try SealedFileIO(fd: fd, cipher: cipher, path: path).write(bytes, at: 0)
  }

  /// Expects the backing file at `path` to hold no plaintext, a key record of class `code`, and
  /// `bytes` read through its key.
  static func expectSealed(_ path: String, _ code: ProtectionClassCode, _ bytes: [UInt8], on device: Device) throws {
    let (recorded, plaintext) = try opened(path, on: device)
    #expect(recorded == code, "\(path)")
    #expect(plaintext == bytes, "\(path)")
  }

  /// The backing file at `path`: its class in its key record, and its plaintext read through its key.
  /// Records that the file holds no plaintext.
  static func opened(_ path: String, on device: Device) throws -> (ProtectionClassCode, [UInt8]) {
    let backing = try #require(FileManager.default.contents(atPath: path))
    #expect(!backing.contains(Self.secret), "'\(path)' holds plaintext")
    let fd = open(path, O_RDONLY)
    try #require(fd >= 0)
    defer { close(fd) }
    let sealed = try #require(try SealedFiles(device: device))
    let io = SealedFileIO(fd: fd, cipher: try sealed.cipher(of: fd), path: path)
    return (try SealedFiles.record(of: fd).code, try io.read(at: 0, count: try io.size()))
  }

  @Test func anUploadsSnapshotIsTheSourcesCiphertextUnderItsKeyAndSendsThePlaintext() async throws {
    let (t, keyring) = try sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let server = try UploadServer()
    defer { server.stop() }
    let bundle = try BundleID(app)
    let container = t.device.container(bundle)
    let configuration = try t.device.downloadConfiguration(
      bundleID: bundle, identifier: "uploads", destination: try container.path("Documents"))
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let bytes = Self.plaintext(300_001)
    let source = t.containerPath(app, "Documents/report.bin")
    try Self.writeSealed(bytes, to: source, class: .completeUntilFirstUserAuthentication, on: t.device)

    let task = try session.uploadTask(with: UploadRequest(url: server.url("put")), fromFile: source)
    let uploads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Uploads/" + app)
    let names = try FileManager.default.contentsOfDirectory(atPath: uploads)
    try #require(names.count == 1)
    try Self.expectSealed(uploads + "/" + names[0], .c, bytes, on: t.device)

    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    let reply = try #require(
      task.responseBody.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] })
    #expect(reply["received"] as? Int == bytes.count && reply["sha256"] as? String == UploadTests.hex(bytes))
  }

  @Test func theFileManagerWritesReadsAndCopiesThroughTheKeys() throws {
    let (t, keyring) = try sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let manager = ProtectedFileManager(device: t.device)
    let documents = t.containerPath(app, "Documents")
    let bytes = Self.plaintext(5_000)
    try manager.write(Data(bytes), toPath: documents + "/atomic.txt", options: [.atomic, .completeFileProtection])
    try manager.write(Data(bytes.prefix(10)), toPath: documents + "/plain.txt")
    try manager.write(Data(bytes), toPath: documents + "/plain.txt", options: .noFileProtection)
    try manager.copyItem(atPath: documents + "/atomic.txt", toPath: documents + "/copy.txt")

    try Self.expectSealed(documents + "/atomic.txt", .a, bytes, on: t.device)
    try Self.expectSealed(documents + "/plain.txt", .d, bytes, on: t.device)
    try Self.expectSealed(documents + "/copy.txt", .a, bytes, on: t.device)
    #expect(try manager.contents(ofItemAtPath: documents + "/copy.txt") == Data(bytes))

    // A handle reads and writes the plaintext at its own offset.
    let handle = try manager.fileHandle(forUpdatingAtPath: documents + "/plain.txt")
    try handle.seek(toOffset: 4_095)
    try handle.write(contentsOf: Data("XY".utf8))
    try handle.seek(toOffset: 4_094)
    #expect(try handle.read(upToCount: 4) == Data([bytes[4_094]] + Array("XY".utf8) + [bytes[4_097]]))
    try handle.close()
    var edited = bytes
    edited.replaceSubrange(4_095..<4_097, with: Array("XY".utf8))
    try Self.expectSealed(documents + "/plain.txt", .d, edited, on: t.device)
  }
}
