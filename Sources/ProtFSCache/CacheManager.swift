import Foundation
import ProtFS
import ProtFSSystem

/// Sees and controls the purgeable parts of containers (`Library/Caches` and `tmp`) with iOS's
/// rules: `Documents`, `Library/Application Support` and `Library/Preferences` are never touched,
/// the temp file of a running download never goes, that of a resumable one only when asked, and
/// no symlink is ever followed.
public struct CacheManager: Sendable {
  /// The directories of a container that iOS may purge, relative to it.
  public static let purgeableDirectories = ["Library/Caches", "tmp"]
  /// The prefix of nsurlsessiond's temp files.
  public static let temporaryDownloadPrefix = TemporaryDownloadName.prefix

  /// The device.
  public let device: Device
  /// Who owns which temp downloads.
  public let tasks: any DownloadTaskDirectory
  /// The clock, for `--older-than`.
  public let now: @Sendable () -> Date
  /// How many threads scan.
  public var threads = 2

  /// A manager for `device`.
  public init(
    device: Device, tasks: any DownloadTaskDirectory = NoDownloadTasks(),
    now: @escaping @Sendable () -> Date = Date.init
  ) {
    self.device = device
    self.tasks = tasks
    self.now = now
  }

  /// Whether `name` looks like an nsurlsessiond temp download.
  public static func isTemporaryDownload(_ name: String) -> Bool {
    TemporaryDownloadName.matches(name)
  }

  // MARK: Scanning

  /// A file (or symlink) in a purgeable directory.
  package struct Item: Sendable {
    var bundleID: BundleID
    /// Relative to the container, for example `Library/Caches/a/b.dat`.
    var path: String
    var directory: String
    var name: String
    var apparentBytes: Int64
    var diskBytes: Int64
    var lastUsed: Date
    var device: UInt64
    var inode: UInt64
    var linkCount: UInt64
  }

  /// The containers to work on: one, or all.
  package func containers(_ bundleID: BundleID?) throws(ProtFSError) -> [Container] {
    try device.requireInitialized()
    if let bundleID {
      let container = device.container(bundleID)
      try container.requireExists()
      return [container]
    }
    return try device.containers()
  }

  /// A purgeable directory of a container, open.
  package struct Root: Sendable {
    var container: Container
    var area: String
    var handle: DirectoryHandle
  }

  /// The purgeable directories of `containers` that exist.
  package func roots(_ containers: [Container]) -> [Root] {
    var roots: [Root] = []
    for container in containers {
      for area in Self.purgeableDirectories {
        guard let path = try? container.path(area), let handle = try? device.openDirectory(path) else { continue }
        roots.append(Root(container: container, area: area, handle: handle))
      }
    }
    return roots
  }

  /// Reads the stat of an entry straight from its `dirent` name (no `String`, no `Date` boxing).
  package static func stat(_ entry: TreeEntry) -> stat? {
    var s = Foundation.stat()
    let statted = Kernel.fstatat(entry.directory.fd, entry.name, &s, AT_SYMLINK_NOFOLLOW)
    return (try? statted.get()) != nil ? s : nil
  }

  package static func lastUsed(_ s: stat) -> Date {
    Date(timeIntervalSince1970: TimeInterval(max(s.st_atim.tv_sec, s.st_mtim.tv_sec)))
  }

  /// Every file and symlink in the purgeable directories of `containers`, scanned in parallel.
  package func scan(_ containers: [Container]) throws(ProtFSError) -> [Item] {
    let roots = self.roots(containers)
    let walker = TreeWalker(threads: threads)
    let (lists, failures) = walker.walk(roots: roots.map(\.handle), make: { [Item]() }) { items, entry, relative in
      guard entry.kind == .file || entry.kind == .symlink else { return entry.kind == .directory }
      guard let s = Self.stat(entry) else { return false }
      let root = roots[entry.root]
      let directory = relative.isEmpty ? root.area : root.area + "/" + relative
      let name = entry.nameString
      items.append(
        Item(
          bundleID: root.container.bundleID, path: directory + "/" + name, directory: directory, name: name,
          apparentBytes: Int64(s.st_size), diskBytes: Int64(s.st_blocks) * 512, lastUsed: Self.lastUsed(s),
          device: UInt64(s.st_dev), inode: UInt64(s.st_ino), linkCount: UInt64(s.st_nlink)))
      return false
    }
    if let failure = failures.first { throw failure }
    return Self.countingHardLinksOnce(lists.flatMap { $0 })
  }

  /// du counts a file with several links once; so do we (the first path keeps the bytes).
  package static func countingHardLinksOnce(_ items: [Item]) -> [Item] {
    var seen = Set<[UInt64]>()
    return items.map { item in
      guard item.linkCount > 1 else { return item }
      var copy = item
      if !seen.insert([item.device, item.inode]).inserted {
        copy.apparentBytes = 0
        copy.diskBytes = 0
      }
      return copy
    }
  }

  // MARK: ls and du

  /// Each container's cache directories and download session, with class, usage and tasks.
  public func list(_ bundleID: BundleID? = nil) throws(ProtFSError) -> [ContainerCacheReport] {
    let selected = try containers(bundleID)
    let items = try scan(selected)
    var reports: [ContainerCacheReport] = []
    for container in selected {
      let mine = items.filter { $0.bundleID == container.bundleID }
      var directories: [CacheDirectoryReport] = []
      var total = CacheUsage()
      for relative in Self.purgeableDirectories {
        var usage = CacheUsage()
        for item in mine where item.path.hasPrefix(relative + "/") {
          usage.add(apparent: item.apparentBytes, disk: item.diskBytes, lastUsed: item.lastUsed)
        }
        total.add(usage)
        let path = try container.path(relative)
        let cls = try? device.effectiveClass(of: path).protectionClass.rawValue
        directories.append(CacheDirectoryReport(path: relative, protectionClass: cls, usage: usage))
      }
      var downloads: DownloadSessionReport?
      let downloadsPath = container.downloadsPath
      let relative = downloadsPath.relative(to: container.path)
      let attached = try tasks.tasks(for: container.bundleID)
      if (try? device.status(downloadsPath))?.kind == .directory || !attached.isEmpty {
        var usage = CacheUsage()
        var orphans: [String] = []
        let owned = Set(attached.compactMap(\.temporaryFileName))
        for item in mine where item.path.hasPrefix(relative + "/") {
          usage.add(apparent: item.apparentBytes, disk: item.diskBytes, lastUsed: item.lastUsed)
          if item.directory == relative, Self.isTemporaryDownload(item.name), !owned.contains(item.name) {
            orphans.append(item.name)
          }
        }
        let cls = try? device.effectiveClass(of: downloadsPath).protectionClass.rawValue
        downloads = DownloadSessionReport(
          path: relative, protectionClass: cls, usage: usage, tasks: attached, orphans: orphans.sorted())
      }
      reports.append(
        ContainerCacheReport(
          bundleID: container.bundleID.rawValue, directories: directories, downloads: downloads, total: total))
    }
    return reports
  }

  /// Sizes per container and per cache directory, apparent and on disk.
  ///
  /// This is `du` for caches, so it is built like `du`: one stat per entry, no list of items kept.
  public func usage(_ bundleID: BundleID? = nil) throws(ProtFSError) -> [ContainerCacheReport] {
    let selected = try containers(bundleID)
    let roots = self.roots(selected)
    struct Tally: Sendable {
      var usage: [CacheUsage]
      var linked: [(root: Int, device: UInt64, inode: UInt64, apparent: Int64, disk: Int64, lastUsed: Date)] = []
    }
    let count = roots.count
    let (tallies, failures) = TreeWalker(threads: threads).walk(
      roots: roots.map(\.handle), make: { Tally(usage: Array(repeating: CacheUsage(), count: count)) }
    ) { tally, entry, _ in
      guard entry.kind == .file || entry.kind == .symlink else { return entry.kind == .directory }
      guard let s = Self.stat(entry) else { return false }
      let apparent = Int64(s.st_size)
      let disk = Int64(s.st_blocks) * 512
      if s.st_nlink > 1 {
        tally.linked.append((entry.root, UInt64(s.st_dev), UInt64(s.st_ino), apparent, disk, Self.lastUsed(s)))
      } else {
        tally.usage[entry.root].add(apparent: apparent, disk: disk, lastUsed: Self.lastUsed(s))
      }
      return false
    }
    if let failure = failures.first { throw failure }
    var usage = Array(repeating: CacheUsage(), count: count)
    var seen = Set<[UInt64]>()
    for tally in tallies {
      for (index, part) in tally.usage.enumerated() { usage[index].add(part) }
      for link in tally.linked {
        // du counts a file with several links once.
        let first = seen.insert([link.device, link.inode]).inserted
        usage[link.root].add(apparent: first ? link.apparent : 0, disk: first ? link.disk : 0, lastUsed: link.lastUsed)
      }
    }
    return selected.map { container in
      var total = CacheUsage()
      let directories = Self.purgeableDirectories.map { area in
        let index = roots.firstIndex { $0.container == container && $0.area == area }
        let areaUsage = index.map { usage[$0] } ?? CacheUsage()
        total.add(areaUsage)
        return CacheDirectoryReport(path: area, protectionClass: nil, usage: areaUsage)
      }
      return ContainerCacheReport(
        bundleID: container.bundleID.rawValue, directories: directories, downloads: nil, total: total)
    }
  }

  // MARK: Purging

  /// Removes least-recently-used items of the purgeable directories by `criteria`; with `dryRun`,
  /// only reports what it would remove.
  public func purge(_ bundleID: BundleID? = nil, criteria: PurgeCriteria, dryRun: Bool = false) throws(ProtFSError)
    -> PurgeReport
  {
    let selected = try containers(bundleID)
    let items = try scan(selected)
    var report = PurgeReport(dryRun: dryRun)
    let cutoff = criteria.olderThan.map { now().addingTimeInterval(-$0) }
    for container in selected {
      let mine = items.filter { $0.bundleID == container.bundleID }.sorted { $0.lastUsed < $1.lastUsed }
      let (candidates, kept, owned) = try partition(container, mine, includeResumable: criteria.includeResumable)
      report.kept += kept
      var chosen: [(Item, String)] = []
      var chosenPaths = Set<String>()
      func choose(_ item: Item, _ reason: String) {
        if chosenPaths.insert(item.path).inserted { chosen.append((item, reason)) }
      }
      let downloads = container.downloadsPath.relative(to: container.path)
      if criteria.orphans {
        for item in candidates
        where item.directory == downloads && Self.isTemporaryDownload(item.name) && !owned.contains(item.name) {
          choose(item, "orphan")
        }
      }
      if let cutoff { for item in candidates where item.lastUsed < cutoff { choose(item, "older-than") } }
      if let limit = criteria.maxSize {
        var total = mine.reduce(Int64(0)) { $0 + $1.diskBytes } - chosen.reduce(Int64(0)) { $0 + $1.0.diskBytes }
        for item in candidates where total > limit && !chosenPaths.contains(item.path) {
          choose(item, "max-size")
          total -= item.diskBytes
        }
      }
      if criteria.selectsEverything { for item in candidates { choose(item, "all") } }
      remove(chosen.sorted { $0.0.lastUsed < $1.0.lastUsed }, from: container, dryRun: dryRun, into: &report)
    }
    return report
  }

  /// Purges as iOS does when storage runs low: the caches and tmp of every container, oldest first,
  /// until `free` bytes on disk are freed (everything purgeable when nil).
  public func simulateStoragePressure(free: Int64?, includeResumable: Bool = false, dryRun: Bool = false)
    throws(ProtFSError) -> PurgeReport
  {
    let selected = try containers(nil)
    let items = try scan(selected)
    var report = PurgeReport(dryRun: dryRun)
    var candidates: [(Item, Container)] = []
    for container in selected {
      let mine = items.filter { $0.bundleID == container.bundleID }
      let (allowed, kept, _) = try partition(container, mine, includeResumable: includeResumable)
      report.kept += kept
      candidates += allowed.map { ($0, container) }
    }
    candidates.sort { $0.0.lastUsed < $1.0.lastUsed }
    var freed: Int64 = 0
    for (item, container) in candidates {
      if let free, freed >= free { break }
      let before = report.removed.count
      remove([(item, "storage-pressure")], from: container, dryRun: dryRun, into: &report)
      if report.removed.count > before { freed += item.diskBytes }
    }
    return report
  }

  /// Splits items into those a purge may take and those a download owns (with why), and returns
  /// the names of owned temp files.
  private func partition(_ container: Container, _ items: [Item], includeResumable: Bool) throws(ProtFSError)
    -> ([Item], [String], Set<String>)
  {
    let attached = try tasks.tasks(for: container.bundleID)
    let downloads = container.downloadsPath.relative(to: container.path)
    let uploads = container.uploadsPath.relative(to: container.path)
    var running = Set<String>()
    var resumable = Set<String>()
    for task in attached {
      guard let name = task.temporaryFileName else { continue }
      if task.isRunning { running.insert(name) } else if task.isResumable { resumable.insert(name) }
    }
    var allowed: [Item] = []
    var kept: [String] = []
    for item in items {
      let isSessionTemp = item.directory == downloads && Self.isTemporaryDownload(item.name)
      if item.directory == uploads && (running.contains(item.name) || resumable.contains(item.name)) {
        // An unfinished upload task's snapshot: the task has nothing else to send.
        kept.append("\(container.bundleID)/\(item.path): an upload task sends it")
      } else if isSessionTemp && running.contains(item.name) {
        kept.append("\(container.bundleID)/\(item.path): a running download writes it")
      } else if isSessionTemp && resumable.contains(item.name) && !includeResumable {
        kept.append("\(container.bundleID)/\(item.path): a download can resume from it (--include-resumable to purge)")
      } else {
        allowed.append(item)
      }
    }
    return (allowed, kept, running.union(resumable))
  }

  private func remove(
    _ chosen: [(Item, String)], from container: Container, dryRun: Bool, into report: inout PurgeReport
  ) {
    var handles: [String: DirectoryHandle] = [:]
    for (item, reason) in chosen {
      let purged = PurgedItem(
        bundleID: container.bundleID.rawValue, path: item.path, apparentBytes: item.apparentBytes,
        diskBytes: item.diskBytes, lastUsed: item.lastUsed, reason: reason)
      if dryRun {
        report.removed.append(purged)
        continue
      }
      do throws(ProtFSError) {
        let directory: DirectoryHandle
        if let cached = handles[item.directory] {
          directory = cached
        } else {
          directory = try device.openDirectory(try container.path(item.directory))
          handles[item.directory] = directory
        }
        if Self.isTemporaryDownload(item.name), TemporaryFileLock.isHeld(item.name, in: directory) {
          report.kept.append("\(container.bundleID)/\(item.path): a download process holds it open")
          continue
        }
        _ = try Kernel.unlinkat(directory.fd, item.name, 0).orThrow(
          "remove", path: directory.pathOf(item.name))
        report.removed.append(purged)
      } catch {
        if error.errno != ENOENT { report.failures.append(error.description) }
      }
    }
  }
}
