import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// libcurl is loaded by the first transfer, not at start-up: a command that transfers nothing
/// starts without it, the session service loads it before it answers, and a libcurl that cannot be
/// loaded fails the transfer with one error.
@Suite(.timeLimit(.minutes(2))) struct LibcurlLoadingTests {
  let app = SessionServiceFixture.app

  /// Runs the built binary with the dynamic loader reporting every library it loads on stderr.
  func runReportingLibraries(_ arguments: [String]) async throws -> RunResult {
    try await Protfs.run(arguments, environment: ["LD_DEBUG": "files"])
  }

  /// A ProtFSKit app starts without libcurl and Foundation's networking library (and the forty
  /// libraries they bring): its transfers load libcurl when they begin, as protfs's commands do.
  @Test func aProtFSKitAppStartsWithoutLibcurl() async throws {
    let example = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().appendingPathComponent(
      "BackgroundRunner")
    // Bare, it says it is not an app and ends: its start alone.
    let bare = try await Protfs.runProgram(example.path, [], environment: ["LD_DEBUG": "files"])
    #expect(bare.stderr.contains("not running as an app"), "\(bare.stderr.suffix(400))")
    #expect(!bare.stderr.contains("file=libcurl"), "the app loaded libcurl at start")
    #expect(!bare.stderr.contains("file=libFoundationNetworking"), "the app loaded FoundationNetworking at start")
  }

  @Test func commandsThatTransferNothingDoNotLoadLibcurl() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    // The service runs in this process, so that only the commands' own loading is reported.
    try f.startInProcess()
    let body = DownloadFixture.bytes(4096)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let detached = try await runReportingLibraries([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("a.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    #expect(!detached.stderr.contains("file=libcurl"), "download --detach loaded libcurl:\n\(detached.stderr)")
    let ids = detached.stdout.split(separator: "\n").map(String.init)
    #expect(ids == ["1"], "\(detached)")
    let waited = try await runReportingLibraries(["--device", f.t.root, "tasks", "wait"] + ids)
    #expect(waited.status == 0, "\(waited)")
    #expect(!waited.stderr.contains("file=libcurl"), "tasks wait loaded libcurl:\n\(waited.stderr)")
    for command in [["status"], ["tasks", "--json"], ["sessions"]] {
      let result = try await runReportingLibraries(["--device", f.t.root] + command)
      #expect(result.status == 0, "\(command): \(result)")
      #expect(!result.stderr.contains("file=libcurl"), "\(command) loaded libcurl:\n\(result.stderr)")
    }
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/a.bin")) == Data(body))
    // The report is what it seems: a download in the foreground does load it.
    let foreground = try await runReportingLibraries([
      "--device", f.t.root, "download", "--bundle", app, server.url("b.bin").absoluteString,
    ])
    #expect(foreground.status == 0, "\(foreground)")
    #expect(foreground.stderr.contains("file=libcurl.so.4"), "\(foreground)")
  }

  @Test func theSessionServiceHasLibcurlLoadedWhenItAnswers() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    // The service exists to transfer: its first download should not wait for the library.
    let started = try await Protfs.run(["--device", f.t.root, "sessions", "start"])
    #expect(started.status == 0, "\(started)")
    let pid = try #require(f.servicePID, "no service answers after `sessions start`: \(started)")
    // Read to the end: /proc files have no size for a reader that trusts one.
    let file = try #require(FileHandle(forReadingAtPath: "/proc/\(pid)/maps"))
    let maps = String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
    #expect(maps.contains("libcurl.so.4"), "the service \(pid) has not loaded libcurl")
  }

  @Test func aLibcurlThatCannotBeLoadedFailsTheDownloadNamingIt() async throws {
    let t = try TestDevice()
    try #require(try await Protfs.run(["--device", t.root, "init", app]).status == 0)
    let body = DownloadFixture.bytes(4096)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    let missing = t.root + "/no-such-libcurl.so.4"
    let result = try await Protfs.run(
      ["--device", t.root, "download", "--bundle", app, server.url().absoluteString],
      environment: ["PROTFS_LIBCURL": missing])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("libcurl cannot be loaded"), "\(result)")
    #expect(result.stderr.contains(missing), "the loader's reason names the library: \(result)")
    #expect(result.stderr.contains("libcurl4"), "the remedy names the package: \(result)")
    #expect(server.requests.isEmpty)
    // Nothing half-done: no temp file, nothing in Documents, the task failed.
    let downloads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []).isEmpty)
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(app, "Documents/file.bin")))
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    #expect(tasks.stdout.contains("\"state\" : \"failed\""), "\(tasks)")
    // With the library back, the same download runs.
    let again = try await Protfs.run(["--device", t.root, "download", "--bundle", app, server.url().absoluteString])
    #expect(again.status == 0, "\(again)")
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "Documents/file.bin")) == Data(body))
  }
}
