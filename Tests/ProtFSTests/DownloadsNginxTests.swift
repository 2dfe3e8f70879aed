import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

@testable import ProtFS

/// Downloads from a real nginx on loopback.
@Suite("Downloads from nginx", .timeLimit(.minutes(1)))
struct DownloadsNginxTests {
  let nginx: NginxServer
  let fixture: DownloadFixture

  init() throws {
    nginx = try NginxServer()
    fixture = try DownloadFixture()
  }

  static func sha256(_ bytes: [UInt8]) -> String {
    let digest = SHA256Digest()
    bytes.withUnsafeBytes { digest.update($0.baseAddress!, count: $0.count) }
    return digest.finalizeHex()
  }

  @Test func smallFileLandsAtTheDestinationAndTheTempFileIsGone() async throws {
    let body = DownloadFixture.bytes(10_000)
    let url = try nginx.put(Data(body), at: "small.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: url)
    task.taskDescription = "small one"
    #expect(task.state == .suspended)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(task.error == nil)
    #expect(fixture.destinationContents("small.bin") == body)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(task.location?.path == fixture.destinationDirectory + "/small.bin")
    let stored = try #require(try session.store.task(id: task.id))
    #expect(stored.state == .completed)
    #expect(stored.bytesReceived == 10_000)
    #expect(stored.taskDescription == "small one")
  }

  @Test func multiMegabyteFileWithMatchingDigest() async throws {
    let body = DownloadFixture.bytes(12 << 20)
    let url = try nginx.put(Data(body), at: "big.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: url, expectedSHA256: Self.sha256(body).uppercased())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("big.bin") == body)
    #expect(task.countOfBytesExpectedToReceive == Int64(body.count))
  }

  @Test func digestMismatchFailsAndKeepsNothing() async throws {
    let body = DownloadFixture.bytes(300_000)
    let url = try nginx.put(Data(body), at: "bad.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: url, expectedSHA256: String(repeating: "ab", count: 32))
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.code == .checksumMismatch)
    #expect(task.error?.message.contains(url.absoluteString) == true)
    #expect(fixture.destinationFiles.isEmpty)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func malformedDigestIsRefusedAtCreation() throws {
    let session = try DownloadSession(configuration: fixture.configuration())
    #expect(throws: ProtFSError.self) { try session.downloadTask(with: nginx.url("x"), expectedSHA256: "123") }
  }

  @Test func severalFilesInParallelOverFewConnections() async throws {
    var configuration = fixture.configuration()
    configuration.maximumConnectionsPerHost = 3
    let session = try DownloadSession(configuration: configuration)
    var expected: [String: [UInt8]] = [:]
    var requests: [DownloadRequest] = []
    for index in 0..<24 {
      let body = DownloadFixture.bytes(50_000 + index * 7_919, seed: UInt64(index + 1))
      let name = "p\(index).bin"
      expected[name] = body
      requests.append(DownloadRequest(url: try nginx.put(Data(body), at: "many/\(name)")))
    }
    let tasks = try session.downloadTasks(with: requests)
    for task in tasks { task.resume() }
    for task in tasks { #expect(await task.waitUntilSettled() == .completed) }
    for (name, body) in expected { #expect(fixture.destinationContents(name) == body) }
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func https() async throws {
    let secure = try NginxServer(tls: true)
    defer { secure.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let url = try secure.put(Data(body), at: "secure.bin")
    #expect(url.scheme == "https")
    var configuration = fixture.configuration()
    configuration.maximumRetries = 0
    let untrusting = try DownloadSession(configuration: configuration)
    let refused = try untrusting.downloadTask(with: url)
    refused.resume()
    #expect(await refused.waitUntilSettled() == .failed)
    #expect(refused.error?.code == .network)
    #expect(refused.error?.hint?.contains("certificate") == true)
    untrusting.invalidate()

    configuration.trustedCertificatesPath = secure.certificatePath
    let session = try DownloadSession(configuration: configuration)
    let task = try session.downloadTask(with: url)
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("secure.bin") == body)
  }

  @Test func followsRedirects() async throws {
    let body = DownloadFixture.bytes(70_000)
    try nginx.put(Data(body), at: "target.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: nginx.url("redirect/target.bin"))
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("target.bin") == body)
  }

  @Test func redirectLoopFailsWithoutRetrying() async throws {
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: nginx.url("loop"))
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.code == .network)
    #expect(task.error?.hint?.contains("redirect") == true)
    #expect(fixture.temporaryFiles.isEmpty)
  }

  @Test func notFoundIsAFinalErrorAndOtherTasksGoOn() async throws {
    let body = DownloadFixture.bytes(40_000)
    let good = try nginx.put(Data(body), at: "good.bin")
    let session = try DownloadSession(configuration: fixture.configuration())
    let missing = try session.downloadTask(with: nginx.url("missing.bin"))
    let fine = try session.downloadTask(with: good)
    missing.resume()
    fine.resume()
    #expect(await missing.waitUntilSettled() == .failed)
    #expect(await fine.waitUntilSettled() == .completed)
    let error = try #require(missing.error)
    #expect(error.message.contains("404"))
    #expect(error.message.contains(nginx.url("missing.bin").absoluteString))
    #expect(!error.message.contains("attempts"))
    #expect(fixture.destinationFiles == ["good.bin"])
  }

  @Test func fileURLs() async throws {
    let body = DownloadFixture.bytes(500_000)
    let source = fixture.directory.appendingPathComponent("source.bin")
    try Data(body).write(to: source)
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: source, expectedSHA256: Self.sha256(body))
    task.resume()
    #expect(await task.waitUntilSettled() == .completed)
    #expect(fixture.destinationContents("source.bin") == body)

    let missing = try session.downloadTask(with: fixture.directory.appendingPathComponent("nope.bin"))
    missing.resume()
    #expect(await missing.waitUntilSettled() == .failed)
    #expect(missing.error?.message.contains("nope.bin") == true)
  }

  @Test func unsupportedSchemeAndUnreachableServerFailCleanly() async throws {
    var configuration = fixture.configuration()
    configuration.maximumRetries = 1
    let session = try DownloadSession(configuration: configuration)
    let ftp = try session.downloadTask(with: URL(string: "ftp://127.0.0.1/file.bin")!)
    let closedPort = try LoopbackSocket.freePort()
    let refused = try session.downloadTask(with: URL(string: "http://127.0.0.1:\(closedPort)/file.bin")!)
    let noName = try session.downloadTask(with: nginx.baseURL)
    for task in [ftp, refused, noName] { task.resume() }
    #expect(await ftp.waitUntilSettled() == .failed)
    #expect(ftp.error?.message.contains("unsupported scheme 'ftp'") == true)
    #expect(await refused.waitUntilSettled() == .failed)
    #expect(refused.error?.code == .network)
    #expect(refused.error?.message.contains("gave up after 2 attempts") == true)
    #expect(await noName.waitUntilSettled() == .failed)
    #expect(noName.error?.message.contains("no file name") == true)
    #expect(fixture.temporaryFiles.isEmpty)
    #expect(fixture.destinationFiles.isEmpty)
  }

  @Test(arguments: ["a/%2E%2E", "dir/..%2Fescape.bin", "dir/x%2Fy.bin"])
  func fileNamesFromTheURLThatLeaveTheDirectoryAreRefused(path: String) async throws {
    let session = try DownloadSession(configuration: fixture.configuration())
    let task = try session.downloadTask(with: URL(string: nginx.baseURL.absoluteString + path)!)
    task.resume()
    #expect(await task.waitUntilSettled() == .failed)
    #expect(task.error?.code == .invalidArgument)
    #expect(fixture.destinationFiles.isEmpty)
  }

  @Test func explicitFileNamesWithDotsOrSlashesAreRefused() throws {
    let session = try DownloadSession(configuration: fixture.configuration())
    for name in ["..", "../x", "a/b", ""] {
      #expect(throws: ProtFSError.self) { try session.downloadTask(with: nginx.url("x.bin"), fileName: name) }
    }
  }
}
