import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// `protfs download -H`: headers parsed as upload's, sent with the download's requests.
@Suite(.timeLimit(.minutes(2))) struct DownloadHeaderCLITests {
  let app = "com.example.app"

  @Test func headersAreSentAndBadOnesAreUsageErrors() async throws {
    let t = try TestDevice()
    let created = try await Protfs.run(["--device", t.root, "init", app])
    try #require(created.status == 0, "\(created)")
    let body = DownloadFixture.bytes(300_000)
    let server = try FaultServer(body: body, mode: .dropMidBody(after: 100_000, times: 1))
    defer { server.stop() }
    let result = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "--progress", "none", "-H", "X-Token: t1", "-H",
      "Accept: application/octet-stream", server.url().absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    let requests = server.requests
    #expect(requests.count == 2)
    #expect(requests.allSatisfy { $0.headers["x-token"] == "t1" && $0.headers["accept"] == "application/octet-stream" })
    #expect(requests.last?.headers["range"] == "bytes=100000-")
    let saved = FileManager.default.contents(atPath: t.containerPath(app, "Documents/file.bin"))
    #expect(saved.map { [UInt8]($0) } == body)
    for bad in ["NoColon", "Bad Name: x"] {
      let usage = try await Protfs.run([
        "--device", t.root, "download", "--bundle", app, "-H", bad, server.url("other.bin").absoluteString,
      ])
      #expect(usage.status == 64, "\(usage)")
      #expect(usage.stderr.contains("-H '\(bad)'"), "\(usage)")
    }
    #expect(server.requests.count == 2)
  }
}
