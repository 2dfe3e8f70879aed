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
  /// A moment: monotonic seconds (never going back, for deadlines) and the wall-clock date (for
  /// the record).
  package struct Moment: Sendable, Equatable {
    /// Seconds on a monotonic clock (the supervisor's: `DispatchTime`'s uptime).
    package var uptime: Double
    /// The date, as the record shows it.
    package var date: Date

    /// A moment at `uptime` seconds, dated `date`.
    package init(uptime: Double, date: Date) {
      self.uptime = uptime
      self.date = date
    }

    /// `seconds` later.
    package func adding(_ seconds: Double) -> Moment {
      Moment(uptime: uptime + seconds, date: date.addingTimeInterval(seconds))
    }
  }

  /// What must happen, in order, after a change.
  package enum Effect: Equatable, Sendable {
    /// Write `event` on the app's events pipe.
    case send(EventLine)
    /// Stop every process of the app (SIGSTOP or the cgroup's freezer).
    case suspend
    /// Let them run again.
    case resume
    /// Kill every process of the app.
    case kill
    /// Write `report` to the device's crash reports.
    case writeCrashReport(AppCrashReport)
    /// Write the record as it is now.
    case save
    /// Call `fire(timer, at:)` at monotonic second `deadline` (at once if it has passed).
    case schedule(Timer, deadline: Double)
  }

  /// One event for the app, as its line on the events pipe says it.
  package struct EventLine: Equatable, Sendable {
    /// The event.
    package var event: AppEvent
    /// The number the watched main thread answers it with (`mainThreadAnswered`), if watched.
    package var number: Int?
    /// The background task it is about.
    package var task: AppRecord.Task?
    /// The session it is about.
    package var session: String?
    /// The remote notification's payload, as checked JSON text (`RemoteNotification.json`).
    package var userInfo: String?
    /// The BGTask it is about (`bgTaskLaunch`, `bgTaskExpiration`), and its kind.
    package var identifier: String?
    /// The BGTask's kind (`bgTaskLaunch`).
    package var taskType: BackgroundTaskRequest.Kind?
    /// The location (`didUpdateLocations`).
    package var coordinate: Coordinate?

    /// `event`, with the number, task, session and payload it carries.
    package init(
      event: AppEvent, number: Int? = nil, task: AppRecord.Task? = nil, session: String? = nil,
      userInfo: String? = nil, identifier: String? = nil, taskType: BackgroundTaskRequest.Kind? = nil,
      coordinate: Coordinate? = nil
    ) {
      self.coordinate = coordinate
      self.event = event
      self.number = number
      self.task = task
      self.session = session
      self.userInfo = userInfo
      self.identifier = identifier
      self.taskType = taskType
    }
  }

  /// A place on Earth, in degrees.
  package typealias Coordinate = AppRequest.Coordinate

  /// A deadline the lifecycle planned, with what it needs to tell whether it still applies.
  package enum Timer: Hashable, Sendable {
    /// The expiration warnings of the open background tasks.
    case expirationWarning(generation: Int)
    /// The end of the background time with tasks still open: the kill.
    case backgroundTimeEnd(generation: Int)
    /// The suspension of an app in the background with nothing to finish.
    case suspension(generation: Int)
    /// The end of the time a background fetch may take.
    case fetchTimeout(fetch: Int)
    /// A fetch the system makes by itself.
    case scheduledFetch(plan: Int, period: Double)
    /// The end of the time the app has to answer a session's events.
    case sessionTimeout(session: String, token: Int)
    /// The watchdog's deadline for the main thread's answer to event `number`.
    case watchdog(number: Int, name: String, within: Double)
    /// The end of the grace an app has to exit after `willTerminate`.
    case terminateGrace
    /// The end of the background time the app has to handle a remote notification.
    case pushTimeout(push: Int)
    /// The throttle lets the held silent push through.
    case heldPush(token: Int)
    /// The expiration of BGTask `identifier`'s run `token`, shortly before its time ends.
    case bgTaskExpiration(identifier: String, token: Int)
    /// The end of BGTask `identifier`'s run `token`: the kill, if it is not completed.
    case bgTaskEnd(identifier: String, token: Int)
  }

  /// The app.
  package let bundleID: BundleID
  /// Its budgets and graces.
  package let timings: AppTimings
  /// Its record, as the device's app store keeps it.
  package var record: AppRecord
  /// The app's process, 0 while none runs (before the start and after the exit).
  package private(set) var pid: pid_t = 0
  /// The background modes the app's Info.plist declares (`UIBackgroundModes`): the system
  /// schedules fetches only for an app that lists `fetch`.
  package var backgroundModes: [String] = []
  /// The BGTask identifiers the app's Info.plist permits (`BGTaskSchedulerPermittedIdentifiers`).
  package var permittedTaskIdentifiers: [String] = []
  /// Whether the app is being terminated (by the user, the system or a watchdog).
  package private(set) var terminating = false

  /// A BGTask the system launched and the app has not completed.
  private struct RunningTask {
    var type: BackgroundTaskRequest.Kind
    /// When it was launched (monotonic seconds).
    var start: Double
    /// The run's token: a timer of another run does nothing.
    var token: Int
    /// Whether its expiration went out.
    var expired = false
  }
  /// Whether the app plays audio with an active playback session.
  private var playingAudio = false
  /// How the app updates its location, while it does.
  private var locationUpdates: AppRequest.LocationUpdates?
  /// The BGTask identifiers whose launch handlers the app registered.
  private var registeredTasks: Set<String> = []
  /// Whether a watched app's launch finished (its main thread returned from
  /// `didFinishLaunchingWithOptions`): no launch handler may be registered after it.
  private var launchFinished = false
  /// The BGTasks running, by identifier.
  private var runningTasks: [String: RunningTask] = [:]
  /// The last token given to a BGTask's run.
  private var taskToken = 0

  /// Bumped whenever the pending suspension, warning or kill no longer applies.
  private var generation = 0
  /// When the current stay in the background began (monotonic seconds).
  private var backgroundStart: Double = 0
  /// The tasks whose expiration warning went out.
  private var warned: Set<Int> = []
  private var nextTask = 1
  /// When the fetch under way began, while one is.
  private var fetchStart: Double?
  /// Bumped whenever the fetch timeout no longer applies.
  private var fetchGeneration = 0
  /// When the remote notification being handled arrived, while one is.
  private var pushStart: Double?
  /// Bumped whenever the push timeout no longer applies.
  private var pushGeneration = 0
  /// When the silent pushes of the last hour were delivered (monotonic seconds), for `pushLimit`.
  private var pushDeliveries: [Double] = []
  /// The newest silent push held back by the throttle, while one is.
  private var heldPush: String?
  /// Bumped whenever the held push's delivery no longer applies.
  private var heldPushToken = 0
  /// The interval the app asked for with `setFetchInterval`, nil for never (the default, as on iOS).
  private var fetchInterval: Double?
  /// When the next scheduled fetch is due, while fetches are scheduled.
  private var nextFetch: Double?
  /// Bumped whenever the planned fetch no longer applies.
  private var fetchPlan = 0
  /// Whether the app asked for its main thread to be watched (`watchMainThread`).
  private var watched = false
  /// The events the watched main thread has not answered yet, by number, with their names.
  private var unanswered: [Int: String] = [:]
  /// The last number given to an event.
  private var eventNumber = 0
  /// The exception the app said it is aborting on (`uncaughtException`), for its crash report.
  private var exception: String?
  /// The sessions whose `handleEventsForBackgroundURLSession` the app has not answered yet.
  private var postedSessions: Set<String> = []
  /// The sessions whose answer the app's background time waits for, each with the token of its
  /// pending kill (a later token or none: the kill no longer applies).
  private var sessionWaits: [String: Int] = [:]
  /// The last token given in `sessionWaits`.
  private var sessionToken = 0
  /// The moment of the change being made.
  private var now = Moment(uptime: 0, date: Date(timeIntervalSince1970: 0))
  /// This run's kill by the system, or its crash, once there was one: the record keeps it when the
  /// app has ended.
  private var crash: AppRecord.Crash?
  /// The effects of the change being made.
  private var effects: [Effect] = []

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

  private mutating func begin(_ moment: Moment) {
    now = moment
    effects = []
  }

  private mutating func end() -> [Effect] {
    defer { effects = [] }
    return effects
  }

  // MARK: - Requests

  private mutating func handle(_ request: AppRequest) -> AppReply {
    guard pid > 0, !terminating || request.kind == .timeRemaining else {
      return .refused("The app \(bundleID) is terminating.")
    }
    switch request {
    case .background: return enterBackground()
    case .foreground: return enterForeground()
    case .fetch: return startFetch()
    case .terminate(let byUser): return terminate(user: byUser)
    case .beginTask(let name): return beginTask(name)
    case .endTask(let id): return endTask(id)
    case .timeRemaining:
      guard record.state != .active else { return .ok("inf") }
      return .ok(String(format: "%.3f", remaining(at: now)))
    case .fetchCompleted(let result): return completeFetch(result)
    case .sessionEvents(let session): return postSessionEvents(session)
    case .eventsHandled(let session): return endSessionEvents(session)
    case .startSessionService: return .ok()
    case .setFetchInterval(let seconds): return setFetchInterval(seconds)
    case .audio(let playing): return setAudio(playing)
    case .locationUpdates(let updates): return setLocationUpdates(updates)
    case .location(let coordinate): return deliverLocation(coordinate)
    case .push(let payload): return startPush(payload)
    case .pushCompleted: return completePush()
    case .watchMainThread:
      guard !watched else { return .ok() }
      watched = true
      expectAnswer(0, "didFinishLaunchingWithOptions", within: timings.watchdog * 2)
      return .ok()
    case .mainThreadAnswered(let number):
      guard unanswered.removeValue(forKey: number) != nil else {
        return .refused("No event \(number == 0 ? "launch" : String(number)) waits for the main thread's answer.")
      }
      if number == 0 { launchFinished = true }
      reschedule()
      return .ok()
    case .bgTaskRegister(let identifier): return registerTask(identifier)
    case .bgTaskSubmit(let message): return submitTask(message)
    case .bgTaskCancel(let identifier): return cancelTasks(identifier)
    case .bgTaskRequests: return .ok(BackgroundTaskMessage.list(record.taskRequests))
    case .bgTaskCompleted(let identifier, let success): return completeTask(identifier, success: success)
    case .bgTaskLaunch(let message): return launchTask(message)
    case .bgTaskExpire(let identifier): return expireTask(identifier)
    case .uncaughtException(let line):
      // Believed only when the app then dies of SIGABRT; bounded, as everything the app sends.
      exception = String(line.prefix(4096))
      return .ok()
    }
  }

  private mutating func enterBackground() -> AppReply {
    guard record.state == .active else { return .refused("The app \(bundleID) is already in the background.") }
    record.state = .background
    startBackgroundTime()
    send(.didEnterBackground)
    reschedule()
    return .ok()
  }

  private mutating func enterForeground() -> AppReply {
    guard record.state != .active else { return .refused("The app \(bundleID) is already in the foreground.") }
    send(.willEnterForeground)
    if record.state == .suspended { effects.append(.resume) }
    // In the foreground no watchdog waits for the sessions' answers (they are still expected).
    sessionWaits = [:]
    record.state = .active
    record.backgroundSince = nil
    reschedule()
    return .ok()
  }

  /// The background time starts (again) now, with no warning sent yet.
  private mutating func startBackgroundTime() {
    record.backgroundSince = now.date
    backgroundStart = now.uptime
    warned = []
  }

  /// A suspended app is resumed in the background, with its background time from now, as iOS
  /// wakes an app for a fetch or a session's events.
  private mutating func wakeIfSuspended() {
    guard record.state == .suspended else { return }
    effects.append(.resume)
    record.state = .background
    startBackgroundTime()
  }

  private mutating func startFetch() -> AppReply {
    guard fetchStart == nil else { return .refused("A fetch of \(bundleID) is already under way.") }
    wakeIfSuspended()
    fetchStart = now.uptime
    fetchGeneration += 1
    send(.performFetch)
    effects.append(.schedule(.fetchTimeout(fetch: fetchGeneration), deadline: now.uptime + timings.fetchTime))
    reschedule()
    return .ok()
  }

  private mutating func completeFetch(_ result: AppRequest.CompletionResult) -> AppReply {
    guard let start = fetchStart else { return .refused("No background fetch of \(bundleID) is under way.") }
    record.lastFetch = AppRecord.Fetch(result: result.rawValue, duration: now.uptime - start, time: now.date)
    fetchStart = nil
    fetchGeneration += 1
    reschedule()
    return .ok()
  }

  /// Delivers the remote notification `payload` (docs/semantics.md §8). A silent one
  /// (`content-available` 1) wakes a suspended or backgrounded app with background time, as a
  /// fetch does, and the app is killed with a crash report if it does not call `pushCompleted`
  /// within the fetch time; a visible one reaches only an active app (otherwise the notification
  /// is shown, and the reply says so: "shown").
  private mutating func startPush(_ payload: String) -> AppReply {
    let notification: RemoteNotification
    do {
      notification = try RemoteNotification(payload: Data(payload.utf8))
    } catch {
      return .refused(error.message)
    }
    guard notification.isContentAvailable || record.state == .active else { return .ok("shown") }
    if notification.isContentAvailable, let limit = timings.pushLimit {
      pushDeliveries.removeAll { $0 <= now.uptime - 3600 }
      if pushDeliveries.count >= limit {
        // Held, as iOS holds background pushes over its budget: the newest replaces an older one.
        heldPush = notification.json
        heldPushToken += 1
        effects.append(.schedule(.heldPush(token: heldPushToken), deadline: pushDeliveries[0] + 3600))
        return .ok("throttled")
      }
    }
    guard pushStart == nil else {
      return .refused(
        "A remote notification to \(bundleID) is still being handled: it has not called push-completed yet.")
    }
    wakeIfSuspended()
    pushStart = now.uptime
    if notification.isContentAvailable { pushDeliveries.append(now.uptime) }
    pushGeneration += 1
    send(.didReceiveRemoteNotification, userInfo: notification.json)
    effects.append(.schedule(.pushTimeout(push: pushGeneration), deadline: now.uptime + timings.fetchTime))
    reschedule()
    return .ok()
  }

  private mutating func completePush() -> AppReply {
    guard pushStart != nil else { return .refused("No remote notification to \(bundleID) waits for its completion.") }
    pushStart = nil
    pushGeneration += 1
    reschedule()
    return .ok()
  }

  // MARK: - BGTaskScheduler

  /// Registers the launch handler of `identifier`: refused (as `register` returns false) for an
  /// identifier the Info.plist does not permit, and (as iOS raises an exception) for one
  /// registered before or after a watched app's launch finished.
  private mutating func registerTask(_ identifier: String) -> AppReply {
    guard permittedTaskIdentifiers.contains(identifier) else { return unpermitted(identifier) }
    guard !launchFinished else {
      return .refused(
        "All launch handlers must be registered before application finishes launching ('\(identifier)' came after).",
        .programmingError)
    }
    guard registeredTasks.insert(identifier).inserted else {
      return .refused(
        "Launch handler for task with identifier \(identifier) has already been registered.", .programmingError)
    }
    return .ok()
  }

  /// The refusal of an identifier the Info.plist does not permit (`notPermitted`).
  private func unpermitted(_ identifier: String) -> AppReply {
    .refused(
      "The task identifier '\(identifier)' is not in the BGTaskSchedulerPermittedIdentifiers of \(bundleID)'s Info.plist.",
      .notPermitted)
  }

  /// Submits the request `message` describes, as `BGTaskScheduler.submit` does: only a permitted
  /// identifier of an app that declares the kind's background mode and registered its launch
  /// handler (else iOS's exception), at most one refresh and ten
  /// processing requests pending; one of the same identifier is replaced.
  private mutating func submitTask(_ message: BackgroundTaskMessage) -> AppReply {
    guard let identifier = message.identifier,
      BackgroundTaskRequest.isValidIdentifier(identifier), let type = message.type
    else { return .refused("The task request is not valid: it needs an identifier and a type.") }
    guard permittedTaskIdentifiers.contains(identifier) else { return unpermitted(identifier) }
    guard backgroundModes.contains(type.requiredMode) else {
      return .refused(
        "A \(type.rawValue) task needs '\(type.requiredMode)' in the UIBackgroundModes of \(bundleID)'s Info.plist.",
        .notPermitted)
    }
    guard registeredTasks.contains(identifier) else {
      return .refused("No launch handler registered for task with identifier \(identifier)", .programmingError)
    }
    var requests = record.taskRequests.filter { $0.identifier != identifier }
    guard requests.filter({ $0.type == type }).count < type.pendingLimit else {
      return .refused(
        "\(bundleID) already has \(type.pendingLimit) \(type.rawValue) task request\(type.pendingLimit == 1 ? "" : "s") pending.",
        .tooManyPendingTaskRequests)
    }
    requests.append(
      BackgroundTaskRequest(
        identifier: identifier, type: type, earliestBeginDate: message.earliestBeginDate,
        requiresNetworkConnectivity: type == .processing ? (message.requiresNetworkConnectivity ?? false) : nil,
        requiresExternalPower: type == .processing ? (message.requiresExternalPower ?? false) : nil))
    record.taskRequests = requests
    save()
    return .ok()
  }

  /// Cancels the pending request `identifier`, or every one (nil); cancelling none does nothing.
  private mutating func cancelTasks(_ identifier: String?) -> AppReply {
    record.taskRequests = identifier.map { name in record.taskRequests.filter { $0.identifier != name } } ?? []
    save()
    return .ok()
  }

  /// Runs a pending request as the system does when it decides to: the one `message` names, or the
  /// first of its kind that is due, never before its earliest begin date unless `now`. A
  /// suspended app is resumed; the request leaves the pending ones; the app has the kind's time
  /// to complete it, gets `bgTaskExpiration` a fifth of it (at most 5 s) before the end, and is
  /// killed with a crash report if it has not completed it by then.
  private mutating func launchTask(_ message: BackgroundTaskMessage) -> AppReply {
    guard let type = message.type else {
      return .refused("The launch is not valid: it needs the task's type.")
    }
    let request: BackgroundTaskRequest
    switch BackgroundTaskRequest.choose(
      from: record.taskRequests, for: message, type: type, at: now.date, app: bundleID.rawValue)
    {
    case .success(let chosen): request = chosen
    case .failure(let reason): return .refused(reason.message)
    }
    guard runningTasks[request.identifier] == nil else {
      return .refused("The task '\(request.identifier)' of \(bundleID) is already running.")
    }
    record.taskRequests.removeAll { $0.identifier == request.identifier }
    if record.state != .active { wakeIfSuspended() }
    taskToken += 1
    runningTasks[request.identifier] = RunningTask(type: type, start: now.uptime, token: taskToken)
    send(.bgTaskLaunch, identifier: request.identifier, taskType: type)
    let time = timings.time(for: type)
    let end = now.uptime + time
    effects.append(
      .schedule(
        .bgTaskExpiration(identifier: request.identifier, token: taskToken),
        deadline: end - AppTimings.lead(of: time)))
    effects.append(.schedule(.bgTaskEnd(identifier: request.identifier, token: taskToken), deadline: end))
    reschedule()
    return .ok(request.identifier)
  }

  /// Expires the running task `identifier` now: its expiration handler runs, and it must be
  /// completed within a fifth of its time (at most 5 s).
  private mutating func expireTask(_ identifier: String) -> AppReply {
    guard let task = runningTasks[identifier] else {
      return .refused("No background task '\(identifier)' of \(bundleID) is running.")
    }
    taskToken += 1
    runningTasks[identifier] = RunningTask(type: task.type, start: task.start, token: taskToken, expired: true)
    send(.bgTaskExpiration, identifier: identifier)
    let lead = AppTimings.lead(of: timings.time(for: task.type))
    effects.append(.schedule(.bgTaskEnd(identifier: identifier, token: taskToken), deadline: now.uptime + lead))
    return .ok()
  }

  /// The app completed the task `identifier` (`setTaskCompleted(success:)`).
  private mutating func completeTask(_ identifier: String, success: Bool) -> AppReply {
    guard let task = runningTasks.removeValue(forKey: identifier) else {
      return .refused("No background task '\(identifier)' of \(bundleID) is running.")
    }
    record.lastBackgroundTask = AppRecord.BackgroundTaskResult(
      identifier: identifier, type: task.type, result: success ? "success" : "failure",
      duration: now.uptime - task.start, time: now.date)
    reschedule()
    return .ok()
  }

  // MARK: - Audio and location

  /// Whether a background mode keeps the app running in the background: audio playing with
  /// `audio` declared, or background location updates with `location` declared.
  private var keptRunning: Bool {
    (playingAudio && backgroundModes.contains("audio"))
      || (locationUpdates == .background && backgroundModes.contains("location"))
  }

  /// The app plays audio or stopped. The reply says when its Info.plist does not declare the mode
  /// that would keep it running.
  private mutating func setAudio(_ playing: Bool) -> AppReply {
    playingAudio = playing
    reschedule()
    return .ok(
      playingAudio && !backgroundModes.contains("audio")
        ? "the app's Info.plist does not list audio in UIBackgroundModes: it is suspended in the background as any app"
        : nil)
  }

  /// The app updates its location in the foreground or the background, or stopped.
  private mutating func setLocationUpdates(_ updates: AppRequest.LocationUpdates) -> AppReply {
    locationUpdates = updates == .stop ? nil : updates
    reschedule()
    return .ok(
      locationUpdates == .background && !backgroundModes.contains("location")
        ? "the app's Info.plist does not list location in UIBackgroundModes: it is suspended in the background as any app"
        : nil)
  }

  /// The device is at `coordinate`: an app updating its location and not suspended gets it; the
  /// reply says "not updating" or "suspended" when it does not.
  private mutating func deliverLocation(_ coordinate: Coordinate) -> AppReply {
    guard locationUpdates != nil else { return .ok("not updating") }
    guard record.state != .suspended else { return .ok("suspended") }
    send(.didUpdateLocations, coordinate: coordinate)
    return .ok()
  }

  /// Records the app's minimum fetch interval (nil: never) and plans the fetches it allows.
  private mutating func setFetchInterval(_ seconds: Double?) -> AppReply {
    if let seconds, !seconds.isFinite || seconds < 0 {
      return .refused("'\(seconds)' is not a fetch interval: give seconds (0 for the minimum) or never.")
    }
    fetchInterval = seconds
    nextFetch = nil
    planFetch()
    return .ok(
      backgroundModes.contains("fetch") ? nil : "the app's Info.plist does not list fetch in UIBackgroundModes")
  }

  /// Plans the next fetch the system makes by itself, as iOS does: only for an app that asked (an
  /// interval other than never, and `fetch` in `UIBackgroundModes`), no sooner than the interval
  /// (or `fetchMinimum`, if longer) after the last one, and only while the app is in the
  /// background or suspended (one due in the foreground waits for the next period).
  private mutating func planFetch() {
    fetchPlan += 1
    guard let interval = fetchInterval, backgroundModes.contains("fetch"), pid > 0, !terminating else {
      nextFetch = nil
      return
    }
    let period = max(interval, timings.fetchMinimum, 0.05)
    let due = max(nextFetch ?? (now.uptime + period), now.uptime)
    nextFetch = due
    effects.append(.schedule(.scheduledFetch(plan: fetchPlan, period: period), deadline: due))
  }

  /// The most background tasks an app may hold open at once: each is kept in the app's record,
  /// which every command reads, so an app that begins them without end is refused (UIKit's
  /// `beginBackgroundTask` gives `.invalid`) rather than growing it past what can be read.
  public static let maximumOpenTasks = 1000
  /// The longest task name kept, in bytes; a longer one is cut there (names are for people).
  public static let maximumTaskName = 256

  private mutating func beginTask(_ name: String) -> AppReply {
    if record.state != .active && remaining(at: now) <= 0 {
      return .refused("The app \(bundleID) has no background time left.")
    }
    guard record.tasks.count < Self.maximumOpenTasks else {
      return .refused(
        "The app \(bundleID) has \(Self.maximumOpenTasks) background tasks open already; end one (endBackgroundTask) first."
      )
    }
    let id = nextTask
    nextTask += 1
    record.tasks.append(AppRecord.Task(id: id, name: Self.shortened(name)))
    reschedule()
    return .ok(String(id))
  }

  /// `name` cut to at most `maximumTaskName` bytes, at a character's end.
  static func shortened(_ name: String) -> String {
    guard name.utf8.count > maximumTaskName else { return name }
    var result = ""
    for character in name {
      guard result.utf8.count + character.utf8.count <= maximumTaskName else { break }
      result.append(character)
    }
    return result
  }

  private mutating func endTask(_ id: Int) -> AppReply {
    guard let index = record.tasks.firstIndex(where: { $0.id == id }) else {
      return .refused("'\(id)' is not an open background task of \(bundleID).")
    }
    record.tasks.remove(at: index)
    reschedule()
    return .ok()
  }

  private mutating func terminate(user: Bool) -> AppReply {
    record.forceQuit = user
    terminating = true
    generation += 1
    save()
    // A suspended app is killed without notice, as on iOS.
    if record.state == .suspended {
      effects.append(.kill)
      return .ok()
    }
    send(.willTerminate)
    effects.append(.schedule(.terminateGrace, deadline: now.uptime + timings.terminateGrace))
    return .ok()
  }

  /// Posts session `session`'s events to the app. In the foreground it only gets the event; in the
  /// background, or suspended (then it is resumed), it gets the background time to answer, as for a
  /// fetch: no suspension meanwhile, and a kill with a crash report when no answer comes in time.
  private mutating func postSessionEvents(_ session: String) -> AppReply {
    guard !session.isEmpty else { return .refused("Give the identifier of the session whose events wait.") }
    postedSessions.insert(session)
    if record.state != .active {
      wakeIfSuspended()
      if sessionWaits[session] == nil {
        sessionToken += 1
        sessionWaits[session] = sessionToken
        effects.append(
          .schedule(
            .sessionTimeout(session: session, token: sessionToken), deadline: now.uptime + timings.backgroundTime))
      }
    }
    send(.handleEventsForBackgroundURLSession, session: session)
    reschedule()
    return .ok()
  }

  /// The app answered session `session`'s events: its wait ends (suspension follows as after a
  /// fetch). Refused for a session whose events were not posted.
  private mutating func endSessionEvents(_ session: String) -> AppReply {
    guard postedSessions.remove(session) != nil else {
      return .refused(
        "No handleEventsForBackgroundURLSession for the session '\(session)' waits for an answer from the app \(bundleID)."
      )
    }
    sessionWaits[session] = nil
    reschedule()
    return .ok()
  }

  // MARK: - Timers

  private mutating func fire(_ timer: Timer) {
    switch timer {
    case .expirationWarning(let planned):
      guard generation == planned else { return }
      for task in record.tasks where warned.insert(task.id).inserted {
        send(.backgroundTaskWillExpire, task: task)
      }
    case .backgroundTimeEnd(let planned):
      guard generation == planned, !record.tasks.isEmpty else { return }
      kill(
        "background tasks were still open when the background time (\(Self.seconds(timings.backgroundTime))) ran out")
    case .suspension(let planned):
      guard generation == planned, record.state == .background else { return }
      effects.append(.suspend)
      record.state = .suspended
      generation += 1
      save()
    case .fetchTimeout(let fetch):
      guard fetchGeneration == fetch, fetchStart != nil else { return }
      record.lastFetch = AppRecord.Fetch(result: "timedOut", duration: timings.fetchTime, time: now.date)
      kill("the background fetch did not complete within \(Self.seconds(timings.fetchTime))")
    case .scheduledFetch(let plan, let period):
      guard fetchPlan == plan, pid > 0, !terminating else { return }
      if record.state != .active && fetchStart == nil { _ = startFetch() }
      nextFetch = now.uptime + period
      planFetch()
    case .sessionTimeout(let session, let token):
      guard sessionWaits[session] == token else { return }
      kill(
        "the app did not call the completion handler of handleEventsForBackgroundURLSession for session '\(session)' within \(Self.seconds(timings.backgroundTime))"
      )
    case .watchdog(let number, let name, let within):
      guard unanswered[number] != nil, pid > 0, !terminating else { return }
      // Time frozen does not count: a deadline met while the app is suspended waits for it to run.
      if record.state == .suspended {
        expectAnswer(number, name, within: within)
        return
      }
      kill("the main thread did not return from \(name) within \(Self.seconds(within)) (it is blocked)")
    case .terminateGrace:
      if pid > 0 { effects.append(.kill) }
    case .pushTimeout(let push):
      guard pushGeneration == push, pushStart != nil else { return }
      // In the foreground no watchdog waits for the handler.
      guard record.state != .active else {
        pushStart = nil
        reschedule()
        return
      }
      kill(
        "the app did not call the completion handler of didReceiveRemoteNotification within \(Self.seconds(timings.fetchTime))"
      )
    case .heldPush(let token):
      guard heldPushToken == token, let payload = heldPush, pid > 0, !terminating else { return }
      heldPush = nil
      if startPush(payload).error != nil {
        // One is still being handled: the held one waits for it.
        heldPush = payload
        heldPushToken += 1
        effects.append(.schedule(.heldPush(token: heldPushToken), deadline: now.uptime + 1))
      }
    case .bgTaskExpiration(let identifier, let token):
      guard let task = runningTasks[identifier], task.token == token, !task.expired else { return }
      runningTasks[identifier]?.expired = true
      send(.bgTaskExpiration, identifier: identifier)
    case .bgTaskEnd(let identifier, let token):
      guard let task = runningTasks[identifier], task.token == token else { return }
      record.lastBackgroundTask = AppRecord.BackgroundTaskResult(
        identifier: identifier, type: task.type, result: "timedOut", duration: now.uptime - task.start,
        time: now.date)
      kill("the background task '\(identifier)' was not completed (setTaskCompleted) within its time")
    }
  }

  /// Plans what happens next in the background: the suspension, or the warnings and the kill.
  private mutating func reschedule() {
    generation += 1
    save()
    guard record.state == .background else { return }
    if !record.tasks.isEmpty {
      let warning = backgroundStart + max(0, timings.backgroundTime - timings.warningLead)
      effects.append(.schedule(.expirationWarning(generation: generation), deadline: warning))
      effects.append(
        .schedule(.backgroundTimeEnd(generation: generation), deadline: backgroundStart + timings.backgroundTime))
    } else if fetchStart == nil && pushStart == nil && sessionWaits.isEmpty && unanswered.isEmpty
      && runningTasks.isEmpty && !keptRunning
    {
      let suspension = max(backgroundStart + timings.suspendAfter, now.uptime)
      effects.append(.schedule(.suspension(generation: generation), deadline: suspension))
    }
  }

  /// The watchdog's kill: a crash report, then SIGKILL to the whole app.
  private mutating func kill(_ reason: String) {
    guard pid > 0, !terminating else { return }
    terminating = true
    generation += 1
    let report = AppCrashReport(
      bundleID: bundleID.rawValue, time: now.date, reason: reason, openTasks: record.tasks.map(\.name), pid: pid)
    crash = AppRecord.Crash(report, killed: true)
    effects.append(.writeCrashReport(report))
    save()
    effects.append(.kill)
  }

  /// The watchdog: event `number` (`name`) must be answered by the app's main thread `within`
  /// seconds of the app running, or the app is killed with a crash report, as iOS's watchdog kills
  /// an app whose main thread is blocked.
  private mutating func expectAnswer(_ number: Int, _ name: String, within seconds: Double) {
    unanswered[number] = name
    effects.append(.schedule(.watchdog(number: number, name: name, within: seconds), deadline: now.uptime + seconds))
  }

  /// Sends `event` to a running app; a watched app's events but `willTerminate` carry the number
  /// its main thread answers with, and the watchdog waits for the answer.
  private mutating func send(
    _ event: AppEvent, task: AppRecord.Task? = nil, session: String? = nil, userInfo: String? = nil,
    identifier: String? = nil, taskType: BackgroundTaskRequest.Kind? = nil, coordinate: Coordinate? = nil
  ) {
    guard pid > 0 else { return }
    var number: Int?
    if watched && event != .willTerminate {
      eventNumber += 1
      number = eventNumber
      expectAnswer(eventNumber, event.rawValue, within: timings.watchdog)
    }
    effects.append(
      .send(
        EventLine(
          event: event, number: number, task: task, session: session, userInfo: userInfo, identifier: identifier,
          taskType: taskType, coordinate: coordinate)))
  }

  /// The record is to be written (once for a run of changes with nothing else between them).
  private mutating func save() {
    if effects.last != .save { effects.append(.save) }
  }

  /// `value` seconds as a message says it.
  package static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : String(format: "%.3g s", value)
  }
}
