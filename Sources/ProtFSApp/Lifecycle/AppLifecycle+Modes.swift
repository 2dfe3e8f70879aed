import Foundation
import ProtFS

/// The background modes that keep an app running (audio, location) and the fetches the system
/// schedules.
extension AppLifecycle {
  /// Whether a background mode keeps the app running in the background: audio playing with
  /// `audio` declared, or background location updates with `location` declared.
  var keptRunning: Bool {
    (playingAudio && backgroundModes.contains("audio"))
      || (locationUpdates == .background && backgroundModes.contains("location"))
  }

  /// The app plays audio or stopped. The reply says when its Info.plist does not declare the mode
  /// that would keep it running.
  mutating func setAudio(_ playing: Bool) -> AppReply {
    playingAudio = playing
    reschedule()
    return .ok(
      playingAudio && !backgroundModes.contains("audio")
        ? "the app's Info.plist does not list audio in UIBackgroundModes: it is suspended in the background as any app"
        : nil)
  }

  /// The app updates its location in the foreground or the background, or stopped.
  mutating func setLocationUpdates(_ updates: AppRequest.LocationUpdates) -> AppReply {
    locationUpdates = updates == .stop ? nil : updates
    reschedule()
    return .ok(
      locationUpdates == .background && !backgroundModes.contains("location")
        ? "the app's Info.plist does not list location in UIBackgroundModes: it is suspended in the background as any app"
        : nil)
  }

  /// The device is at `coordinate`: an app updating its location and not suspended gets it; the
  /// reply says "not updating" or "suspended" when it does not.
  mutating func deliverLocation(_ coordinate: Coordinate) -> AppReply {
    guard locationUpdates != nil else { return .ok("not updating") }
    guard record.state != .suspended else { return .ok("suspended") }
    send(.didUpdateLocations, coordinate: coordinate)
    return .ok()
  }

  /// Records the app's minimum fetch interval (nil: never) and plans the fetches it allows.
  mutating func setFetchInterval(_ seconds: Double?) -> AppReply {
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
  mutating func planFetch() {
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
}
