import Foundation
import ProtFS

/// An app's life as iOS's system runs it (docs/semantics.md §8 and §9), as a value: no process,
/// socket, file or clock.
///
/// Every change comes in as a call (a request, a timer that fired, the app's exit) with the
/// moment it happens, and goes out as a list of `Effect`s in the order they must happen: events
/// for the app, the suspension, resumption and kill of its processes, crash reports, saving its
/// record, and timers to start. `AppSupervisor` owns one, calls it on its queue and carries the
/// effects out; tests drive one through any sequence of moments without waiting for any.
///
/// A timer is never cancelled: each carries the generation it was planned in, and one that fires
/// after its generation ended (the task ended, the app came to the foreground) does nothing.
package struct AppLifecycle {

  /// The app.
  package let bundleID: BundleID
  /// Its budgets and graces.
  package let timings: AppTimings
  /// Its record, as the device's app store keeps it.
  package var record: AppRecord
  /// The app's process, 0 while none runs (before the start and after the exit).
  package internal(set) var pid: pid_t = 0
  /// The background modes the app's Info.plist declares (`UIBackgroundModes`): the system
  /// schedules fetches only for an app that lists `fetch`.
  package var backgroundModes: [String] = []
  /// The BGTask identifiers the app's Info.plist permits (`BGTaskSchedulerPermittedIdentifiers`).
  package var permittedTaskIdentifiers: [String] = []
  /// Whether the app is being terminated (by the user, the system or a watchdog).
  package internal(set) var terminating = false

  /// A BGTask the system launched and the app has not completed.
  struct RunningTask {
    var type: BackgroundTaskRequest.Kind
    /// When it was launched (monotonic seconds).
    var start: Double
    /// The run's token: a timer of another run does nothing.
    var token: Int
    /// Whether its expiration went out.
    var expired = false
  }
  /// Whether the app plays audio with an active playback session.
  var playingAudio = false
  /// How the app updates its location, while it does.
  var locationUpdates: AppRequest.LocationUpdates?
  /// The BGTask identifiers whose launch handlers the app registered.
  var registeredTasks: Set<String> = []
  /// Whether a watched app's launch finished (its main thread returned from
  /// `didFinishLaunchingWithOptions`): no launch handler may be registered after it.
  var launchFinished = false
  /// The BGTasks running, by identifier.
  var runningTasks: [String: RunningTask] = [:]
  /// The last token given to a BGTask's run.
  var taskToken = 0

  /// Bumped whenever the pending suspension, warning or kill no longer applies.
  var generation = 0
  /// When the current stay in the background began (monotonic seconds).
  var backgroundStart: Double = 0
  /// The tasks whose expiration warning went out.
  var warned: Set<Int> = []
  var nextTask = 1
  /// When the fetch under way began, while one is.
  var fetchStart: Double?
  /// Bumped whenever the fetch timeout no longer applies.
  var fetchGeneration = 0
  /// When the remote notification being handled arrived, while one is.
  var pushStart: Double?
  /// Bumped whenever the push timeout no longer applies.
  var pushGeneration = 0
  /// When the silent pushes of the last hour were delivered (monotonic seconds), for `pushLimit`.
  var pushDeliveries: [Double] = []
  /// The newest silent push held back by the throttle, while one is.
  var heldPush: String?
  /// Bumped whenever the held push's delivery no longer applies.
  var heldPushToken = 0
  /// The interval the app asked for with `setFetchInterval`, nil for never (the default, as on iOS).
  var fetchInterval: Double?
  /// When the next scheduled fetch is due, while fetches are scheduled.
  var nextFetch: Double?
  /// Bumped whenever the planned fetch no longer applies.
  var fetchPlan = 0
  /// Whether the app asked for its main thread to be watched (`watchMainThread`).
  var watched = false
  /// The events the watched main thread has not answered yet, by number, with their names.
  var unanswered: [Int: String] = [:]
  /// The last number given to an event.
  var eventNumber = 0
  /// The exception the app said it is aborting on (`uncaughtException`), for its crash report.
  var exception: String?
  /// The sessions whose `handleEventsForBackgroundURLSession` the app has not answered yet.
  var postedSessions: Set<String> = []
  /// The sessions whose answer the app's background time waits for, each with the token of its
  /// pending kill (a later token or none: the kill no longer applies).
  var sessionWaits: [String: Int] = [:]
  /// The last token given in `sessionWaits`.
  var sessionToken = 0
  /// The moment of the change being made.
  var now = Moment(uptime: 0, date: Date(timeIntervalSince1970: 0))
  /// This run's kill by the system, or its crash, once there was one: the record keeps it when the
  /// app has ended.
  var crash: AppRecord.Crash?
  /// The effects of the change being made.
  var effects: [Effect] = []

  /// The lifecycle of `bundleID`, whose record is `record`.
  package init(bundleID: BundleID, timings: AppTimings, record: AppRecord) {
    self.bundleID = bundleID
    self.timings = timings
    self.record = record
  }

  // MARK: - Changes

  /// The crash report of this run's kill or crash was written at `path` (nil: it could not be).
  package mutating func crashReportWritten(at path: String?) {
    crash?.crashReport = path
    if record.lastCrash != nil { record.lastCrash = crash }
  }

  /// The app's process `pid` started, in the foreground.
  package mutating func started(_ pid: pid_t) {
    self.pid = pid
    record.state = .active
    record.pid = pid
  }

  /// Carries out `request` at `moment`: the reply and what must happen.
  package mutating func handle(_ request: AppRequest, at moment: Moment) -> (AppReply, [Effect]) {
    begin(moment)
    let reply = handle(request)
    return (reply, end())
  }

  /// `timer` fired at `moment`: what must happen (nothing when it no longer applies).
  package mutating func fire(_ timer: Timer, at moment: Moment) -> [Effect] {
    begin(moment)
    fire(timer)
    return end()
  }

  /// Protected data became available or unavailable: the app hears of it.
  package mutating func protectedData(available: Bool, at moment: Moment) -> [Effect] {
    begin(moment)
    send(available ? .protectedDataDidBecomeAvailable : .protectedDataWillBecomeUnavailable)
    return end()
  }

  /// The app's process ended with `status` (128 + the signal for a signal), killed by `signal`
  /// (nil when it exited, whatever its code), `crashedThread` being the thread it said crashed:
  /// what must happen. A death by a crash signal is a crash, reported as iOS reports one (with the
  /// exception it raised, for SIGABRT); a kill is none (the watchdog's wrote its own report).
  package mutating func exited(
    _ status: Int32, signal: Int32? = nil, crashedThread: (number: Int, name: String?)? = nil, at moment: Moment
  ) -> [Effect] {
    begin(moment)
    if let signal, let exceptionType = AppCrashReport.exceptionType(signal: signal) {
      let reason = (signal == SIGABRT ? exception : nil) ?? AppCrashReport.signalReason(signal)
      let report = AppCrashReport(
        bundleID: bundleID.rawValue, time: now.date, reason: reason, openTasks: record.tasks.map(\.name),
        pid: pid, terminationReason: exceptionType, crashedThread: crashedThread?.number,
        crashedThreadName: crashedThread?.name)
      crash = AppRecord.Crash(report, killed: false)
      effects.append(.writeCrashReport(report))
    }
    // A prewarmed app that ends was never launched: its last run's status stands.
    if record.state != .prewarmed {
      record.lastExitStatus = status
      record.lastCrash = crash
    }
    pid = 0
    runningTasks = [:]
    generation += 1
    fetchGeneration += 1
    pushGeneration += 1
    fetchPlan += 1
    record.state = .notRunning
    record.pid = nil
    record.supervisor = nil
    record.cgroup = nil
    record.supervisorSocket = nil
    record.tasks = []
    record.backgroundSince = nil
    save()
    return end()
  }

  /// The background time left at `moment`, in seconds (the whole of it in the foreground).
  package func remaining(at moment: Moment) -> Double {
    max(0, timings.backgroundTime - (moment.uptime - backgroundStart))
  }

  mutating func begin(_ moment: Moment) {
    now = moment
    effects = []
  }

  mutating func end() -> [Effect] {
    defer { effects = [] }
    return effects
  }
}
