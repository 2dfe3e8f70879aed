import Foundation
import ProtFS
import ProtFSSystem

/// The budgets and graces of an app's life (docs/semantics.md §8), in seconds.
public struct AppTimings: Sendable, Equatable {
  /// Background time while the app holds tasks.
  public var backgroundTime: Double = 30
  /// How long an app without tasks keeps running after entering the background.
  public var suspendAfter: Double = 5
  /// How long a background fetch may take.
  public var fetchTime: Double = 30
  /// How long an app may take to exit after `willTerminate`.
  public var terminateGrace: Double = 2
  /// How long the app's main thread may take to answer an event (twice that for its launch) before
  /// the watchdog kills it, for an app that asked to be watched (ProtFSKit's apps do).
  public var watchdog: Double = 10
  /// The shortest time between two fetches the system schedules, whatever interval the app asks
  /// for: iOS decides it (rarely less than 15 minutes); tests make it short.
  public var fetchMinimum: Double = 900
  /// The most silent pushes delivered to the app in an hour, as iOS throttles background pushes;
  /// one over the limit is held (a newer one replacing it) until the budget allows. Nil: every one
  /// is delivered at once.
  public var pushLimit: Int?
  /// How long a BGAppRefreshTask may run.
  public var refreshTime: Double = 30
  /// How long a BGProcessingTask may run.
  public var processingTime: Double = 180
  /// The longest any of them may be: an hour.
  public static let maximum: Double = 3600

  /// The defaults.
  public init() {}

  /// How long before the budget ends the expiration warnings go out: a fifth of the budget, at
  /// most 5 s (so 5 s before the end of the default 30 s).
  public var warningLead: Double { Self.lead(of: backgroundTime) }

  /// How long before the end of `budget` its expiration comes: a fifth of it, at most 5 s. After
  /// an expiration asked for on demand (`app expire`), the time left to complete.
  public static func lead(of budget: Double) -> Double { min(5, budget * 0.2) }

  /// How long a BGTask of `kind` may run.
  public func time(for kind: BackgroundTaskRequest.Kind) -> Double {
    kind == .refresh ? refreshTime : processingTime
  }
}

extension AppTimings {
  /// Parses a duration such as `30s`, `500ms` or `2m` (seconds when bare), between 1 ms and an hour.
  public static func duration(_ text: String, option: String) throws(ProtFSError) -> Double {
    let lower = text.lowercased()
    let (number, scale): (Substring, Double) =
      lower.hasSuffix("ms")
      ? (lower.dropLast(2), 0.001)
      : lower.hasSuffix("s")
        ? (lower.dropLast(), 1) : lower.hasSuffix("m") ? (lower.dropLast(), 60) : (Substring(lower), 1)
    guard let value = Double(number), value.isFinite, value * scale >= 0.001, value * scale <= maximum else {
      throw ProtFSError(
        .invalidArgument, "The duration '\(text)' of --\(option) is not a time between 1ms and 60m.",
        remedy: .advice("write a time such as 30s, 500ms or 2m"))
    }
    return value * scale
  }
}
