import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `protfs tasks wait`: returns once the session service has stored the tasks' outcomes.
@Suite(.timeLimit(.minutes(2))) struct TasksWaitTests {
  let app = SessionServiceFixture.app

  @Test func waitReturnsOnceTheServiceHasPlacedEveryTask() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let payload = Data(DownloadFixture.bytes(1 << 20))
    // The body stops until the gate opens: the tasks are unfinished when the wait begins.
    let server = try FaultServer(body: Array(payload), entityTag: "\"e1\"", mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("a.bin").absoluteString,
      server.url("b.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    let ids = detached.stdout.split(separator: "\n").map(String.init)
    #expect(ids == ["1", "2"])
    #expect(try f.tasks().allSatisfy { $0.state.isUnfinished })
    // With --session alone: the session's tasks unfinished when the wait begins.
    async let waited = Protfs.run(["--device", f.t.root, "tasks", "wait", "--session", "\(app).background"])
    server.openGate()
    let result = try await waited
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(result)")
    // Returned means stored and in place: no polling needed to see it.
    #expect(try f.tasks().map(\.state) == [.completed, .completed])
    for name in ["a.bin", "b.bin"] {
      #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/\(name)")) == payload)
    }
    // Settled tasks need no service: waiting again answers from the store.
    f.stop()
    let again = try await Protfs.run(
      ["--device", f.t.root, "tasks", "wait", "--session", "\(app).background"] + ids)
    #expect(again.status == 0, "\(again)")
  }

  /// `download --detach --earliest-begin`: the service begins the task no sooner than the time
  /// given (`earliestBeginDate`), `tasks --json` shows it, and a time that is neither a duration
  /// nor an ISO 8601 date is a usage error that records nothing.
  @Test func aDetachedDownloadBeginsNoSoonerThanItsEarliestBegin() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let server = try FaultServer(body: DownloadFixture.bytes(10_000))
    defer { server.stop() }
    let url = server.url("late.bin").absoluteString
    let bad = try await Protfs.run(
      ["--device", f.t.root, "download", "--bundle", app, "--detach", "--earliest-begin", "tomorrow", url])
    #expect(bad.status == 64 && bad.stderr.contains("'tomorrow' is neither a duration"), "\(bad)")
    #expect(try f.tasks().isEmpty)
    let asked = Date()
    let detached = try await Protfs.run(
      ["--device", f.t.root, "download", "--bundle", app, "--detach", "--earliest-begin", "1.5s", url])
    #expect(detached.status == 0, "\(detached)")
    // A task held back an hour shows its date in the list and the table (checked on it, not on
    // the task above, which a loaded machine may already have begun), then is cancelled.
    let held = try await Protfs.run(
      ["--device", f.t.root, "download", "--bundle", app, "--detach", "--earliest-begin", "1h", url])
    #expect(held.status == 0, "\(held)")
    let listed = try await Protfs.run(["--device", f.t.root, "tasks", "--json"])
    #expect(listed.stdout.contains("\"earliestBeginDate\""), "\(listed)")
    let table = try await Protfs.run(["--device", f.t.root, "tasks"])
    #expect(table.stderr.contains("task \(held.output): begins no sooner than "), "\(table)")
    #expect(try await Protfs.run(["--device", f.t.root, "tasks", "cancel", held.output]).status == 0)
    let waited = try await Protfs.run(["--device", f.t.root, "tasks", "wait", detached.output])
    #expect(waited.status == 0, "\(waited)")
    let first = try #require(server.requests.first)
    #expect(first.receivedAt >= asked.addingTimeInterval(1.5), "began \(first.receivedAt), asked \(asked)")
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/late.bin"))?.count == 10_000)
  }

  @Test func aFailedTaskMakesTheWaitFailWithItsError() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let server = try FaultServer(body: Array(repeating: 7, count: 1000), mode: .alwaysStatus(404))
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("gone.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    let result = try await Protfs.run(["--device", f.t.root, "tasks", "wait", detached.output])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("task 1:") && result.stderr.contains("404"), "\(result)")
    #expect(try f.tasks().map(\.state) == [.failed])
  }

  @Test func aTaskTheServiceDoesNotRunIsRefusedByName() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    // A task recorded and held by this process's own session: nothing in the service would end a wait.
    let container = f.t.device.container(try BundleID(app))
    var configuration = try f.t.device.downloadConfiguration(
      bundleID: try BundleID(app), identifier: "\(app).background", destination: try container.path("Documents"))
    configuration.resumesReattachedTasks = false
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let task = try session.downloadTask(with: URL(string: "http://127.0.0.1:9/held.bin")!)
    let withoutService = try await Protfs.run(["--device", f.t.root, "tasks", "wait", String(task.id)])
    #expect(withoutService.status == 1, "\(withoutService)")
    #expect(withoutService.stderr.contains("does not run"), "\(withoutService)")
    try f.startInProcess()
    let refused = try await Protfs.run(["--device", f.t.root, "tasks", "wait", String(task.id)])
    #expect(refused.status == 1, "\(refused)")
    #expect(refused.stderr.contains("Task \(task.id) is suspended"), "\(refused)")
  }

  @Test func badArgumentsAreNamed() async throws {
    let f = try await SessionServiceFixture()
    let none = try await Protfs.run(["--device", f.t.root, "tasks", "wait"])
    #expect(none.status == 64, "\(none)")
    #expect(none.stderr.contains("--session <identifier>"), "\(none)")
    let word = try await Protfs.run(["--device", f.t.root, "tasks", "wait", "seven"])
    #expect(word.status == 64, "\(word)")
    #expect(word.stderr.contains("'seven' is not a task number"), "\(word)")
    let unknown = try await Protfs.run(["--device", f.t.root, "tasks", "wait", "99"])
    #expect(unknown.status == 1, "\(unknown)")
    #expect(unknown.stderr.contains("no download task 99"), "\(unknown)")
    let session = try await Protfs.run(["--device", f.t.root, "tasks", "wait", "--session", "nope"])
    #expect(session.status == 1, "\(session)")
    #expect(session.stderr.contains("no background session 'nope'"), "\(session)")
  }
}
