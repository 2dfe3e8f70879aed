import Foundation

/// A monotonic clock in nanoseconds, for timeouts and throttling.
package enum Monotonic {
  package static var now: UInt64 { read(CLOCK_MONOTONIC) }

  /// The same clock at the kernel tick's resolution (a few milliseconds), never ahead of `now`
  /// and cheaper to read: for stamping activity, which callbacks do for every header line and
  /// every block of body while the timeouts it serves are seconds long.
  package static var coarse: UInt64 { read(CLOCK_MONOTONIC_COARSE) }

  private static func read(_ clock: clockid_t) -> UInt64 {
    var ts = timespec()
    clock_gettime(clock, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
  }

  /// `seconds` in nanoseconds, clamped: a value read back from the store may be anything.
  package static func nanoseconds(seconds: Double) -> UInt64 {
    guard seconds.isFinite, seconds > 0 else { return 0 }
    return seconds >= 1.8e10 ? UInt64.max / 2 : UInt64(seconds * 1e9)
  }

  package static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }

  package static func nanoseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    // Saturating: a library caller may configure any duration.
    let (whole, overflow) = UInt64(max(0, seconds)).multipliedReportingOverflow(by: 1_000_000_000)
    return overflow || whole > UInt64.max / 2 ? UInt64.max / 2 : whole + UInt64(max(0, attoseconds) / 1_000_000_000)
  }
}
