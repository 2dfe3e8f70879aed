import Foundation
import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSSystem

extension LaunchPlan.Kind {
  /// The requests the system makes of an app it launches for this (none for the user's launch):
  /// to the background, then the fetch, the events, the push or the task.
  var systemRequests: [AppRequest] {
    switch self {
    case .user: []
    case .fetch: [.background, .fetch]
    case .sessionEvents(let session): [.background, .sessionEvents(session: session)]
    case .push(let payload): [.background, .push(payload: payload)]
    // A message without a type is refused by the supervisor (a warning), as one not JSON.
    case .backgroundTask(let request): [.background, .bgTaskLaunch(.parse(request) ?? BackgroundTaskMessage())]
    }
  }
}

extension AppLaunch {
  /// Supervises the running app: the system's requests, the device's lock and unlock passed on,
  /// the schedule's steps, until the app ends; its exit status.
  func supervise() -> Int32 {
    for request in plan.kind.systemRequests {
      if let failure = supervisor.perform(request).error { launcher.report("warning: \(failure.message)") }
    }
    // Watching starts before the first scheduled step can lock the device.
    let events: AsyncStream<ProtectedDataEvent>?
    do {
      events = try launcher.device.protectedDataEvents()
    } catch {
      events = nil
      launcher.report("warning: the app is not told of the device's lock and unlock: \(launcher.describe(error))")
    }
    let watcher = Self.watch(events, supervisor)
    defer { watcher.cancel() }
    let start = DispatchTime.now()
    for step in plan.schedule.steps {
      if supervisor.waitForExit(until: start + step.offset) != nil { break }
      if let failure = perform(step.action) {
        launcher.report("warning: the scheduled \(step.action.rawValue) failed: \(failure)")
      }
    }
    let status = supervisor.waitForExit() ?? 1
    // As iOS's log says it: the exit status alone (137) does not tell a kill by the watchdog.
    if let crash = supervisor.lastCrash {
      launcher.report("protfs: \(plan.bundleID) \(TerminalText.escaped(crash.summary))")
    }
    return status
  }

  /// Passes the device's lock and unlock on to the app while it runs.
  private static func watch(_ events: AsyncStream<ProtectedDataEvent>?, _ supervisor: AppSupervisor)
    -> Task<Void, Never>
  {
    Task {
      guard let events else { return }
      for await event in events {
        supervisor.protectedData(available: event.event == .protectedDataDidBecomeAvailable)
      }
    }
  }

  /// Makes one scheduled change; returns why it failed instead of throwing, as the app keeps running.
  func perform(_ action: LockSchedule.Action) -> String? {
    let request: AppRequest
    switch action {
    case .background: request = .background
    case .foreground: request = .foreground
    case .fetch: request = .fetch
    case .terminate: request = .terminate(byUser: false)
    case .push: request = .push(payload: LockSchedule.Action.silentPushPayload)
    case .refresh, .process:
      request = .bgTaskLaunch(BackgroundTaskMessage(type: action == .refresh ? .refresh : .processing))
    case .lock, .inactive, .unlock, .reboot:
      do {
        try launcher.lockController.perform(action, passcode: launcher.passcode)
        return nil
      } catch {
        return launcher.describe(error)
      }
    }
    return supervisor.perform(request).error?.message
  }
}

extension LockController {
  /// Makes the device change a schedule's `action` asks for (lock, inactive, unlock, reboot);
  /// nothing for an app's action.
  func perform(_ action: LockSchedule.Action, passcode: String?) throws(ProtFSError) {
    switch action {
    case .lock: try lock()
    case .inactive: try lock(inactive: true)
    case .unlock: try unlock(passcode: passcode)
    case .reboot: try reboot()
    case .background, .foreground, .fetch, .terminate, .push, .refresh, .process: break
    }
  }
}
