import ProtFS
import ProtFSSystem

/// `protfs simulate-storage-pressure`.
package enum StoragePressureCommand {
  package static let command = Command(
    name: "simulate-storage-pressure",
    abstract: "Purge caches as iOS does when storage runs low, so an app's behaviour after a purge can be tested.",
    discussion: """
      Removes items from Library/Caches and tmp of every container, least recently used first,
      until SIZE bytes on disk are freed (everything purgeable without --free). Documents,
      Library/Application Support and Library/Preferences are never touched, nor the temp file of
      a running download.
      """,
    options: [free, CacheCommand.includeResumable, CommonOptions.dryRun, CommonOptions.json],
    run: run
  )

  /// `--free SIZE`.
  package static let free = Option.value(
    "free", "size", help: "How much to free, e.g. 500M or 2GiB (default: everything purgeable).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let free: Int64?
    do {
      free = try invocation.value(Self.free).map { text throws(ProtFSError) in try ByteSize.parse(text) }
    } catch {
      throw invocation.usageError(invocation.describe(error))
    }
    let report = try CacheCommand.manager(invocation).simulateStoragePressure(
      free: free, includeResumable: invocation.flag(CacheCommand.includeResumable),
      dryRun: invocation.flag(CommonOptions.dryRun))
    if invocation.flag(CommonOptions.json) { try Console.json(report) } else { CacheCommand.printReport(report) }
    return report.failures.isEmpty ? 0 : 1
  }
}
