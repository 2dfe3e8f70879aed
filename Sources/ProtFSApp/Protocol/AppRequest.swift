import Foundation
import ProtFS

/// One request to an app's supervisor, with what it needs: each kind carries its own typed
/// values, so that no request can carry another kind's (docs/semantics.md §8).
public enum AppRequest: Sendable, Equatable {
  /// Move the app to the background.
  case background
  /// Bring it to the foreground.
  case foreground
  /// Start a background fetch.
  case fetch
  /// Terminate it; `byUser` for a force-quit.
  case terminate(byUser: Bool)
  /// Begin a background task named `name`; the reply is its id.
  case beginTask(name: String)
  /// End the task whose id is `id`.
  case endTask(id: Int)
  /// The background time left, in seconds, or `inf`.
  case timeRemaining
  /// The app's fetch ended with `result`.
  case fetchCompleted(CompletionResult)
  /// Session `session`'s events wait: post `handleEventsForBackgroundURLSession`, waking a
  /// suspended or backgrounded app with background time until it answers `eventsHandled`.
  case sessionEvents(session: String)
  /// The app handled session `session`'s events (the completion handler of
  /// `handleEventsForBackgroundURLSession`).
  case eventsHandled(session: String)
  /// Start the device's session service (an app cannot start it itself: the service runs as root).
  case startSessionService
  /// A remote notification arrived; `payload` is its JSON text (an APNs object with an `aps`
  /// dictionary). With `aps.content-available` 1 it wakes a suspended or backgrounded app with
  /// background time, as a fetch does; without, only an active app is told.
  case push(payload: String)
  /// The app handled the remote notification with `result`.
  case pushCompleted(CompletionResult)
  /// The app's main thread is watched from now on: every event it is sent carries a number, which
  /// it answers with `mainThreadAnswered` once its main thread handled it.
  case watchMainThread
  /// The app's main thread handled event `event` (its number, 0 for
  /// `didFinishLaunchingWithOptions`).
  case mainThreadAnswered(event: Int)
  /// The app is about to abort on an exception nothing caught (`line`: iOS's line, as ProtFSKit
  /// raises it); its crash report carries it if the app then ends with SIGABRT.
  case uncaughtException(line: String)
  /// The app's minimum background fetch interval (`setMinimumBackgroundFetchInterval`), in
  /// seconds, nil for never.
  case setFetchInterval(seconds: Double?)
  /// Register the launch handler of BGTask `identifier`, as `BGTaskScheduler.register` does: only
  /// identifiers the Info.plist permits, once each, and (for an app whose main thread is watched)
  /// only before its launch finished.
  case bgTaskRegister(identifier: String)
  /// Submit the request `message` describes, as `BGTaskScheduler.submit`.
  case bgTaskSubmit(BackgroundTaskMessage)
  /// Cancel the pending request `identifier` names, or every one (nil).
  case bgTaskCancel(identifier: String?)
  /// The pending requests, as a JSON array (`BackgroundTaskMessage.requests`).
  case bgTaskRequests
  /// BGTask `identifier` is completed, with `success`.
  case bgTaskCompleted(identifier: String, success: Bool)
  /// Run a pending request now (`message`: its type, and optionally its identifier and `now` to run
  /// it before its earliest begin date), as the debugger's `_simulateLaunchForTaskWithIdentifier`.
  case bgTaskLaunch(BackgroundTaskMessage)
  /// Expire running BGTask `identifier`, as `_simulateExpirationForTaskWithIdentifier`.
  case bgTaskExpire(identifier: String)
  /// The app plays audio with an active playback session (`playing`), or stopped: with `audio` in
  /// its UIBackgroundModes, it keeps running in the background while it plays.
  case audio(playing: Bool)
  /// The app updates its location in the foreground, in the background (with
  /// `allowsBackgroundLocationUpdates`), or stopped: with `location` in its UIBackgroundModes,
  /// background updates keep it running in the background.
  case locationUpdates(LocationUpdates)
  /// The device is at `coordinate`, as `simctl location set` says: an app updating its location,
  /// and running, gets `didUpdateLocations`.
  case location(Coordinate)

  /// What a request asks, without its values: its name on the wire and on the command line.
  public enum Kind: String, Codable, Sendable, CaseIterable {
    /// `AppRequest.background`.
    case background
    /// `AppRequest.foreground`.
    case foreground
    /// `AppRequest.fetch`.
    case fetch
    /// `AppRequest.terminate`.
    case terminate
    /// `AppRequest.beginTask`.
    case beginTask
    /// `AppRequest.endTask`.
    case endTask
    /// `AppRequest.timeRemaining`.
    case timeRemaining
    /// `AppRequest.fetchCompleted`.
    case fetchCompleted
    /// `AppRequest.sessionEvents`.
    case sessionEvents
    /// `AppRequest.eventsHandled`.
    case eventsHandled = "events-handled"
    /// `AppRequest.startSessionService`.
    case startSessionService
    /// `AppRequest.push`.
    case push
    /// `AppRequest.pushCompleted`.
    case pushCompleted
    /// `AppRequest.watchMainThread`.
    case watchMainThread
    /// `AppRequest.mainThreadAnswered`.
    case mainThreadAnswered
    /// `AppRequest.uncaughtException`.
    case uncaughtException
    /// `AppRequest.setFetchInterval`.
    case setFetchInterval
    /// `AppRequest.bgTaskRegister`.
    case bgTaskRegister
    /// `AppRequest.bgTaskSubmit`.
    case bgTaskSubmit
    /// `AppRequest.bgTaskCancel`.
    case bgTaskCancel
    /// `AppRequest.bgTaskRequests`.
    case bgTaskRequests
    /// `AppRequest.bgTaskCompleted`.
    case bgTaskCompleted
    /// `AppRequest.bgTaskLaunch`.
    case bgTaskLaunch
    /// `AppRequest.bgTaskExpire`.
    case bgTaskExpire
    /// `AppRequest.audio`.
    case audio
    /// `AppRequest.locationUpdates`.
    case locationUpdates
    /// `AppRequest.location`.
    case location

    /// Whether the app itself may ask it (its helper commands). Moving an app between foreground
    /// and background, waking it for a fetch and terminating it are the system's and the user's: an
    /// app that could ask them would escape its background budget and suspension.
    public var isTheAppsOwn: Bool {
      switch self {
      case .beginTask, .endTask, .timeRemaining, .fetchCompleted, .eventsHandled, .startSessionService,
        .setFetchInterval, .uncaughtException, .watchMainThread, .mainThreadAnswered, .pushCompleted, .bgTaskRegister,
        .bgTaskSubmit, .bgTaskCancel, .bgTaskRequests, .bgTaskCompleted, .audio, .locationUpdates:
        true
      case .background, .foreground, .fetch, .terminate, .sessionEvents, .push, .bgTaskLaunch, .bgTaskExpire,
        .location:
        false
      }
    }
  }

  /// What `fetchCompleted` and `pushCompleted` report (UIBackgroundFetchResult's cases).
  public enum CompletionResult: String, Codable, Sendable, CaseIterable {
    /// New data was downloaded.
    case newData
    /// There was no new data.
    case noData
    /// The attempt failed.
    case failed
  }

  /// How an app updates its location (`locationUpdates`).
  public enum LocationUpdates: String, Codable, Sendable, CaseIterable {
    /// While it runs in the foreground (and, without the mode, until it is suspended).
    case foreground
    /// Also in the background (`allowsBackgroundLocationUpdates`).
    case background
    /// It stopped.
    case stop
  }

  /// A place on Earth, in degrees.
  public struct Coordinate: Equatable, Sendable {
    /// -90 to 90.
    public let latitude: Double
    /// -180 to 180.
    public let longitude: Double

    /// The coordinate at `latitude`, `longitude`, or nil when they name none.
    public init?(latitude: Double, longitude: Double) {
      guard (-90...90).contains(latitude), (-180...180).contains(longitude) else { return nil }
      self.latitude = latitude
      self.longitude = longitude
    }

    /// The coordinate `text` ("LATITUDE,LONGITUDE") names, or nil when it names none.
    public init?(_ text: String) {
      let parts = text.split(separator: ",", omittingEmptySubsequences: false)
      guard parts.count == 2, parts.allSatisfy({ $0.count <= 32 }),
        let latitude = Double(parts[0].trimmingCharacters(in: .whitespaces)),
        let longitude = Double(parts[1].trimmingCharacters(in: .whitespaces))
      else { return nil }
      self.init(latitude: latitude, longitude: longitude)
    }
  }

  /// What is asked.
  public var kind: Kind {
    switch self {
    case .background: .background
    case .foreground: .foreground
    case .fetch: .fetch
    case .terminate: .terminate
    case .beginTask: .beginTask
    case .endTask: .endTask
    case .timeRemaining: .timeRemaining
    case .fetchCompleted: .fetchCompleted
    case .sessionEvents: .sessionEvents
    case .eventsHandled: .eventsHandled
    case .startSessionService: .startSessionService
    case .push: .push
    case .pushCompleted: .pushCompleted
    case .watchMainThread: .watchMainThread
    case .mainThreadAnswered: .mainThreadAnswered
    case .uncaughtException: .uncaughtException
    case .setFetchInterval: .setFetchInterval
    case .bgTaskRegister: .bgTaskRegister
    case .bgTaskSubmit: .bgTaskSubmit
    case .bgTaskCancel: .bgTaskCancel
    case .bgTaskRequests: .bgTaskRequests
    case .bgTaskCompleted: .bgTaskCompleted
    case .bgTaskLaunch: .bgTaskLaunch
    case .bgTaskExpire: .bgTaskExpire
    case .audio: .audio
    case .locationUpdates: .locationUpdates
    case .location: .location
    }
  }

  /// Whether the app itself may ask it (`Kind.isTheAppsOwn`).
  public var isTheAppsOwn: Bool { kind.isTheAppsOwn }

  /// The request of `kind` that carries nothing, or nil for a kind that needs values.
  public init?(_ kind: Kind) {
    switch kind {
    case .background: self = .background
    case .foreground: self = .foreground
    case .fetch: self = .fetch
    case .timeRemaining: self = .timeRemaining
    case .startSessionService: self = .startSessionService
    case .watchMainThread: self = .watchMainThread
    case .bgTaskRequests: self = .bgTaskRequests
    default: return nil
    }
  }
}
