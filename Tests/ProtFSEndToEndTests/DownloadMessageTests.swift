import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// What `protfs download` says when the store cannot be written, and how it treats a task whose
/// owner was killed but not yet reaped.
@Suite(.timeLimit(.minutes(2))) struct DownloadMessageTests {
  let app = "com.example.app"

  func device() async throws -> TestDevice {
    let t = try TestDevice()
    try #require(try await Protfs.run(["--device", t.root, "init", app]).status == 0)
    return t
  }

  @Test func aRedirectToAFileURLSaysSoAndIsNotRetried() async throws {
    let t = try await device()
    let server = try FaultServer(body: DownloadFixture.bytes(10), mode: .redirect(to: "file:///etc/hostname"))
    defer { server.stop() }
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, server.url().absoluteString])
    #expect(result.status == 1, "\(result)")
    #expect(
      result.stderr.contains("to a file: URL (file:///etc/hostname), which protfs does not follow"),
      "\(result)")
    #expect(!result.stderr.contains("Protocol"), "\(result)")
    #expect(server.requests.count == 1)
  }

  @Test func anOversizedHeaderSaysSoAndIsNotRetried() async throws {
    let t = try await device()
    let server = try FaultServer(body: DownloadFixture.bytes(10), mode: .hugeHeader(bytes: 200_000))
    defer { server.stop() }
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, server.url().absoluteString])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("sent an oversized header"), "\(result)")
    #expect(!result.stderr.contains("Out of memory"), "\(result)")
    #expect(server.requests.count == 1)
  }

  @Test func theProgressBarSurvivesServersAnnouncingTheLargestLength() async throws {
    let t = try await device()
    let body = DownloadFixture.bytes(1000)
    // Content-Length: 9223372036854775807 on both: their sum overflows an Int64.
    let server = try FaultServer(body: body, mode: .announceThenStall(length: Int.max, bytes: 1000))
    defer { server.stop() }
    let result = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "--progress", "bar", "--timeout-resource", "2s",
      server.url("a.bin").absoluteString, server.url("b.bin").absoluteString,
    ])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("Error:"), "\(result)")
  }

  @Test func aResumedTransferSurvivesTheLargestContentLength() async throws {
    let t = try await device()
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"r\"", mode: .stallAfter(bytes: 300_000))
    defer { server.stop() }
    let url = server.url("big.bin").absoluteString
    let process = try #require(
      try await Protfs.startDownload(
        [
          "--device", t.root, "download", "--bundle", app, "--progress", "json", "--timeout-resource", "10s", url,
        ], untilWritten: 300_000),
      "protfs download ended before reporting progress")
    kill(process.processIdentifier, SIGKILL)
    await offPool { process.waitUntilExit() }
    // The resumed request gets a 206 without Content-Range whose length, added to the bytes the
    // task has, overflows an Int64.
    server.setMode(.partialWithoutRange(length: Int.max, bytes: 1000))
    // The rerun resumes the task, which keeps the 10 s it was created with: long enough for the
    // rerun to start before they run out on a loaded machine (a task past them is not resumed,
    // and a fresh request gets the whole body). It fails, without a trap, when its tries or its
    // time run out, whichever comes first.
    let again = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(again.status == 1, "\(again)")
    #expect(
      again.stderr.contains("bytes remaining to read (gave up after") || again.stderr.contains("resource timeout"),
      "\(again)")
  }

  @Test func garbageNumbersInTheStoreDoNotTrap() async throws {
    let t = try await device()
    let server = try FaultServer(body: DownloadFixture.bytes(1000), mode: .alwaysStatus(503))
    defer { server.stop() }
    let failed = try await Protfs.run([
      "--device", t.root, "download", "--bundle", app, "--timeout-resource", "1s", server.url().absoluteString,
    ])
    try #require(failed.status == 1, "\(failed)")
    let edit = try await Protfs.runProgram(
      "/usr/bin/sqlite3",
      [
        t.device.downloadStorePath,
        "UPDATE tasks SET error_errno = 99999999999, request_timeout = 9e999, resource_timeout = 1e300",
      ])
    try #require(edit.status == 0, "\(edit)")
    let list = try await Protfs.run(["--device", t.root, "tasks"])
    #expect(list.status == 0, "\(list)")
    server.setMode(.normal)
    let resumed = try await Protfs.run(["--device", t.root, "tasks", "resume", "1"])
    #expect(resumed.status == 0, "\(resumed)")
  }

  @Test func aReadOnlyStoreNamesTheFileAndNotTheStatement() async throws {
    let t = try await device()
    let server = try FaultServer(body: DownloadFixture.bytes(1000))
    defer { server.stop() }
    let url = server.url().absoluteString
    try #require(try await Protfs.run(["--device", t.root, "download", "--bundle", app, url]).status == 0)
    let store = t.device.downloadStorePath
    // An immutable file: even root cannot write it, as on a read-only disk.
    let immutable = try await Protfs.runProgram("/usr/bin/chattr", ["+i", store])
    try #require(immutable.status == 0, "chattr +i is needed: \(immutable)")
    defer { _ = try? Protfs.runProgramBlocking("/usr/bin/chattr", ["-i", store]) }
    let result = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url + "?again"])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("Cannot use the download task store '\(store)'"), "\(result)")
    #expect(result.stderr.contains("writable"), "\(result)")
    for word in ["INSERT", "UPDATE", "SELECT", "PRAGMA", "BEGIN"] {
      #expect(!result.stderr.contains(word), "\(result)")
    }
  }

  @Test func aTaskWhoseOwnerIsAZombieIsReattached() async throws {
    let t = try await device()
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"z\"", mode: .stallAfter(bytes: 300_000))
    defer { server.stop() }
    let url = server.url("big.bin").absoluteString
    // Spawned directly (Foundation's Process would reap it): killed, it stays a zombie until waited for.
    var pipe: [Int32] = [0, 0]
    try #require(makePipe(&pipe) == 0)
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let arguments = [
      Protfs.binary, "--device", t.root, "download", "--bundle", app, "--progress", "json", url,
    ]
    var argv = arguments.map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    try #require(posix_spawn(&pid, Protfs.binary, &actions, nil, &argv, environ) == 0)
    close(pipe[1])
    var output = Data()
    var buffer = [UInt8](repeating: 0, count: 4096)
    while !String(decoding: output, as: UTF8.self).contains("\"written\":300000") {
      let n = read(pipe[0], &buffer, buffer.count)
      if n <= 0 { break }
      output.append(contentsOf: buffer[0..<n])
    }
    close(pipe[0])
    kill(pid, SIGKILL)
    // Waits for the exit without reaping: the process is now a zombie.
    var info = siginfo_t()
    try #require(waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == 0)
    defer { waitpid(pid, nil, 0) }

    server.setMode(.normal)
    let again = try await Protfs.run(["--device", t.root, "download", "--bundle", app, url])
    #expect(again.status == 0, "\(again)")
    let tasks = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try JSONSerialization.jsonObject(with: Data(tasks.stdout.utf8)) as! [[String: Any]]
    #expect(records.count == 1, "\(tasks.stdout)")
    #expect(server.requests.last?.headers["if-range"] == "\"z\"")
  }
}

/// pipe(2) into an array.
private func makePipe(_ fds: inout [Int32]) -> Int32 { pipe(&fds) }
