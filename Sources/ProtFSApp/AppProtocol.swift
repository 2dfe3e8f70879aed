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

/// One request to an app's supervisor.
public struct AppRequest: Codable, Sendable, Equatable {
  /// What is asked.
  public enum Kind: String, Codable, Sendable {
    /// Move the app to the background.
    case background
    /// Bring it to the foreground.
    case foreground
    /// Start a background fetch.
    case fetch
    /// Terminate it (`argument` "user" for a force-quit).
    case terminate
    /// Begin a background task named `argument`; the reply is its id.
    case beginTask
    /// End the task whose id is `argument`.
    case endTask
    /// The background time left, in seconds, or `inf`.
    case timeRemaining
    /// The app's fetch ended with `argument` (newData, noData or failed).
    case fetchCompleted
    /// Session `argument`'s events wait: post `handleEventsForBackgroundURLSession`, waking a
    /// suspended or backgrounded app with background time until it answers `eventsHandled`.
    case sessionEvents
    /// The app handled session `argument`'s events (the completion handler of
    /// `handleEventsForBackgroundURLSession`).
    case eventsHandled = "events-handled"
    /// Start the device's session service (an app cannot start it itself: the service runs as root).
    case startSessionService
    /// A remote notification arrived; `argument` is its payload (an APNs JSON object with an `aps`
    /// dictionary). With `aps.content-available` 1 it wakes a suspended or backgrounded app with
    /// background time, as a fetch does; without, only an active app is told.
    case push
    /// The app handled the remote notification with `argument` (newData, noData or failed).
    case pushCompleted
    /// The app's main thread is watched from now on (`argument` nil): every event it is sent carries
    /// a number, which it answers with `mainThreadAnswered` once its main thread handled it.
    case watchMainThread
    /// The app's main thread handled event `argument` (its number, or `launch` for
    /// `didFinishLaunchingWithOptions`).
    case mainThreadAnswered
    /// The app is about to abort on an exception nothing caught (`argument`: iOS's line, as
    /// ProtFSKit raises it); its crash report carries it if the app then ends with SIGABRT.
    case uncaughtException
    /// The app's minimum background fetch interval (`setMinimumBackgroundFetchInterval`): `argument`
    /// is seconds, or `never`.
    case setFetchInterval
    /// Register the launch handler of BGTask `argument` (its identifier), as
    /// `BGTaskScheduler.register` does: only identifiers the Info.plist permits, once each, and
    /// (for an app whose main thread is watched) only before its launch finished.
    case bgTaskRegister
    /// Submit the request `argument` describes (`BackgroundTaskMessage`), as `BGTaskScheduler.submit`.
    case bgTaskSubmit
    /// Cancel the pending request `argument` names (its identifier), or every one (nil).
    case bgTaskCancel
    /// The pending requests, as a JSON array (`BackgroundTaskMessage.requests`).
    case bgTaskRequests
    /// BGTask `argument` (a `BackgroundTaskMessage` with its identifier and success) is completed.
    case bgTaskCompleted
    /// Run a pending request now (`BackgroundTaskMessage`: its type, and optionally its identifier
    /// and `now` to run it before its earliest begin date), as the debugger's
    /// `_simulateLaunchForTaskWithIdentifier` does.
    case bgTaskLaunch
    /// Expire running BGTask `argument` (its identifier), as `_simulateExpirationForTaskWithIdentifier`.
    case bgTaskExpire
    /// The app plays audio (`argument` "play") with an active playback session, or stopped ("stop"):
    /// with `audio` in its UIBackgroundModes, it keeps running in the background while it plays.
    case audio
    /// The app updates its location (`argument` "foreground", or "background" with
    /// `allowsBackgroundLocationUpdates`), or stopped ("stop"): with `location` in its
    /// UIBackgroundModes, background updates keep it running in the background.
    case locationUpdates
    /// The device is at `argument` ("LATITUDE,LONGITUDE"), as `simctl location set` says: an app
    /// updating its location, and running, gets `didUpdateLocations`.
    case location
  }

  /// What is asked.
  public var kind: Kind

  /// Whether the app itself may ask it (its helper commands). Moving an app between foreground and
  /// background, waking it for a fetch and terminating it are the system's and the user's: an app
  /// that could ask them would escape its background budget and suspension.
  public var isTheAppsOwn: Bool {
    switch kind {
    case .beginTask, .endTask, .timeRemaining, .fetchCompleted, .eventsHandled, .startSessionService,
      .setFetchInterval, .uncaughtException, .watchMainThread, .mainThreadAnswered, .pushCompleted, .bgTaskRegister,
      .bgTaskSubmit, .bgTaskCancel, .bgTaskRequests, .bgTaskCompleted, .audio, .locationUpdates:
      true
    case .background, .foreground, .fetch, .terminate, .sessionEvents, .push, .bgTaskLaunch, .bgTaskExpire,
      .location:
      false
    }
  }
  /// Its argument, if any.
  public var argument: String?

  /// What `fetchCompleted` and `pushCompleted` may report (UIBackgroundFetchResult's cases).
  package static let completionResults: Set<String> = ["newData", "noData", "failed"]

  /// Creates a request.
  public init(_ kind: Kind, _ argument: String? = nil) {
    self.kind = kind
    self.argument = argument
  }
}

/// The supervisor's answer.
public struct AppReply: Codable, Sendable, Equatable {
  /// The value asked for (a task id, the time remaining), or nil.
  public var value: String?
  /// Why the request was refused, or nil when it was carried out.
  public var error: String?
  /// What kind of refusal it is, where the caller tells them apart (a `BackgroundTaskRefusal`).
  public var code: String?

  /// A success.
  public static func ok(_ value: String? = nil) -> AppReply { AppReply(value: value, error: nil) }
  /// A refusal.
  public static func refused(_ why: String) -> AppReply { AppReply(value: nil, error: why) }
  /// A refusal of BGTaskScheduler's kind `code`.
  public static func refused(_ why: String, _ code: BackgroundTaskRefusal) -> AppReply {
    AppReply(value: nil, error: why, code: code.rawValue)
  }
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
