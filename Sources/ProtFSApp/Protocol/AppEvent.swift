import Foundation

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
