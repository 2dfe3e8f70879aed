import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

@Suite struct CacheEndToEndTests {
  let app = "com.example.app"

  @Test func lsDuAndPurgeFromTheCommandLine() async throws {
    let t = try TestDevice(containers: [app])
    _ = try await Protfs.run(["--device", t.root, "init-cache", app])
    try Data(repeating: 1, count: 10_000).write(to: URL(fileURLWithPath: t.containerPath(app, "Library/Caches/blob")))
    try t.writeFile(
      t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)/CFNetworkDownload_Zz9Zz9.tmp"))
    try t.writeFile(t.containerPath(app, "Documents/keep"))
    let ls = try await Protfs.run(["--device", t.root, "cache", "ls", app])
    #expect(
      ls.status == 0 && ls.stdout.contains("Library/Caches")
        && ls.stdout.contains("orphan CFNetworkDownload_Zz9Zz9.tmp"), "\(ls)")
    let du = try await Protfs.run(["--device", t.root, "cache", "du", "--json"])
    let rows = try JSONSerialization.jsonObject(with: Data(du.stdout.utf8)) as! [[String: Any]]
    let total = rows[0]["total"] as! [String: Any]
    #expect(total["files"] as? Int == 2 && total["apparentBytes"] as? Int == 10_004)
    let bytes = try await Protfs.run(["--device", t.root, "cache", "du", "-b", app])
    #expect(bytes.stdout.contains("10004"))
    let dry = try await Protfs.run(["--device", t.root, "cache", "purge", "--orphans", "--dry-run"])
    #expect(
      dry.status == 0 && dry.stdout.contains("Would remove \(app)/Library/Caches/com.apple.nsurlsessiond"), "\(dry)")
    #expect(
      FileManager.default.fileExists(
        atPath: t.containerPath(
          app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)/CFNetworkDownload_Zz9Zz9.tmp")))
    let purge = try await Protfs.run(["--device", t.root, "cache", "purge", app])
    #expect(purge.status == 0 && purge.stdout.contains("Removed 2 items"), "\(purge)")
    #expect(FileManager.default.fileExists(atPath: t.containerPath(app, "Documents/keep")))
    let pressure = try await Protfs.run(["--device", t.root, "simulate-storage-pressure", "--free", "1M", "--json"])
    #expect(pressure.status == 0 && pressure.stdout.contains("\"removed\""), "\(pressure)")
  }

  @Test(arguments: [
    (["cache", "purge", "--older-than", "7 days"], "'7 days' is not a duration"),
    (["cache", "purge", "--max-size", "lots"], "'lots' is not a size"),
    (["simulate-storage-pressure", "--free", "1Q"], "for example 500, 64K"),
    (["cache", "du", "not a bundle"], "not a valid bundle identifier"),
  ])
  func badInputIsAUsageError(arguments: [String], message: String) async throws {
    let t = try TestDevice(containers: [app])
    let result = try await Protfs.run(["--device", t.root] + arguments)
    #expect(result.status == 64 && result.stderr.contains(message), "\(result)")
  }

  @Test func unknownBundle() async throws {
    let t = try TestDevice(containers: [app])
    let result = try await Protfs.run(["--device", t.root, "cache", "purge", "com.example.missing"])
    #expect(result.status == 1 && result.stderr.contains("The app com.example.missing has no container"), "\(result)")
  }
}

/// `protfs cache purge` while `protfs download` is writing in another process.
@Suite(.timeLimit(.minutes(2))) struct PurgeDuringDownloadTests {
  @Test func theDownloadKeepsItsTempFileAndCompletes() async throws {
    let app = "com.example.app"
    let t = try TestDevice()
    try #require(try await Protfs.run(["--device", t.root, "init-cache", app]).status == 0)
    let body = DownloadFixture.bytes(3 << 20)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: 1 << 20))
    defer { server.stop() }
    let process = try #require(
      try await Protfs.startDownload(
        [
          "--device", t.root, "download", "--bundle", app, "--to", "Library/Caches/out", "--progress", "json",
          server.url("big.bin").absoluteString,
        ], untilWritten: 1 << 20),
      "protfs download ended before reporting progress")
    let downloads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    let temporary = try #require(try FileManager.default.contentsOfDirectory(atPath: downloads).first)
    // The most thorough purge there is: everything purgeable, resumable temp files included.
    let purge = try await Protfs.run(["--device", t.root, "cache", "purge", "--include-resumable", app])
    #expect(purge.status == 0, "\(purge)")
    #expect(!purge.stdout.contains(temporary))
    #expect(FileManager.default.fileExists(atPath: downloads + "/" + temporary))
    let pressure = try await Protfs.run(["--device", t.root, "simulate-storage-pressure", "--include-resumable"])
    #expect(pressure.status == 0 && !pressure.stdout.contains(temporary), "\(pressure)")
    server.openGate()
    await offPool { process.waitUntilExit() }
    #expect(process.terminationStatus == 0)
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "Library/Caches/out/big.bin")) == Data(body))
  }
}
