import CSQLite
import Foundation
import ProtFS
import ProtFSSystem

/// How much of a backup's `Manifest.db` protfs reads, and how long SQLite may work on it: the
/// database is anyone's to write, and a few kilobytes of it can describe rows without end (a view
/// that recurses forever) or values of gigabytes. Real phones' manifests stay far below each limit.
package struct ManifestLimits: Sendable {
  /// The most rows: a phone's backup holds a few hundred thousand.
  package var rows = 5_000_000
  /// The longest `fileID`, in bytes (iOS writes 40 hexadecimal digits).
  package var fileIDBytes = 128
  /// The longest `domain`, in bytes (`AppDomainGroup-` and a bundle id of at most 255).
  package var domainBytes = 1_024
  /// The longest `relativePath`, in bytes (`PATH_MAX`).
  package var relativePathBytes = 4_096
  /// The largest `file` (the `MBFile` archive), in bytes (iOS writes a few hundred).
  package var metadataBytes = 1 << 20
  /// The most virtual-machine instructions SQLite runs on the manifest's queries, all together:
  /// an import costs some 31 a row (6.2 million for 200,000 files), so 5,000,000 rows take 155
  /// million; this allows more than ten times that.
  package var steps: Int64 = 2_000_000_000
  /// The most seconds SQLite spends on the manifest's queries, all together (the import's own
  /// work between rows, copying files, is not counted).
  package var seconds: Double = 600

  /// The limits a phone's backup stays within.
  package init() {}
}

/// SQLite's work on one database, counted as it runs: its progress handler is called every
/// `interval` instructions and interrupts the statement once `limits.steps` instructions or
/// `limits.seconds` inside SQLite have been spent. Only time inside `run` counts.
final class QueryBudget {
  /// How many instructions between two calls of the progress handler.
  static let interval: Int32 = 10_000
  /// The limits to hold to.
  let limits: ManifestLimits
  /// Instructions run so far.
  private(set) var steps: Int64 = 0
  /// Seconds spent inside SQLite before the current call.
  private var spent: Double = 0
  /// When the current call into SQLite began (monotonic seconds), nil outside one.
  private var since: Double?
  /// Which limit interrupted SQLite, once one has.
  private(set) var exceeded: String?

  init(limits: ManifestLimits) { self.limits = limits }

  /// The monotonic clock, in seconds.
  private static func now() -> Double {
    var clock = timespec()
    clock_gettime(CLOCK_MONOTONIC, &clock)
    return Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
  }

  /// Installs the progress handler on `database`; the budget must outlive it.
  func install(on database: OpaquePointer) {
    sqlite3_progress_handler(
      database, Self.interval,
      { context in
        guard let context else { return 0 }
        return Unmanaged<QueryBudget>.fromOpaque(context).takeUnretainedValue().progressed() ? 1 : 0
      }, Unmanaged.passUnretained(self).toOpaque())
  }

  /// Counts `interval` more instructions; whether SQLite is to stop.
  private func progressed() -> Bool {
    steps += Int64(Self.interval)
    if steps > limits.steps {
      exceeded = "more than \(limits.steps) steps of SQLite's work"
    } else if let since, spent + Self.now() - since > limits.seconds {
      exceeded = "more than \(Int(limits.seconds)) seconds of SQLite's work"
    }
    return exceeded != nil
  }

  /// Runs `body` (one call into SQLite), counting its time.
  func run<T>(_ body: () -> T) -> T {
    let start = Self.now()
    since = start
    defer {
      spent += Self.now() - start
      since = nil
    }
    return body()
  }
}
