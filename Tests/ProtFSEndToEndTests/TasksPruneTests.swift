import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `protfs tasks prune` and what `protfs tasks` lists: finished tasks go by age, never an
/// unfinished one or one its app still waits for; an app prunes only its own through the session
/// service, root any.
@Suite(.serialized, .timeLimit(.minutes(3))) struct TasksPruneTests {
  static let other = "com.example.other"

  /// A task to record: its state, how many days ago it last changed, its app, and whether it is a
  /// handed-over task whose completion the app has not acknowledged.
  struct Seed {
    var state: DownloadState
    var daysAgo: Double
    var app = AppDevice.bundle
    var awaitingApp = false
    var error: String? = nil
  }

  /// Records `seeds` in the task store of `t` (each app's session `<app>.background`), in order;
  /// returns their ids.
  @discardableResult
  static func record(_ seeds: [Seed], on t: TestDevice) throws -> [Int64] {
    let store = try DownloadStore(path: t.device.downloadStorePath)
    var ids: [Int64] = []
    for (index, seed) in seeds.enumerated() {
      try store.registerSession(identifier: seed.app + ".background", bundleID: seed.app)
      let time = Date().timeIntervalSince1970 - seed.daysAgo * 86_400
      var record = DownloadTaskRecord(
        id: 0, sessionIdentifier: seed.app + ".background", url: "https://example.com/\(index).bin",
        destinationDirectory: t.root + "/Containers/\(seed.app)/Documents", fileName: nil,
        temporaryDirectory: t.root + "/Containers/\(seed.app)/Library/Caches", temporaryFileName: nil,
        state: seed.state, bytesReceived: 0, bytesExpected: -1, entityTag: nil, lastModified: nil,
        expectedSHA256: nil, errorMessage: seed.error, errorNumber: nil, taskDescription: nil, createdAt: time,
        updatedAt: time)
      record.handsOver = seed.awaitingApp
      let id = try store.insert([record], owner: "seeded").first!.id
      try store.database.transaction { db throws(ProtFSError) in
        // Settled tasks belong to no session, as the engine leaves them.
        try db.query("UPDATE tasks SET owner = NULL, owner_pid = NULL WHERE id = ?", [.integer(id)])
        if seed.awaitingApp {
          try db.query("UPDATE tasks SET delivery = 'pending' WHERE id = ?", [.integer(id)])
        }
      }
      ids.append(id)
    }
    return ids
  }

  /// The ids left in the task store of `t`.
  static func remaining(_ t: TestDevice) throws -> [Int64] {
    try DownloadStore(path: t.device.downloadStorePath).tasks().map(\.id)
  }

  /// The ids a `tasks prune --json` printed.
  static func pruned(_ result: RunResult) throws -> [Int64] {
    let object = try #require(try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any], "\(result)")
    let ids = try #require(object["ids"] as? [Int], "\(result)").map(Int64.init)
    #expect(object["removed"] as? Int == ids.count)
    return ids
  }

  @Test func finishedTasksGoByAgeAndUnfinishedOnesNever() async throws {
    let t = try TestDevice(containers: [AppDevice.bundle])
    let ids = try Self.record(
      [
        Seed(state: .completed, daysAgo: 10), Seed(state: .failed, daysAgo: 10), Seed(state: .completed, daysAgo: 0),
        Seed(state: .running, daysAgo: 10), Seed(state: .suspended, daysAgo: 10),
        Seed(state: .waitingForUnlock, daysAgo: 10), Seed(state: .canceling, daysAgo: 10),
        Seed(state: .completed, daysAgo: 10, awaitingApp: true), Seed(state: .failed, daysAgo: 3),
      ], on: t)
    let byDefault = try await Protfs.run(["--device", t.root, "tasks", "prune"])
    #expect(byDefault.status == 0 && byDefault.stdout == "Removed 2 tasks finished more than 7d ago.\n", "\(byDefault)")
    #expect(try Self.remaining(t) == Array(ids[2...]))
    let older = try await Protfs.run(["--device", t.root, "tasks", "prune", "--older-than", "2d", "--json"])
    #expect(try Self.pruned(older) == [ids[8]])
    let all = try await Protfs.run(["--device", t.root, "tasks", "prune", "--all", "--json"])
    #expect(try Self.pruned(all) == [ids[2]])
    // Running, suspended, waiting for unlock, cancelling, and the completion the app still waits for.
    #expect(try Self.remaining(t) == Array(ids[3...7]))
    let both = try await Protfs.run(["--device", t.root, "tasks", "prune", "--all", "--older-than", "1d"])
    #expect(both.status == 64 && both.stderr.contains("not both"), "\(both)")
    let bad = try await Protfs.run(["--device", t.root, "tasks", "prune", "--older-than", "soon"])
    #expect(bad.status == 64 && bad.stderr.contains("is not a duration"), "\(bad)")
  }

  @Test func tasksListsWhatIsActiveOrRecentAndCountsTheRest() async throws {
    let t = try TestDevice(containers: [AppDevice.bundle])
    let ids = try Self.record(
      [
        Seed(state: .failed, daysAgo: 3, error: "The old failure."),
        Seed(state: .failed, daysAgo: 0, error: "The new failure."), Seed(state: .running, daysAgo: 5),
      ], on: t)
    let listed = try await Protfs.run(["--device", t.root, "tasks"])
    #expect(listed.status == 0, "\(listed)")
    let rows = listed.stdout.split(separator: "\n").dropFirst().map { $0.split(separator: " ").first.map(String.init) }
    #expect(rows == [String(ids[1]), String(ids[2])], "\(listed)")
    #expect(listed.stderr.contains("task \(ids[1]): The new failure."), "\(listed)")
    #expect(!listed.stderr.contains("The old failure."), "an old failure is not printed again: \(listed)")
    #expect(
      listed.stderr.contains("1 task finished more than a day ago (1 failed) is not listed"), "\(listed)")
    let all = try await Protfs.run(["--device", t.root, "tasks", "--all"])
    #expect(all.stdout.split(separator: "\n").count == 4 && all.stderr.contains("The old failure."), "\(all)")
    let json = try await Protfs.run(["--device", t.root, "tasks", "--json"])
    let records = try #require(try JSONSerialization.jsonObject(with: json.stdoutBytes) as? [[String: Any]])
    #expect(records.map { $0["id"] as? Int } == ids.map { Int($0) }, "--json lists every task: \(json)")
  }

  @Test func withTheServiceRunningRootPrunesEveryAppsTasksThroughIt() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let ids = try Self.record(
      [
        Seed(state: .completed, daysAgo: 10), Seed(state: .failed, daysAgo: 10, app: Self.other),
        Seed(state: .running, daysAgo: 10, app: Self.other),
      ], on: f.t)
    try f.startInProcess()
    let pruned = try await Protfs.run(["--device", f.t.root, "tasks", "prune", "--json"])
    #expect(pruned.status == 0, "\(pruned)")
    #expect(try Self.pruned(pruned) == [ids[0], ids[1]])
    #expect(try Self.remaining(f.t) == [ids[2]])
    // A process that is neither root nor an app may not prune, whatever app it names.
    let attacker = try Attacker()
    defer { attacker.remove() }
    for line in [#"{"kind":"prune"}"#, #"{"kind":"prune","bundleID":"com.example.other"}"#] {
      let asked = try await attacker.run(as: Attacker.appUser, "client.py", [f.socketName, line])
      #expect(asked.stdout.contains("is not running as an app"), "\(asked)")
      #expect(!asked.stdout.contains("pruned"), "\(asked)")
    }
    #expect(try Self.remaining(f.t) == [ids[2]])
  }

  /// The app: prune its finished tasks through the service, then try another app's session.
  static let script = #"""
    #!/bin/sh
    P="$PROTFS"
    echo "pruned $("$P" tasks prune --all --json | tr -d '\n ')"
    "$P" tasks prune --all --session com.example.other.background 2>&1 | sed 's/^/other: /'
    echo done
    while read -r line <&3; do :; done
    """#

  @Test func anAppPrunesOnlyItsOwnTasks() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endAppAndSessionService() }
    let ids = try Self.record(
      [
        Seed(state: .completed, daysAgo: 10), Seed(state: .failed, daysAgo: 0),
        Seed(state: .completed, daysAgo: 10, app: Self.other), Seed(state: .running, daysAgo: 10),
      ], on: d.t)
    let started = try await d.protfs(["sessions", "start"])
    #expect(started.status == 0, "\(started)")
    let app = try d.launch([], [try d.script("prune.sh", Self.script)])
    defer { app.stop() }
    #expect(await app.line(containing: "done", timeout: 60) != nil, "\(app.output)")
    let output = app.output
    let line = try #require(output.first { $0.hasPrefix("pruned ") }, "\(output)")
    let object = try JSONSerialization.jsonObject(with: Data(line.dropFirst("pruned ".count).utf8)) as? [String: Any]
    #expect(object?["ids"] as? [Int] == [Int(ids[0]), Int(ids[1])], "\(output)")
    #expect(
      output.contains {
        $0.hasPrefix("other: ") && $0.contains("no background session 'com.example.other.background'")
      },
      "\(output)")
    // The other app's finished task and the app's running one stay.
    #expect(try Self.remaining(d.t) == [ids[2], ids[3]])
  }
}
