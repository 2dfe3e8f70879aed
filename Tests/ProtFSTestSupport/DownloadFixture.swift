import Foundation
import ProtFS
import ProtFSDownloads
import Synchronization

/// A fresh place for one download test: a task store, a Downloads (temp) directory and a
/// destination directory under a temporary directory that is removed when the fixture goes away.
public final class DownloadFixture: Sendable {
  /// The temporary directory holding everything.
  public let directory: URL
  /// The task store's path.
  public let storePath: String
  /// Where temp files go.
  public let temporaryDirectory: String
  /// Where finished files go.
  public let destinationDirectory: String

  /// Creates the directories.
  public init() throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-dl-\(UUID().uuidString)")
    storePath = directory.appendingPathComponent("downloads.sqlite").path
    temporaryDirectory = directory.appendingPathComponent("Downloads/com.example.app").path
    destinationDirectory = directory.appendingPathComponent("Documents").path
    try FileManager.default.createDirectory(atPath: temporaryDirectory, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(atPath: destinationDirectory, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(at: directory) }

  /// A configuration for session `identifier` with short retry delays, for tests.
  public func configuration(identifier: String = "com.example.app.background") -> DownloadSessionConfiguration {
    var configuration = DownloadSessionConfiguration(
      identifier: identifier, bundleID: "com.example.app", storePath: storePath,
      temporaryDirectory: temporaryDirectory, destinationDirectory: destinationDirectory)
    configuration.retryBaseDelay = .milliseconds(10)
    configuration.retryMaximumDelay = .milliseconds(100)
    configuration.maximumRetries = 3
    configuration.progressPersistInterval = .milliseconds(50)
    configuration.progressEventInterval = .milliseconds(10)
    return configuration
  }

  /// The names in the temp directory.
  public var temporaryFiles: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: temporaryDirectory)) ?? []).sorted()
  }

  /// The names in the destination directory.
  public var destinationFiles: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: destinationDirectory)) ?? []).sorted()
  }

  /// The bytes of `name` in the destination directory.
  public func destinationContents(_ name: String) -> [UInt8]? {
    FileManager.default.contents(atPath: destinationDirectory + "/" + name).map { [UInt8]($0) }
  }

  /// `count` reproducible pseudo-random bytes.
  public static func bytes(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed
    var result = [UInt8](repeating: 0, count: count)
    result.withUnsafeMutableBytes { raw in
      var index = 0
      while index < count {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        var word = state
        for _ in 0..<8 where index < count {
          raw[index] = UInt8(truncatingIfNeeded: word)
          word >>= 8
          index += 1
        }
      }
    }
    return result
  }
}

/// An access policy whose answers a test changes while downloads run.
public final class SwitchableAccessPolicy: DownloadAccessPolicy {
  private let answers:
    Mutex<(temp: DownloadAccessDecision, destination: DownloadAccessDecision, openTemp: DownloadAccessDecision)>

  /// Starts with the given answers.
  public init(
    temp: DownloadAccessDecision = .allow, destination: DownloadAccessDecision = .allow,
    openTemp: DownloadAccessDecision = .allow
  ) {
    answers = Mutex((temp, destination, openTemp))
  }

  /// Changes the answers.
  public func set(
    temp: DownloadAccessDecision? = nil, destination: DownloadAccessDecision? = nil,
    openTemp: DownloadAccessDecision? = nil
  ) {
    answers.withLock { a in
      if let temp { a.temp = temp }
      if let destination { a.destination = destination }
      if let openTemp { a.openTemp = openTemp }
    }
  }

  /// The current answer for a temp file already being written.
  public func canContinueWritingTemp(in directory: String) -> DownloadAccessDecision {
    answers.withLock { $0.openTemp }
  }

  /// The current temp answer.
  public func canWriteTemp(in directory: String) -> DownloadAccessDecision { answers.withLock { $0.temp } }
  /// The current destination answer.
  public func canPlaceDestination(_ destination: String) -> DownloadAccessDecision {
    answers.withLock { $0.destination }
  }
}

/// Runs a blocking call (waitpid, a pipe read) on a thread of its own, so that it does not hold one
/// of the few threads Swift concurrency shares between all running tests (as many as the machine
/// has cores). Not on a Dispatch global queue: on Linux, Swift concurrency runs its tasks on the
/// same root queue, whose pool grows by about one thread a second when its threads block.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
  await withCheckedContinuation { continuation in
    Thread { continuation.resume(returning: body()) }.start()
  }
}

/// `offPool` for a body that throws.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
  try await offPool { Result { try body() } }.get()
}

extension DownloadSession {
  /// Waits for the first event that `matches` (or for the stream's end).
  public func waitForEvent(_ matches: (DownloadEvent) -> Bool) async {
    for await event in events where matches(event) { return }
  }

  /// Waits until `task` has reported at least `bytes` bytes (or settled).
  ///
  /// The session makes events only once `events` is read, so progress reported before that is
  /// seen in the task's count instead: subscribing first and then looking at the count misses
  /// nothing. (A stalled server sends no more bytes, so no later event would come.)
  public func waitForProgress(of task: DownloadTask, atLeast bytes: Int64) async {
    let events = events
    if task.countOfBytesReceived >= bytes || task.state.isSettled { return }
    for await event in events {
      if case .progress(let id, let written, _) = event, id == task.id, written >= bytes { return }
      if task.state.isSettled { return }
    }
  }
}
