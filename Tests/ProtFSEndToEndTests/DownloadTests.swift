import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs download` and `protfs tasks` against nginx on loopback, on a simulated device.
@Suite(.timeLimit(.minutes(2))) struct DownloadEndToEndTests {
  let app = "com.example.app"

  func device(defaultClass: String? = nil) async throws -> TestDevice {
    let t = try TestDevice()
    var arguments = ["--device", t.root, "init", app]
    if let defaultClass { arguments += ["--default-class", defaultClass] }
    let result = try await Protfs.run(arguments)
    try #require(result.status == 0, "\(result)")
    return t
  }

  @Test func downloadsIntoDocumentsAndPrintsThePaths() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    let payload = Data(DownloadFixture.bytes(3 << 20))
    let big = try server.put(payload, at: "big.bin")
    let small = try server.put(Data("hello".utf8), at: "dir/small.txt")
    let result = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, big.absoluteString, small.absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    let documents = t.containerPath(app, "Documents")
    #expect(result.stdout == "\(documents)/big.bin\n\(documents)/small.txt\n")
    #expect(FileManager.default.contents(atPath: documents + "/big.bin") == payload)
    // The temp files are gone, and the Downloads directory was created with its inherited class.
    let downloads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: downloads).isEmpty)
    #expect(t.rawClass(downloads) == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.map { $0["state"] as? String } == ["completed", "completed"])
  }

  @Test func theSeedsBugAndItsFixEndToEnd() async throws {
    // An app whose files default to NSFileProtectionComplete; the phone locks.
    let t = try await device(defaultClass: "complete")
    let server = try NginxServer()
    defer { server.stop() }
    let url = try server.put(Data("report".utf8), at: "report.pdf").absoluteString
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let broken = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(broken.status == 1, "\(broken)")
    // The fix, spelled to be pasted: for this device and this app.
    let fix = "`protfs --device \(t.root) init-cache \(app)`"
    #expect(broken.stderr.contains("Operation not permitted") && broken.stderr.contains(fix), "\(broken)")
    // Another process lists the failed task with the same remedy, in the command line's words.
    let listed = try await Protfs.run(["--device", t.root, "tasks"])
    #expect(listed.stderr.contains("Operation not permitted") && listed.stderr.contains(fix), "\(listed)")
    // The fix: an unprotected Downloads directory. The transfer now succeeds while locked and waits
    // for the unlock to move the file into the still-protected Documents.
    let cache = try await Protfs.run(["--device", t.root, "init-cache", app])
    #expect(cache.status == 0)
    // The Downloads directory above took complete from the failed download: given none
    // too, so that the default policy's rule for it (DP005) holds.
    #expect(cache.stderr.contains("com.apple.nsurlsessiond/Downloads from complete"), "\(cache)")
    let audit = try await Protfs.run(["--device", t.root, "audit", "--bundle", app])
    #expect(!audit.stdout.contains("DP005"), "\(audit)")
    let fixed = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(fixed.status == 75, "\(fixed)")
    #expect(fixed.stderr.contains("waits for `protfs --device \(t.root) unlock`"), "\(fixed)")
    let destination = t.containerPath(app, "Documents/report.pdf")
    #expect(!FileManager.default.fileExists(atPath: destination))
    let waiting = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    #expect(waiting.stdout.contains("\"waitingForUnlock\""))
    let unlock = try await Protfs.run(["--device", t.root, "unlock"])
    #expect(unlock.status == 0 && unlock.stdout.contains("Moved the download of \(url)"), "\(unlock)")
    #expect(FileManager.default.contents(atPath: destination) == Data("report".utf8))
    #expect(try FileManager.default.contentsOfDirectory(atPath: cache.output).isEmpty)
    let effective = try await Protfs.run(["--device", t.root, "get-class", destination])
    #expect(effective.stdout.hasPrefix("NSFileProtectionComplete "), "\(effective)")
  }

  @Test func badURLsFailAloneAndTheOthersComplete() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    let good = try server.put(Data("ok".utf8), at: "ok.txt").absoluteString
    let missing = server.url("missing.txt").absoluteString
    let result = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "ftp://example.com/x", "not a url", missing, good,
    ])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("unsupported scheme 'ftp'") && result.stderr.contains("'not a url' is not a URL"))
    #expect(result.stderr.contains("404"))
    #expect(result.stdout == t.containerPath(app, "Documents/ok.txt") + "\n")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(app, "Documents/missing.txt")))
  }

  /// A list longer than the CLI's first chunk of 32 tasks (they start in chunks while the rest are
  /// being recorded), with a URL given twice: every file arrives once, in the order of the list.
  @Test func longListStartsInChunksAndDownloadsEachURLOnce() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    let names = (0..<40).map { String(format: "f%03d.txt", $0) }
    var urls: [String] = []
    for name in names { urls.append(try server.put(Data(name.utf8), at: name).absoluteString) }
    let list = t.directory + "/urls.txt"
    try ((urls + [urls[3]]).joined(separator: "\r\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, "-i", list])
    #expect(result.status == 0, "\(result)")
    let documents = t.containerPath(app, "Documents")
    #expect(result.stdout == names.map { "\(documents)/\($0)\n" }.joined())
    for name in names { #expect(FileManager.default.contents(atPath: documents + "/" + name) == Data(name.utf8)) }
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.count == names.count)
  }

  /// URLs are checked chunk by chunk as tasks are made: a bad one after the first chunk is still
  /// its own error, and the others download.
  @Test func badURLAfterTheFirstChunkFailsOnlyItself() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    var lines: [String] = []
    for index in 0..<40 { lines.append(try server.put(Data("\(index)".utf8), at: "g\(index).txt").absoluteString) }
    lines.insert("ftp://example.com/x.bin", at: 36)
    let list = t.directory + "/urls.txt"
    try (lines.joined(separator: "\n") + "\n").write(toFile: list, atomically: true, encoding: .utf8)
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, "-i", list])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("unsupported scheme 'ftp'"), "\(result.stderr)")
    #expect(result.stdout.split(separator: "\n").count == 40)
    // With no good URL at all, nothing is recorded.
    try "not a url\n".write(toFile: list, atomically: true, encoding: .utf8)
    let none = try await Protfs.run(["--device", t.root, "download", "--bundle", app, "--session", "other", "-i", list])
    #expect(none.status == 1, "\(none)")
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--session", "other", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as? [Any]
    #expect(records?.isEmpty == true, "\(tasks)")
  }

  /// `--sync` flushes each file before the rename; the files land the same, and help names it.
  @Test func syncFlagStillPlacesEveryFile() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    var urls: [String] = []
    for index in 0..<6 { urls.append(try server.put(Data("file \(index)".utf8), at: "s\(index).txt").absoluteString) }
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, "--sync"] + urls)
    #expect(result.status == 0, "\(result)")
    for index in 0..<6 {
      #expect(
        FileManager.default.contents(atPath: t.containerPath(app, "Documents/s\(index).txt"))
          == Data("file \(index)".utf8))
    }
    let help = try await Protfs.run(["download", "--help"])
    #expect(help.stdout.contains("--sync"))
  }

  @Test func inputFileDestinationAndChecksum() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    let data = Data("checked".utf8)
    let url = try server.put(data, at: "c.bin").absoluteString
    let list = t.directory + "/urls.txt"
    try "# a comment\n\n\(url)\n".write(toFile: list, atomically: true, encoding: .utf8)
    let digest = "0" + String(repeating: "a", count: 63)
    let mismatch = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "-i", list, "--to", "Library/Application Support/Files",
      "--sha256", digest,
    ])
    #expect(mismatch.status == 1 && mismatch.stderr.lowercased().contains("sha-256"), "\(mismatch)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(app, "Library/Application Support/Files/c.bin")))
    let sha = try await Protfs.runProgram("/usr/bin/sha256sum", [server.root.path + "/c.bin"])
    let good = String(sha.stdout.prefix(64))
    let ok = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "-i", list, "--to", "Library/Application Support/Files",
      "--sha256", good, "--progress", "json",
    ])
    #expect(ok.status == 0, "\(ok)")
    #expect(ok.stdout.contains("\"event\":\"completed\""))
    #expect(
      FileManager.default.contents(atPath: t.containerPath(app, "Library/Application Support/Files/c.bin")) == data)
  }

  @Test(arguments: [
    (["download", "http://127.0.0.1/x"], "Missing '--bundle <bundle-id>'"),
    (["download", "--bundle", "com.example.app"], "Give at least one URL"),
    (
      ["download", "--bundle", "com.example.app", "--connections", "0", "http://127.0.0.1/x"], "not a connection count"
    ),
    (["download", "--bundle", "com.example.app", "--sha256", "xyz", "http://127.0.0.1/x"], "not a SHA-256 digest"),
    (["download", "--bundle", "com.example.app", "--progress", "fancy", "http://127.0.0.1/x"], "not a progress mode"),
    (
      ["download", "--bundle", "com.example.app", "--connections", "99999999999999999999999", "http://127.0.0.1/x"],
      "'99999999999999999999999' is not a connection count"
    ),
    (
      ["download", "--bundle", "com.example.app", "--timeout-request", "0s", "http://127.0.0.1/x"],
      "--timeout-request: The duration '0s' is out of range; use a duration from 1s to 1d"
    ),
    (
      [
        "download", "--bundle", "com.example.app", "--timeout-request", "99999999999999999999999d",
        "http://127.0.0.1/x",
      ],
      "--timeout-request: The duration '99999999999999999999999d' is out of range"
    ),
    (
      ["download", "--bundle", "com.example.app", "--timeout-resource", "400d", "http://127.0.0.1/x"],
      "--timeout-resource: The duration '400d' is out of range; use a duration from 1s to 365d"
    ),
    (
      ["download", "--bundle", "com.example.app", "--timeout-resource", "soon", "http://127.0.0.1/x"],
      "--timeout-resource: 'soon' is not a duration"
    ),
    (["tasks", "resume", "abc"], "not a task number"),
    (["tasks", "resume", "99999999999999999999999"], "not a task number"),
  ])
  func usageErrors(arguments: [String], message: String) async throws {
    let t = try await device()
    let result = try await Protfs.run(["--device", t.root] + arguments)
    #expect(result.status == 64 && result.stderr.contains(message), "\(result)")
  }

  @Test func twoURLsWithOneNameGetTwoFilesAndANote() async throws {
    let t = try await device()
    let server = try NginxServer()
    defer { server.stop() }
    let first = try server.put(Data("first".utf8), at: "a/data.bin").absoluteString
    let second = try server.put(Data("second".utf8), at: "b/data.bin").absoluteString
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, first, second])
    #expect(result.status == 0, "\(result)")
    let documents = t.containerPath(app, "Documents")
    let printed = result.stdout.split(separator: "\n").map(String.init).sorted()
    #expect(printed == ["\(documents)/data (1).bin", "\(documents)/data.bin"], "\(result)")
    let contents = ["data.bin", "data (1).bin"].compactMap {
      FileManager.default.contents(atPath: documents + "/" + $0).map { String(decoding: $0, as: UTF8.self) }
    }
    #expect(contents.sorted() == ["first", "second"])
    #expect(
      result.stderr.contains("was saved as 'data (1).bin': another download of this run already wrote 'data.bin'"))
    // The same command again resumes nothing and replaces both files: still two files, no third.
    let again = try await Protfs.run(["--device", t.root, "download", "--bundle", app, first, second])
    #expect(again.status == 0, "\(again)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: documents).sorted() == ["data (1).bin", "data.bin"])
  }

  @Test func theDestinationSwappedForASymlinkBeforeUnlockFailsTheUnlocksPlacement() async throws {
    let t = try await device(defaultClass: "complete")
    let server = try NginxServer()
    defer { server.stop() }
    let url = try server.put(Data("report".utf8), at: "report.pdf").absoluteString
    #expect(try await Protfs.run(["--device", t.root, "init-cache", app]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let waiting = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    try #require(waiting.status == 75, "\(waiting)")
    let outside = try TestDevice.makeTemporaryDirectory(prefix: "protfs-outside")
    defer { TestDevice.removeTree(outside) }
    let documents = t.containerPath(app, "Documents")
    try #require(rename(documents, outside + "/moved") == 0)
    try FileManager.default.createSymbolicLink(atPath: documents, withDestinationPath: outside)
    let unlock = try await Protfs.run(["--device", t.root, "unlock"])
    #expect(unlock.status == 1, "\(unlock)")
    #expect(unlock.stderr.contains("could not be moved into place"), "\(unlock)")
    #expect(unlock.stderr.contains(documents) && unlock.stderr.contains("symbolic link"), "\(unlock)")
    #expect(!unlock.stdout.contains("Moved the download"), "\(unlock)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["moved"])
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside + "/moved").isEmpty)
  }

  @Test func theDestinationSwappedForASymlinkDuringADownloadFailsIt() async throws {
    let t = try await device()
    let server = try FaultServer(body: DownloadFixture.bytes(600_000), mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let process = try #require(
      try await Protfs.startDownload(
        ["--device", t.root, "download", "--bundle", app, "--progress", "json", server.url().absoluteString],
        untilWritten: 200_000),
      "protfs download ended before reporting progress")
    let outside = try TestDevice.makeTemporaryDirectory(prefix: "protfs-outside")
    defer { TestDevice.removeTree(outside) }
    let documents = t.containerPath(app, "Documents")
    try #require(rename(documents, outside + "/moved") == 0)
    try FileManager.default.createSymbolicLink(atPath: documents, withDestinationPath: outside)
    server.openGate()
    await offPool { process.waitUntilExit() }
    #expect(process.terminationStatus == 1)
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["moved"])
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside + "/moved").isEmpty)
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.map { $0["state"] as? String } == ["failed"])
    let message = records.first?["errorMessage"] as? String ?? ""
    #expect(message.contains(documents) && message.contains("symbolic link"), "\(tasks.stdout)")
  }

  @Test func aTrickleEndsAtTheResourceTimeout() async throws {
    let t = try await device()
    let server = try FaultServer(
      body: DownloadFixture.bytes(1000), mode: .slowDrip(chunk: 1, interval: .seconds(1)))
    defer { server.stop() }
    let result = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "--timeout-resource", "2s", server.url().absoluteString,
    ])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("did not finish within its resource timeout of 2 s"), "\(result)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(app, "Documents/file.bin")))
  }

  @Test func unknownBundleAndDestinationOutsideTheContainer() async throws {
    let t = try await device()
    let unknown = try await Protfs.run([
      "--device", t.root, "download", "--bundle", "com.example.other", "http://127.0.0.1:9/x",
    ])
    #expect(unknown.status == 1 && unknown.stderr.contains("The app com.example.other has no container"), "\(unknown)")
    for to in ["../com.example.other", "/etc", "Documents/../../x"] {
      let outside = try await Protfs.run([
        "--device", t.root, "download", "--bundle", app, "--to", to, "http://127.0.0.1:9/x",
      ])
      #expect(
        outside.status == 1 && (outside.stderr.contains("outside") || outside.stderr.contains("'..'")),
        "\(to): \(outside)")
    }
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.other")))
  }

  @Test func tasksResumeAndCancel() async throws {
    let t = try await device(defaultClass: "complete")
    let server = try NginxServer()
    defer { server.stop() }
    let url = try server.put(Data("later".utf8), at: "later.txt").absoluteString
    _ = try await Protfs.run(["--device", t.root, "lock", "--grace", "0"])
    let failed = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(failed.status == 1)
    _ = try await Protfs.run(["--device", t.root, "unlock"])
    let resumed = try await Protfs.run(["--device", t.root, "tasks", "resume", "1"])
    #expect(resumed.status == 0 && resumed.output == t.containerPath(app, "Documents/later.txt"), "\(resumed)")
    // The description given to the download stays with its task.
    let described = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "--description", "nightly report", "--to", "Documents/again",
      url,
    ])
    #expect(described.status == 0, "\(described)")
    let listed = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    #expect(listed.stdout.contains("\"taskDescription\" : \"nightly report\""), "\(listed)")
    let again = try await Protfs.run(["--device", t.root, "tasks", "cancel", "1"])
    #expect(again.status == 1 && again.stderr.contains("only unfinished tasks"), "\(again)")
    let missing = try await Protfs.run(["--device", t.root, "tasks", "resume", "99"])
    #expect(missing.status == 1 && missing.stderr.contains("no download task 99"), "\(missing)")
  }
}

/// A device with one container, a server that stalls after 400,000 of its 1 MiB, and `protfs
/// download` of it running until the engine reported those bytes.
struct StalledDownload {
  static let app = "com.example.app"
  let t: TestDevice
  let body: [UInt8]
  let server: FaultServer
  let url: String
  let process: TestProcess

  init() async throws {
    t = try TestDevice()
    try #require(try await Protfs.run(["--device", t.root, "init", Self.app]).status == 0)
    body = DownloadFixture.bytes(1 << 20)
    server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .stallAfter(bytes: 400_000))
    url = server.url("big.bin").absoluteString
    do {
      process = try #require(
        try await Protfs.startDownload(
          ["--device", t.root, "download", "--bundle", Self.app, "--progress", "json", url], untilWritten: 400_000),
        "protfs download ended before reporting progress")
    } catch {
      server.stop()
      throw error
    }
  }
}

/// `protfs tasks suspend ID` from another shell while `protfs download` runs the task.
@Suite(.timeLimit(.minutes(2))) struct DownloadSuspendTests {
  @Test func aRunningTaskIsSuspendedByItsProcessAndResumedWithRange() async throws {
    let stalled = try await StalledDownload()
    defer { stalled.server.stop() }
    let (app, t, body, server) = (StalledDownload.app, stalled.t, stalled.body, stalled.server)
    let process = stalled.process
    defer {
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      process.waitUntilExit()
    }
    let suspended = try await Protfs.run(["--device", t.root, "tasks", "suspend", "1"])
    #expect(suspended.status == 0 && suspended.stderr.contains("Suspended download task 1"), "\(suspended)")
    let listed = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]]
    #expect(records?.first?["state"] as? String == "suspended", "\(listed)")
    let twice = try await Protfs.run(["--device", t.root, "tasks", "suspend", "1"])
    #expect(twice.status == 0 && twice.stderr.contains("already suspended"), "\(twice)")
    kill(process.processIdentifier, SIGKILL)
    await offPool { process.waitUntilExit() }
    // Resumed from its temp file: a Range request, and the whole body in place.
    server.setMode(.normal)
    let resumed = try await Protfs.run(["--device", t.root, "tasks", "resume", "1"])
    #expect(resumed.status == 0, "\(resumed)")
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "Documents/big.bin")) == Data(body))
    let last = try #require(server.requests.last)
    #expect(
      last.headers["range"]?.hasPrefix("bytes=") == true && last.headers["range"] != "bytes=0-", "\(last.headers)")
    let done = try await Protfs.run(["--device", t.root, "tasks", "suspend", "1"])
    #expect(done.status == 1 && done.stderr.contains("only a running task"), "\(done)")
  }
}

/// `kill -9` in the middle of `protfs download`, then the same command again: it resumes.
@Suite(.timeLimit(.minutes(2))) struct DownloadKillResumeTests {
  @Test func theSameDownloadAfterAKillResumesWithRange() async throws {
    let stalled = try await StalledDownload()
    defer { stalled.server.stop() }
    let (app, t, body, server, url) = (StalledDownload.app, stalled.t, stalled.body, stalled.server, stalled.url)

    // The engine reported the stalled bytes; wait for them to reach the temp file.
    let process = stalled.process
    let downloads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    let deadline = Date().addingTimeInterval(20)
    var onDisk = 0
    while onDisk < 400_000 && Date() < deadline {
      let names = (try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []
      onDisk =
        names.compactMap { try? FileManager.default.attributesOfItem(atPath: downloads + "/" + $0)[.size] as? Int }
        .max() ?? 0
      if onDisk < 400_000 { try await Task.sleep(for: .milliseconds(20)) }
    }
    try #require(onDisk >= 400_000, "the temp file never held the received bytes")
    kill(process.processIdentifier, SIGKILL)
    await offPool { process.waitUntilExit() }
    #expect(process.terminationReason == .uncaughtSignal)

    server.setMode(.normal)
    let again = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(again.status == 0, "\(again)")
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "Documents/big.bin")) == Data(body))
    let last = try #require(server.requests.last)
    #expect(
      last.headers["range"]?.hasPrefix("bytes=") == true && last.headers["range"] != "bytes=0-", "\(last.headers)")
    #expect(last.headers["if-range"] == "\"e1\"")
    // One task, resumed, not a second one.
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.count == 1 && records[0]["state"] as? String == "completed")
  }
}
