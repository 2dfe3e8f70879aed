import Foundation
import ProtFSKit
import Testing

/// `Logger` and `os_log` as the `os` module's, with `import os` replaced by `import ProtFSKit`:
/// one line a message on standard error, private values redacted as a device's log shows them.
@Suite struct OSLogTests {
  @Test func messagesShowWhatADevicesLogShows() async {
    let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
      let logger = Logger(subsystem: "com.example.app", category: "downloads")
      let token = "s3cr3t-token"
      let bytes = 4096
      let url = URL(string: "https://example.com/report.pdf")!
      logger.info("Downloaded \(bytes) bytes from \(url, privacy: .public) with \(token)")
      logger.error(
        "Retry \(3, format: .hex) failed: \(token, privacy: .private) \(true) \(0.5, format: .fixed(precision: 2))")
      logger.debug("user \(token, privacy: .public) \(Int64(7)) \(UInt8(8)) \(Float(1.5))")
      os_log(
        "%{public}@ saved %d items for %@", log: OSLog(subsystem: "com.example.app", category: "db"), type: .info,
        "Cache" as NSString, 12, "alice" as NSString)
      Logger(.disabled).fault("never shown")
      exit(0)
    }
    let lines = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self).split(separator: "\n")
      .map(String.init)
    #expect(
      lines == [
        "[com.example.app:downloads] info: Downloaded 4096 bytes from https://example.com/report.pdf with <private>",
        "[com.example.app:downloads] error: Retry 3 failed: <private> true 0.50",
        "[com.example.app:downloads] debug: user s3cr3t-token 7 8 1.5",
        "[com.example.app:db] info: Cache saved 12 items for <private>",
      ], "\(lines)")
  }
}
