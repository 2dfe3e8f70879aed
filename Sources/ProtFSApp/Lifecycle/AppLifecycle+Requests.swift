import Foundation
import ProtFS

/// The requests an app's lifecycle carries out: foreground and background, fetches, pushes,
/// background tasks, termination and sessions' events.
extension AppLifecycle {
  mutating func handle(_ request: AppRequest) -> AppReply {
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

  mutating func enterBackground() -> AppReply {
    guard record.state == .active else { return .refused("The app \(bundleID) is already in the background.") }
    record.state = .background
    startBackgroundTime()
    send(.didEnterBackground)
    reschedule()
    return .ok()
  }

  mutating func enterForeground() -> AppReply {
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
  mutating func startBackgroundTime() {
    record.backgroundSince = now.date
    backgroundStart = now.uptime
    warned = []
  }

  /// A suspended app is resumed in the background, with its background time from now, as iOS
  /// wakes an app for a fetch or a session's events.
  mutating func wakeIfSuspended() {
    guard record.state == .suspended else { return }
    effects.append(.resume)
    record.state = .background
    startBackgroundTime()
  }

  mutating func startFetch() -> AppReply {
    guard fetchStart == nil else { return .refused("A fetch of \(bundleID) is already under way.") }
    wakeIfSuspended()
    fetchStart = now.uptime
    fetchGeneration += 1
    send(.performFetch)
    effects.append(.schedule(.fetchTimeout(fetch: fetchGeneration), deadline: now.uptime + timings.fetchTime))
    reschedule()
    return .ok()
  }

  mutating func completeFetch(_ result: AppRequest.CompletionResult) -> AppReply {
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
  mutating func startPush(_ payload: String) -> AppReply {
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

  mutating func completePush() -> AppReply {
    guard pushStart != nil else { return .refused("No remote notification to \(bundleID) waits for its completion.") }
    pushStart = nil
    pushGeneration += 1
    reschedule()
    return .ok()
  }

  /// The most background tasks an app may hold open at once: each is kept in the app's record,
  /// which every command reads, so an app that begins them without end is refused (UIKit's
  /// `beginBackgroundTask` gives `.invalid`) rather than growing it past what can be read.
  public static let maximumOpenTasks = 1000
  /// The longest task name kept, in bytes; a longer one is cut there (names are for people).
  public static let maximumTaskName = 256

  mutating func beginTask(_ name: String) -> AppReply {
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

  mutating func endTask(_ id: Int) -> AppReply {
    guard let index = record.tasks.firstIndex(where: { $0.id == id }) else {
      return .refused("'\(id)' is not an open background task of \(bundleID).")
    }
    record.tasks.remove(at: index)
    reschedule()
    return .ok()
  }

  mutating func terminate(user: Bool) -> AppReply {
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
  mutating func postSessionEvents(_ session: String) -> AppReply {
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
  mutating func endSessionEvents(_ session: String) -> AppReply {
    guard postedSessions.remove(session) != nil else {
      return .refused(
        "No handleEventsForBackgroundURLSession for the session '\(session)' waits for an answer from the app \(bundleID)."
      )
    }
    sessionWaits[session] = nil
    reschedule()
    return .ok()
  }
}
