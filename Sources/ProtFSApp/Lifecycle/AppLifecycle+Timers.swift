import Foundation
import ProtFS

/// The deadlines an app's lifecycle planned, and what each change does next: the suspension, the
/// warnings, the watchdog's kill, the events sent and the record saved.
extension AppLifecycle {
  /// Carries out `timer`, unless it no longer applies.
  mutating func fire(_ timer: Timer) {
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
    case .watchdog(let number, let name, let within): watchdogExpired(number, name, within: within)
    case .terminateGrace:
      if pid > 0 { effects.append(.kill) }
    case .pushTimeout(let push): pushTimedOut(push)
    case .heldPush(let token): deliverHeldPush(token)
    case .bgTaskExpiration(let identifier, let token):
      guard let task = runningTasks[identifier], task.token == token, !task.expired else { return }
      runningTasks[identifier]?.expired = true
      send(.bgTaskExpiration, identifier: identifier)
    case .bgTaskEnd(let identifier, let token): taskTimedOut(identifier, token: token)
    }
  }

  /// The watchdog's deadline for event `number` passed: the app is killed unless the main thread
  /// answered, or the app is suspended (time frozen does not count: the deadline waits for it to
  /// run).
  mutating func watchdogExpired(_ number: Int, _ name: String, within: Double) {
    guard unanswered[number] != nil, pid > 0, !terminating else { return }
    if record.state == .suspended {
      expectAnswer(number, name, within: within)
      return
    }
    kill("the main thread did not return from \(name) within \(Self.seconds(within)) (it is blocked)")
  }

  /// The time to handle remote notification `push` ended: a backgrounded app that did not call
  /// its completion handler is killed (in the foreground no watchdog waits for the handler).
  mutating func pushTimedOut(_ push: Int) {
    guard pushGeneration == push, pushStart != nil else { return }
    guard record.state != .active else {
      pushStart = nil
      reschedule()
      return
    }
    kill(
      "the app did not call the completion handler of didReceiveRemoteNotification within \(Self.seconds(timings.fetchTime))"
    )
  }

  /// The throttle lets the held push `token` through, unless one is still being handled.
  mutating func deliverHeldPush(_ token: Int) {
    guard heldPushToken == token, let payload = heldPush, pid > 0, !terminating else { return }
    heldPush = nil
    if startPush(payload).error != nil {
      // One is still being handled: the held one waits for it.
      heldPush = payload
      heldPushToken += 1
      effects.append(.schedule(.heldPush(token: heldPushToken), deadline: now.uptime + 1))
    }
  }

  /// BGTask `identifier`'s run `token` ended without its completion: the kill.
  mutating func taskTimedOut(_ identifier: String, token: Int) {
    guard let task = runningTasks[identifier], task.token == token else { return }
    record.lastBackgroundTask = AppRecord.BackgroundTaskResult(
      identifier: identifier, type: task.type, result: "timedOut", duration: now.uptime - task.start,
      time: now.date)
    kill("the background task '\(identifier)' was not completed (setTaskCompleted) within its time")
  }

  /// Plans what happens next in the background: the suspension, or the warnings and the kill.
  mutating func reschedule() {
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
  mutating func kill(_ reason: String) {
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
  mutating func expectAnswer(_ number: Int, _ name: String, within seconds: Double) {
    unanswered[number] = name
    effects.append(.schedule(.watchdog(number: number, name: name, within: seconds), deadline: now.uptime + seconds))
  }

  /// Sends `event` to a running app; a watched app's events but `willTerminate` carry the number
  /// its main thread answers with, and the watchdog waits for the answer.
  mutating func send(
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
  mutating func save() {
    if effects.last != .save { effects.append(.save) }
  }

  /// `value` seconds as a message says it.
  package static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : String(format: "%.3g s", value)
  }
}
