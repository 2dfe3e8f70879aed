import Foundation
import ProtFS
import ProtFSCache
import ProtFSDownloads

/// `protfs cache`: groups ls, du and purge.
package enum CacheCommand {
  package static let command = Command(
    name: "cache",
    abstract: "See and purge containers' caches (Library/Caches and tmp) and download sessions.",
    discussion: """
      iOS may purge Library/Caches and tmp when storage runs low, and never Documents,
      Library/Application Support or Library/Preferences. These commands follow the same rules.
      """,
    subcommands: [CacheListCommand.command, CacheUsageCommand.command, CachePurgeCommand.command]
  )

  /// `[<bundle-id>]`, for ls, du and purge.
  package static let bundleArgument = Argument(
    name: "bundle-id", help: "Only this app's container (default: every container).", arity: .optional)
  /// `--include-resumable`, for cache purge and simulate-storage-pressure.
  package static let includeResumable = Option.flag(
    "include-resumable", help: "Also temp files that a suspended or failed task could resume from.")

  /// The manager for the invocation's device, with the device's download tasks.
  package static func manager(_ invocation: Invocation) -> CacheManager {
    let device = invocation.device
    return CacheManager(device: device, tasks: DownloadTasks.directory(for: device))
  }

  /// `2026-11-29 19:30`, in UTC.
  package static func format(_ date: Date?) -> String {
    guard let date else { return "-" }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "UTC")
    formatter.dateFormat = "yyyy-MM-dd HH:mm"
    return formatter.string(from: date)
  }

  /// Prints a purge report as people read it.
  package static func printReport(_ report: PurgeReport) {
    let verb = report.dryRun ? "Would remove" : "Removed"
    for item in report.removed {
      Console.out(
        "\(verb) \(item.bundleID)/\(item.path) (\(ByteSize.format(item.apparentBytes)), last used \(format(item.lastUsed)), \(item.reason))"
      )
    }
    for kept in report.kept { Console.err("Kept \(kept).") }
    for failure in report.failures { Console.err("warning: \(failure)") }
    let count = report.removed.count
    Console.out(
      "\(verb) \(count) item\(count == 1 ? "" : "s"), \(report.dryRun ? "freeing" : "freed") \(ByteSize.format(report.freedApparentBytes)) (\(ByteSize.format(report.freedDiskBytes)) on disk)."
    )
  }
}

/// Where the CLI finds a device's download tasks.
package enum DownloadTasks {
  package static func directory(for device: Device) -> any DownloadTaskDirectory { DeviceDownloadTasks(device: device) }
}
