import ProtFS

/// `protfs simulate-storage-pressure`.
enum StoragePressureCommand {
  static let command = Command(
    name: "simulate-storage-pressure",
    abstract: "Purge caches as iOS does when storage runs low, so an app's behaviour after a purge can be tested.",
    discussion: """
      Removes items from Library/Caches and tmp of every container, least recently used first,
      until SIZE bytes on disk are freed (everything purgeable without --free). Documents,
      Library/Application Support and Library/Preferences are never touched, nor the temp file of
      a running download.
      """,
    options: [
      .value("free", "size", help: "How much to free, e.g. 500M or 2GiB (default: everything purgeable)."),
      .flag("include-resumable", help: "Also temp files that a suspended or failed task could resume from."),
      .flag("dry-run", short: "n", help: "Print what would be removed; change nothing."),
      .flag("json", help: "Print the report as JSON."),
    ],
    run: run
  )

  static func run(_ invocation: Invocation) throws -> Int32 {
    let free: Int64?
    do {
      free = try invocation.value("free").map { text throws(ProtFSError) in try ByteSize.parse(text) }
    } catch {
      throw invocation.usageError(error.description)
    }
    let report = try CacheCommand.manager(invocation).simulateStoragePressure(
      free: free, includeResumable: invocation.flag("include-resumable"), dryRun: invocation.flag("dry-run"))
    if invocation.flag("json") { try Console.json(report) } else { CacheCommand.printReport(report) }
    return report.failures.isEmpty ? 0 : 1
  }
}
