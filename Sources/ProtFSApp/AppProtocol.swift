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

/// An event the app reads as one JSON line on `PROTFS_APP_EVENTS_FD`.
public enum AppEvent: String, Sendable, CaseIterable {
  /// The app entered the background.
  case didEnterBackground
  /// The app is about to return to the foreground.
  case willEnterForeground
  /// A background task's time is about to run out (the line carries the task id).
  case backgroundTaskWillExpire
  /// A background fetch started: call `fetch-completed` within the fetch time.
  case performFetch
  /// The app is about to be terminated.
  case willTerminate
  /// The device is locking.
  case protectedDataWillBecomeUnavailable
  /// The device unlocked.
  case protectedDataDidBecomeAvailable
  /// A background session's events wait (the line carries the session's identifier): recreate the
  /// session, take its events, then call `events-handled` (docs/semantics.md §9).
  case handleEventsForBackgroundURLSession
  /// A remote notification arrived (the line carries its payload as `userInfo`): handle it, then
  /// call `push-completed` within the background time (30 s).
  case didReceiveRemoteNotification
  /// The system runs a BGTaskScheduler request (the line carries its `identifier` and `type`):
  /// run the registered launch handler, then call `bgtask-completed` within the task's time.
  case bgTaskLaunch
  /// A running BGTask's time is about to run out (the line carries its `identifier`): stop, and
  /// call `bgtask-completed` at once.
  case bgTaskExpiration
  /// A new location for an app updating its location (the line carries `latitude` and `longitude`).
  case didUpdateLocations
}

/// The environment through which an app and its helper commands find the supervisor.
public enum AppEnvironment {
  /// The supervisor's socket name (`@` and an abstract name).
  public static let socket = "PROTFS_APP_SOCKET"
  /// The app's bundle id.
  public static let bundle = "PROTFS_APP_BUNDLE"
  /// The descriptor the app reads its events from.
  public static let eventsFD = "PROTFS_APP_EVENTS_FD"
  /// `available` or `unavailable`: whether protected data was available when the app started
  /// (`isProtectedDataAvailable` until the first protected-data event).
  public static let protectedData = "PROTFS_APP_PROTECTED_DATA"
  /// The session service's socket name (`SessionServiceClient.socketName(device:)`), set by the CLI.
  public static let sessionsSocket = "PROTFS_SESSIONS_SOCKET"
  /// `background` when the system launched the app in the background (for a fetch or a session's
  /// events): its `applicationState` is `.background` from the start, as on iOS; else `active`.
  public static let launchState = "PROTFS_APP_LAUNCH_STATE"
  /// `1` when the app is prewarmed (`protfs app prewarm`): ProtFSKit holds it before
  /// `UIApplicationMain` until the launch hands it its standard streams on the events descriptor
  /// (a socket then), with an `activate` line.
  public static let prewarm = "PROTFS_APP_PREWARM"
  /// The descriptor number the events come on.
  public static let eventsDescriptor: Int32 = 3

  /// The key of `bundleID` on `device`: a hash of both, so that any path length fits and two
  /// devices never share one. It names the app's cgroup and starts its supervisor's socket name
  /// (which ends in random bits: `AppRecord.supervisorSocket`).
  public static func key(device: Device, bundleID: BundleID) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(device.canonicalRoot.utf8) + [0] + Array(bundleID.rawValue.utf8) {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return String(hash, radix: 16)
  }
}

/// Sends requests to a running app's supervisor.
public enum AppClient {
  /// Sends `request` to the supervisor listening on `@socketName`; throws `.notFound` when none does.
  public static func send(_ request: AppRequest, to socketName: String) throws(ProtFSError) -> AppReply {
    try begin(request, to: socketName).reply()
  }

  /// Sends `request` and returns without waiting for the reply, which `Pending.reply()` reads: the
  /// caller goes on meanwhile (the app's launch runs while its supervisor starts watching it).
  /// Throws `.notFound` when no supervisor listens, `.io` when the request cannot be written.
  public static func begin(_ request: AppRequest, to socketName: String) throws(ProtFSError) -> Pending {
    let connection = try ControlSocket.connect(socketName, servers: AppUser.trustedServices)
    guard let data = try? JSONEncoder().encode(request),
      ControlSocket.writeLine(connection, String(decoding: data, as: UTF8.self))
    else {
      connection.close()
      throw Pending.unanswered(socketName)
    }
    return Pending(connection: connection, socketName: socketName)
  }

  /// A request sent whose reply was not read yet.
  public final class Pending {
    private let connection: FileDescriptor
    private let socketName: String

    fileprivate init(connection: FileDescriptor, socketName: String) {
      self.connection = connection
      self.socketName = socketName
    }

    deinit { connection.close() }

    /// Waits for the reply (the supervisor has carried the request out once it answers).
    public func reply() throws(ProtFSError) -> AppReply {
      guard let line = ControlSocket.readLine(connection),
        let reply = try? JSONDecoder().decode(AppReply.self, from: Data(line.utf8))
      else { throw Self.unanswered(socketName) }
      return reply
    }

    fileprivate static func unanswered(_ socketName: String) -> ProtFSError {
      ProtFSError(.io, "The app's supervisor at '@\(socketName)' did not answer.", path: "@" + socketName)
    }
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
