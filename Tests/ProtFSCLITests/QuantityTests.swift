import Foundation
import ProtFSLaunch
import ProtFSSystem
import Testing

@testable import ProtFSCLI

/// What people write on the command line for sizes, durations and lock schedules.
@Suite struct QuantityParsingTests {
  @Test(
    arguments: [
      ("500", 500), ("64K", 65536), ("10MiB", 10_485_760), ("1.5G", 1_610_612_736), ("100MB", 100_000_000),
      ("2 kb", 2000), ("0", 0),
    ] as [(String, Int64)])
  func sizes(text: String, bytes: Int64) throws { #expect(try ByteSize.parse(text) == bytes) }

  @Test(arguments: ["", "ten", "5X", "-1K", "1.2.3M", "K"])
  func badSizesSayWhatIsRight(text: String) {
    #expect { try ByteSize.parse(text) } throws: { ($0 as! ProtFSError).description.contains("for example 500, 64K") }
  }

  @Test(
    arguments: [
      ("30s", 30), ("15m", 900), ("2h", 7200), ("7d", 604_800), ("1w", 604_800), ("1h30m", 5400), ("1.5h", 5400),
    ] as [(String, Double)])
  func durations(text: String, seconds: Double) throws { #expect(try HumanDuration.parse(text) == seconds) }

  @Test(arguments: ["", "5", "5x", "h", "1h30", "-2d"])
  func badDurationsSayWhatIsRight(text: String) {
    #expect { try HumanDuration.parse(text) } throws: {
      ($0 as! ProtFSError).description.contains("for example 30s, 15m")
    }
  }
}

@Suite struct LockScheduleTests {
  @Test(arguments: [
    ("lock@2s,unlock@5s", [LockSchedule.Step(action: .lock, offset: 2), .init(action: .unlock, offset: 5)]),
    ("unlock@1.5, lock@250ms", [.init(action: .lock, offset: 0.25), .init(action: .unlock, offset: 1.5)]),
    ("reboot@1m,inactive@0s", [.init(action: .inactive, offset: 0), .init(action: .reboot, offset: 60)]),
  ])
  func schedulesParse(text: String, steps: [LockSchedule.Step]) throws {
    #expect(try LockSchedule(parsing: text).steps == steps)
  }

  @Test(arguments: ["", "lock", "lock@", "open@2s", "lock@-1s", "lock@2h", "lock@2s,,unlock@3s"])
  func badSchedulesSayWhy(text: String) {
    let error = #expect(throws: ProtFSError.self) { try LockSchedule(parsing: text) }
    #expect(error?.message.contains("does not parse") == true)
  }
}
