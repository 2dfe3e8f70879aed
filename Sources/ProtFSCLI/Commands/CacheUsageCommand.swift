import ProtFS

/// `protfs cache du`.
package enum CacheUsageCommand {
  package static let command = Command(
    name: "du",
    abstract: "Show the size of each container's caches, apparent and on disk.",
    arguments: [CacheCommand.bundleArgument],
    options: [CommonOptions.json, bytes],
    run: run
  )

  /// `--bytes`, `-b`.
  package static let bytes = Option.flag("bytes", short: "b", help: "Print sizes in bytes.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try invocation.argument(CacheCommand.bundleArgument).map(invocation.bundleID)
    let reports = try CacheCommand.manager(invocation).usage(bundleID)
    if invocation.flag(CommonOptions.json) {
      try Console.json(reports)
      return 0
    }
    let bytes = invocation.flag(Self.bytes)
    let size: (Int64) -> String = { bytes ? "\($0)" : ByteSize.format($0) }
    var rows = [["CONTAINER", "DIRECTORY", "FILES", "APPARENT", "ON DISK"]]
    for report in reports {
      for directory in report.directories {
        rows.append([
          report.bundleID, directory.path, String(directory.usage.files), size(directory.usage.apparentBytes),
          size(directory.usage.diskBytes),
        ])
      }
      rows.append([
        report.bundleID, "total", String(report.total.files), size(report.total.apparentBytes),
        size(report.total.diskBytes),
      ])
    }
    Console.table(rows, right: [2, 3, 4])
    return 0
  }
}
