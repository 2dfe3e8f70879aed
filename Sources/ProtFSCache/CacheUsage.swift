import Foundation
import ProtFS

/// How much a set of files takes: count, apparent bytes, bytes on disk, oldest and newest item.
public struct CacheUsage: Sendable, Equatable, Codable {
  /// Number of files (and symlinks).
  public var files = 0
  /// Sum of sizes, as `du --apparent-size` counts.
  public var apparentBytes: Int64 = 0
  /// Sum of allocated blocks, as `du` counts.
  public var diskBytes: Int64 = 0
  /// The least recently used item's time.
  public var oldest: Date?
  /// The most recently used item's time.
  public var newest: Date?

  /// An empty usage.
  public init() {}

  /// Adds one item.
  public mutating func add(apparent: Int64, disk: Int64, lastUsed: Date) {
    files += 1
    apparentBytes += apparent
    diskBytes += disk
    if oldest.map({ lastUsed < $0 }) ?? true { oldest = lastUsed }
    if newest.map({ lastUsed > $0 }) ?? true { newest = lastUsed }
  }

  /// Adds another usage.
  public mutating func add(_ other: CacheUsage) {
    files += other.files
    apparentBytes += other.apparentBytes
    diskBytes += other.diskBytes
    if let o = other.oldest, oldest.map({ o < $0 }) ?? true { oldest = o }
    if let n = other.newest, newest.map({ n > $0 }) ?? true { newest = n }
  }
}

/// One cache directory of a container and what is in it.
public struct CacheDirectoryReport: Sendable, Equatable, Codable {
  /// The path relative to the container, for example `Library/Caches`.
  public var path: String
  /// Its effective class's raw value.
  public var protectionClass: String?
  /// What it holds.
  public var usage: CacheUsage
}

/// A download session directory (nsurlsessiond's Downloads/<bundle-id>) and its tasks.
public struct DownloadSessionReport: Sendable, Equatable, Codable {
  /// The path relative to the container.
  public var path: String
  /// Its effective class's raw value.
  public var protectionClass: String?
  /// What it holds.
  public var usage: CacheUsage
  /// The tasks attached to the container.
  public var tasks: [AttachedTask]
  /// `CFNetworkDownload_*.tmp` files that no task owns.
  public var orphans: [String]
}

/// A container's caches.
public struct ContainerCacheReport: Sendable, Equatable, Codable {
  /// The app.
  public var bundleID: String
  /// `Library/Caches` and `tmp`.
  public var directories: [CacheDirectoryReport]
  /// The download session directory, when it exists.
  public var downloads: DownloadSessionReport?
  /// The sum of `directories`.
  public var total: CacheUsage
}

/// One item a purge removed (or would remove).
public struct PurgedItem: Sendable, Equatable, Codable {
  /// The app.
  public var bundleID: String
  /// The path relative to the container.
  public var path: String
  /// Apparent size.
  public var apparentBytes: Int64
  /// Bytes on disk.
  public var diskBytes: Int64
  /// When it was last used (the later of access and modification).
  public var lastUsed: Date
  /// Why it went: `older-than`, `max-size`, `orphan`, `all` or `storage-pressure`.
  public var reason: String
}

/// What a purge did.
public struct PurgeReport: Sendable, Equatable, Codable {
  /// Whether nothing was actually removed.
  public var dryRun: Bool
  /// The items removed, oldest first.
  public var removed: [PurgedItem] = []
  /// Items kept because a download owns them, with the reason.
  public var kept: [String] = []
  /// Items that could not be removed.
  public var failures: [String] = []

  /// Apparent bytes freed.
  public var freedApparentBytes: Int64 { removed.reduce(0) { $0 + $1.apparentBytes } }
  /// Bytes on disk freed.
  public var freedDiskBytes: Int64 { removed.reduce(0) { $0 + $1.diskBytes } }
}

/// What `purge` removes.
public struct PurgeCriteria: Sendable, Equatable {
  /// Items last used longer ago than this.
  public var olderThan: TimeInterval?
  /// Least recently used items until each container's caches take at most this many bytes on disk.
  public var maxSize: Int64?
  /// Temp downloads that no task owns.
  public var orphans = false
  /// Also temp files of tasks that could resume from them (never those of running tasks).
  public var includeResumable = false

  /// Criteria; with none of `olderThan`, `maxSize`, `orphans`, a purge removes every purgeable item.
  public init(
    olderThan: TimeInterval? = nil, maxSize: Int64? = nil, orphans: Bool = false, includeResumable: Bool = false
  ) {
    self.olderThan = olderThan
    self.maxSize = maxSize
    self.orphans = orphans
    self.includeResumable = includeResumable
  }

  package var selectsEverything: Bool { olderThan == nil && maxSize == nil && !orphans }
}
