import ProtFS
import ProtFSCache
import ProtFSSystem

/// `protfs cache purge`.
package enum CachePurgeCommand {
  package static let command = Command(
    name: "purge",
    abstract: "Remove least-recently-used cache items, old items or orphaned temp downloads.",
    discussion: """
      Only Library/Caches and tmp are purged. --older-than removes items last used before then;
      --max-size removes least-recently-used items until each container's caches take at most SIZE
      on disk; --orphans removes CFNetworkDownload_*.tmp files that no download task owns. With none
      of the three, every purgeable item goes. The temp file of a running download is never
      removed, that of a resumable one only with --include-resumable. Symlinks are removed, never
      followed. Directories stay (they carry protection classes).
      """,
    arguments: [CacheCommand.bundleArgument],
    options: [
      olderThan, maxSize, orphans, CacheCommand.includeResumable, CommonOptions.dryRun, CommonOptions.json,
    ],
    run: run
  )

  /// `--older-than DURATION`.
  package static let olderThan = Option.value(
    "older-than", "duration", help: "Items last used longer ago than this, e.g. 30m, 2h, 7d, 1h30m.")
  /// `--max-size SIZE`.
  package static let maxSize = Option.value(
    "max-size", "size", help: "Keep each container's caches within this size, e.g. 100M, 1.5GiB.")
  /// `--orphans`.
  package static let orphans = Option.flag("orphans", help: "Temp downloads that no task owns.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try invocation.argument(CacheCommand.bundleArgument).map(invocation.bundleID)
    var criteria = PurgeCriteria(
      orphans: invocation.flag(Self.orphans), includeResumable: invocation.flag(CacheCommand.includeResumable))
    do {
      criteria.olderThan = try invocation.value(Self.olderThan).map { text throws(ProtFSError) in
        try HumanDuration.parse(text)
      }
      criteria.maxSize = try invocation.value(Self.maxSize).map { text throws(ProtFSError) in try ByteSize.parse(text) }
    } catch {
      throw invocation.usageError(invocation.describe(error))
    }
    let report = try CacheCommand.manager(invocation).purge(
      bundleID, criteria: criteria, dryRun: invocation.flag(CommonOptions.dryRun))
    if invocation.flag(CommonOptions.json) { try Console.json(report) } else { CacheCommand.printReport(report) }
    return report.failures.isEmpty ? 0 : 1
  }
}
