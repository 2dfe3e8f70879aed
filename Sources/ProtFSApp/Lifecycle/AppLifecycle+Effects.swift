import Foundation
import ProtFS

/// What goes in and out of an app's lifecycle: the moments changes happen at, the effects they
/// have, the event lines the app reads and the timers the lifecycle plans.
extension AppLifecycle {
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
}
