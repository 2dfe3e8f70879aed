import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// How the system reaches apps (docs/semantics.md §9): for the session service, a running app's
/// supervisor is sent `sessionEvents`; an app not running is launched in the background with the
/// command it was last launched with (`launchInBackground`, as `protfs app fetch`, `push` and
/// `bgtask launch` launch one), and gets the event after didEnterBackground. Supervisors started
/// detached, and their wait, are in AppSessionLauncher+Supervisor.swift.
package struct AppSessionLauncher: SessionAppLauncher {
  /// The device the apps run on.
  package let device: Device
  /// The protfs program that launches them (this process's own by default).
  package let program: String
  /// How long a launch may take to show its supervisor before it counts as failed, in seconds.
  package let launchTimeout: Double

  /// A launcher for the apps of `device`.
  package init(device: Device, program: String = "/proc/self/exe", launchTimeout: Double = 10) {
    self.device = device
    self.program = program
    self.launchTimeout = launchTimeout
  }

  /// Posts session `session`'s events to app `bundleID`: to its supervisor when it runs, else by
  /// launching it in the background with its last command; throws when it cannot.
  package func deliverEvents(of session: String, to bundleID: String) throws(ProtFSError) {
    let app = try BundleID(bundleID)
    let reply: AppReply?
    do throws(ProtFSError) {
      guard let socket = try AppStore(device: device).supervisorSocket(app) else {
        throw ProtFSError(.notFound, "The app \(bundleID) is not running.")
      }
      reply = try AppClient.send(.sessionEvents(session: session), to: socket)
    } catch  where error.code == .notFound {
      reply = nil
    }
    if let reply {
      if let refusal = reply.error { throw ProtFSError(.io, refusal.message) }
      return
    }
    let reason = BackgroundLaunchReason.sessionEvents(session: session)
    let record = try launchableRecord(app, for: reason)
    let command = record.lastLaunchCommand
    guard ExecutableLookup.path(of: command[0]) != nil else {
      throw ProtFSError(
        .notFound,
        "The app \(bundleID) cannot be launched for the events of \(session): '\(command[0])', the command it was last launched with, is not an executable file.",
        path: command[0])
    }
    let before: AppRecord? = (try? AppStore(device: device).record(app)) ?? nil
    let pid = try start(app, record, for: reason)
    switch waitForSupervisor(pid, app: app, within: launchTimeout, ready: { $0.state != .notRunning }) {
    case .ready: return
    // A launch that ran the app ended with the app's status, and its record changed.
    case .ended(let code) where code == 0 || ((try? AppStore(device: device).record(app)) ?? nil) != before:
      return
    case .ended(let code):
      throw ProtFSError(
        .io,
        "The launch of the app \(app) for the events of \(session) failed: `protfs app launch` ended with status \(code)."
      )
    case .timedOut:
      throw ProtFSError(
        .io,
        "The launch of the app \(app) for the events of \(session) did not start its supervisor within \(Int(launchTimeout)) s."
      )
    }
  }

  /// Launches app `app`, which is not running, in the background as the system does (with the
  /// command and background budget of its last launch, and the options that say it is for
  /// `reason`), detached; returns the launch's pid (its supervisor's) at once. Refused for an app
  /// never launched, or force-quit by the user.
  package func launchInBackground(_ app: BundleID, for reason: BackgroundLaunchReason) throws(ProtFSError) -> pid_t {
    try start(app, launchableRecord(app, for: reason), for: reason)
  }

  /// The record of app `app`, which may be launched in the background for `reason`: one launched
  /// before and not force-quit by the user.
  private func launchableRecord(_ app: BundleID, for reason: BackgroundLaunchReason) throws(ProtFSError) -> AppRecord {
    guard let record = try AppStore(device: device).record(app), !record.lastLaunchCommand.isEmpty else {
      throw ProtFSError(.notFound, reason.neverLaunched(app))
    }
    guard !record.forceQuit else { throw ProtFSError(.permissionDenied, reason.forceQuit(app)) }
    return record
  }

  /// Starts `protfs app launch` of app `app` for `reason` with the command and budget `record`
  /// keeps, detached: its pid.
  private func start(_ app: BundleID, _ record: AppRecord, for reason: BackgroundLaunchReason) throws(ProtFSError)
    -> pid_t
  {
    try DetachedLaunch.start(
      program: program,
      ["--device", device.root, "app", "launch", app.rawValue] + reason.options
        + ["--background-time", "\(Int((record.backgroundTime * 1000).rounded()))ms", "--"] + record.lastLaunchCommand)
  }

  /// Whether the user force-quit app `bundleID` (its record says so).
  package func isForceQuit(_ bundleID: String) -> Bool {
    guard let app = try? BundleID(bundleID), let record = try? AppStore(device: device).record(app) else {
      return false
    }
    return record.forceQuit
  }

  /// Whether app `bundleID` is suspended by a supervisor that still runs (its record says so).
  package func isSuspended(_ bundleID: String) -> Bool {
    guard let app = try? BundleID(bundleID), let record = try? AppStore(device: device).record(app) else {
      return false
    }
    return record.state == .suspended && record.supervisor?.isAlive == true
  }
}
