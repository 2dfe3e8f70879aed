import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSTestSupport
import Testing

/// The engine's scheduler on its own: which task starts next, per host and within the connection
/// limit, and when a retry falls due, on a clock the test moves. The tasks are real `DownloadTask`s
/// of a session core that never runs: nothing is transferred.
@Suite struct HostSchedulerTests {
  /// A session core for tasks to belong to, in a fresh temporary directory, and a clock.
  final class Fixture {
    let directory: String
    let core: DownloadSessionCore
    /// The scheduler's clock, in nanoseconds; the test moves it.
    var now: UInt64 = 1_000_000_000

    init() throws {
      directory = try TestDevice.makeTemporaryDirectory()
      let configuration = DownloadSessionConfiguration(
        identifier: "scheduler", bundleID: "com.example.scheduler", storePath: directory + "/downloads.sqlite",
        temporaryDirectory: directory + "/Downloads", destinationDirectory: directory + "/Destination")
      core = DownloadSessionCore(
        configuration: configuration, store: try DownloadStore(path: configuration.storePath))
    }

    deinit { TestDevice.removeTree(directory) }

    /// A scheduler allowing `limit` connections per host, on this fixture's clock.
    func scheduler(_ limit: Int) -> HostScheduler {
      HostScheduler(connectionsPerHost: limit) { [self] in now }
    }

    /// A task with `id` downloading `url`.
    func task(_ id: Int64, _ url: String) -> DownloadTask {
      let record = DownloadTaskRecord(
        id: id, sessionIdentifier: "scheduler", url: url, destinationDirectory: directory + "/Destination",
        fileName: nil, temporaryDirectory: directory + "/Downloads", temporaryFileName: nil, state: .running,
        bytesReceived: 0, bytesExpected: -1, entityTag: nil, lastModified: nil, expectedSHA256: nil,
        errorMessage: nil, errorNumber: nil, taskDescription: nil, createdAt: 0, updatedAt: 0)
      return DownloadTask(record: record, url: URL(string: url)!, fileNameIsExplicit: false, core: core)
    }

    /// Moves the clock on by `nanoseconds`.
    func advance(_ nanoseconds: UInt64) { now += nanoseconds }
  }

  /// The ids `scheduler` hands out in one pass, each launch taking its host's connection (as the
  /// engine's does) unless `opening` is false (a launch that failed the task).
  static func pass(_ scheduler: HostScheduler, opening: Bool = true) -> [Int64] {
    var launched: [Int64] = []
    _ = scheduler.startReady { task, key in
      launched.append(task.id)
      if opening { scheduler.opened(key) }
    }
    return launched
  }

  @Test(arguments: [
    ("https://Example.COM/a", "https://example.com:443"),
    ("http://example.com/a?b", "http://example.com:80"),
    ("HTTP://example.com:8080/a", "http://example.com:8080"),
    ("https://example.com:80/", "https://example.com:80"),
    ("file:///tmp/a", "file:"),
  ])
  func connectionsAreCountedPerSchemeHostAndPort(url: String, key: String) {
    #expect(HostScheduler.hostKey(URL(string: url)!) == key)
  }

  @Test func aHostGetsAtMostItsLimitAndTheRestWaitInOrder() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(2)
    for id in 1...4 { scheduler.accept(fixture.task(Int64(id), "https://a.example/\(id)")) }
    #expect(scheduler.queued == 4)
    #expect(Self.pass(scheduler) == [1, 2])
    #expect(scheduler.queued == 2)
    // Nothing frees a connection: nothing more starts.
    #expect(Self.pass(scheduler) == [])
    scheduler.closed("https://a.example:443")
    #expect(Self.pass(scheduler) == [3])
    scheduler.closed("https://a.example:443")
    scheduler.closed("https://a.example:443")
    #expect(Self.pass(scheduler) == [4])
    #expect(scheduler.queued == 0)
  }

  @Test func hostsDoNotWaitForEachOther() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    scheduler.accept(fixture.task(2, "https://a.example/2"))
    scheduler.accept(fixture.task(3, "https://b.example/3"))
    scheduler.accept(fixture.task(4, "http://a.example/4"))
    // Hosts in the order they first queued a task: one each, whatever waits on the busy one.
    #expect(Self.pass(scheduler) == [1, 3, 4])
    scheduler.closed("https://b.example:443")
    #expect(Self.pass(scheduler) == [])
    scheduler.closed("https://a.example:443")
    #expect(Self.pass(scheduler) == [2])
  }

  @Test func aLimitBelowOneAllowsOneConnection() throws {
    let fixture = try Fixture()
    for limit in [0, -3] {
      let scheduler = fixture.scheduler(limit)
      scheduler.accept(fixture.task(1, "https://a.example/1"))
      scheduler.accept(fixture.task(2, "https://a.example/2"))
      #expect(Self.pass(scheduler) == [1])
    }
  }

  @Test func aLaunchThatTakesNoConnectionLetsTheNextStart() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    for id in 1...3 { scheduler.accept(fixture.task(Int64(id), "https://a.example/\(id)")) }
    #expect(Self.pass(scheduler, opening: false) == [1, 2, 3])
  }

  @Test func startReadySaysWhetherItHandedOutATask() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    #expect(!scheduler.startReady { _, _ in })
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    #expect(scheduler.startReady { _, key in scheduler.opened(key) })
    scheduler.accept(fixture.task(2, "https://a.example/2"))
    #expect(!scheduler.startReady { _, _ in })
  }

  @Test func aTaskIsQueuedOnceUntilForgotten() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(4)
    let task = fixture.task(1, "https://a.example/1")
    #expect(scheduler.isIdle)
    scheduler.accept(task)
    scheduler.accept(task)
    #expect(scheduler.queued == 1)
    #expect(scheduler.isKnown(1))
    #expect(!scheduler.isIdle)
    #expect(Self.pass(scheduler) == [1])
    // Running, it is still the engine's: a second resume does not queue it again.
    scheduler.accept(task)
    #expect(Self.pass(scheduler) == [])
    scheduler.forget(1)
    #expect(!scheduler.isKnown(1))
    #expect(scheduler.isIdle)
    scheduler.accept(task)
    #expect(Self.pass(scheduler) == [1])
  }

  @Test func aRememberedTaskIsNotQueuedByAccept() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    scheduler.remember(7)
    #expect(scheduler.isKnown(7))
    #expect(!scheduler.isIdle)
    scheduler.accept(fixture.task(7, "https://a.example/7"))
    #expect(scheduler.queued == 0)
    #expect(Self.pass(scheduler) == [])
  }

  @Test func aRetryStartsOnceItsDeadlineIsReached() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    let start = fixture.now
    scheduler.retry(fixture.task(1, "https://a.example/1"), at: start + 2_000_000_000)
    #expect(scheduler.isKnown(1))
    // A retry waits apart: it is not counted as queued, and `accept` does not queue it again.
    #expect(scheduler.queued == 0)
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    #expect(scheduler.queued == 0)
    #expect(Self.pass(scheduler) == [])
    fixture.advance(1_999_999_999)
    #expect(Self.pass(scheduler) == [])
    fixture.advance(1)
    #expect(Self.pass(scheduler) == [1])
    #expect(scheduler.isKnown(1))
    // Handed out once: the retry is gone.
    scheduler.closed("https://a.example:443")
    fixture.advance(10_000_000_000)
    #expect(Self.pass(scheduler) == [])
  }

  @Test func aDueRetryQueuesBehindTheTasksWaitingForItsHost() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    let start = fixture.now
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    scheduler.accept(fixture.task(2, "https://a.example/2"))
    #expect(Self.pass(scheduler) == [1])
    scheduler.retry(fixture.task(3, "https://a.example/3"), at: start)
    scheduler.closed("https://a.example:443")
    #expect(Self.pass(scheduler) == [2])
    scheduler.closed("https://a.example:443")
    #expect(Self.pass(scheduler) == [3])
  }

  @Test func theTimeoutIsTheWaitForTheNextRetryCappedByTheCallers() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    let now = fixture.now
    #expect(scheduler.timeout(1000, now: now) == 1000)
    scheduler.retry(fixture.task(1, "https://a.example/1"), at: now + 250_000_000)
    scheduler.retry(fixture.task(2, "https://a.example/2"), at: now + 40_500_000)
    #expect(scheduler.timeout(1000, now: now) == 40)
    #expect(scheduler.timeout(10, now: now) == 10)
    // A retry past due is due at once.
    #expect(scheduler.timeout(1000, now: now + 300_000_000) == 0)
  }

  @Test func aWithdrawnTaskNeverStarts() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    let queued = fixture.task(1, "https://a.example/1")
    let retried = fixture.task(2, "https://b.example/2")
    scheduler.accept(queued)
    scheduler.accept(fixture.task(3, "https://a.example/3"))
    scheduler.retry(retried, at: 0)
    scheduler.withdraw(queued)
    scheduler.withdraw(retried)
    #expect(scheduler.queued == 1)
    #expect(Self.pass(scheduler) == [3])
    #expect(scheduler.timeout(1000, now: 0) == 1000)
  }

  @Test func removeAllForgetsEveryTask() throws {
    let fixture = try Fixture()
    let scheduler = fixture.scheduler(1)
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    scheduler.accept(fixture.task(2, "https://b.example/2"))
    scheduler.retry(fixture.task(3, "https://a.example/3"), at: 0)
    scheduler.removeAll()
    #expect(scheduler.isIdle)
    #expect(scheduler.queued == 0)
    #expect(Self.pass(scheduler) == [])
    scheduler.accept(fixture.task(1, "https://a.example/1"))
    #expect(Self.pass(scheduler) == [1])
  }
}
