import ProtFS
import ProtFSCache

/// `protfs cache ls`.
package enum CacheListCommand {
  package static let command = Command(
    name: "ls",
    abstract:
      "List cache directories and download sessions with class, size, files, oldest and newest item, and tasks.",
    arguments: [CacheCommand.bundleArgument],
    options: [CommonOptions.json],
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try invocation.argument(CacheCommand.bundleArgument).map(invocation.bundleID)
    let reports = try CacheCommand.manager(invocation).list(bundleID)
    if invocation.flag(CommonOptions.json) {
      try Console.json(reports)
      return 0
    }
    for (index, report) in reports.enumerated() {
      if index > 0 { Console.out() }
      Console.out(report.bundleID)
      var rows = [["DIRECTORY", "CLASS", "FILES", "SIZE", "OLDEST", "NEWEST"]]
      func add(_ path: String, _ cls: String?, _ usage: CacheUsage) {
        rows.append([
          path, cls.flatMap(ProtectionClass.init(rawValue:))?.name ?? "-", String(usage.files),
          ByteSize.format(usage.apparentBytes), CacheCommand.format(usage.oldest), CacheCommand.format(usage.newest),
        ])
      }
      for directory in report.directories { add(directory.path, directory.protectionClass, directory.usage) }
      if let downloads = report.downloads { add(downloads.path, downloads.protectionClass, downloads.usage) }
      Console.table(rows, right: [2, 3], indent: "  ")
      if let downloads = report.downloads {
        if downloads.tasks.isEmpty && downloads.orphans.isEmpty { Console.out("  no download tasks") }
        for task in downloads.tasks {
          Console.out(
            "  task \(task.id) [\(task.session)] \(task.state) \(ByteSize.format(task.bytesReceived)) \(task.temporaryFileName ?? "-") \(task.url)"
          )
        }
        for orphan in downloads.orphans {
          let purge = invocation.spelling.command("cache purge \(report.bundleID) --orphans")
          Console.out("  orphan \(orphan) (no task owns it; \(purge))")
        }
      }
    }
    return 0
  }
}
