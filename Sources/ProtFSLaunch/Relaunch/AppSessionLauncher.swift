import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// How the session service reaches apps (docs/semantics.md §9): a running app's supervisor is sent
/// `sessionEvents`; an app not running is launched in the background with the command it was last
/// launched with, as `protfs app fetch` launches one, and gets the event after didEnterBackground.
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
    guard let record = try AppStore(device: device).record(app), !record.lastLaunchCommand.isEmpty else {
      throw ProtFSError(
        .notFound,
        "The app \(bundleID) is not running and was never launched, so it cannot get the events of \(session).")
    }
    guard !record.forceQuit else {
      throw ProtFSError(
        .permissionDenied,
        "The app \(bundleID) is not running: the user force-quit it, so it is not launched for the events of \(session)."
      )
    }
    let command = record.lastLaunchCommand
    guard ExecutableLookup.path(of: command[0]) != nil else {
      throw ProtFSError(
        .notFound,
        "The app \(bundleID) cannot be launched for the events of \(session): '\(command[0])', the command it was last launched with, is not an executable file.",
        path: command[0])
    }
    let before = try? AppStore(device: device).record(app)
    let pid = try DetachedLaunch.start(
      program: program,
      [
        "--device", device.root, "app", "launch", bundleID, "--for-session", session, "--background-time",
        "\(Int((record.backgroundTime * 1000).rounded()))ms", "--",
      ] + command)
    try waitForSupervisor(pid, app: app, session: session, before: before ?? nil)
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

  /// Waits until the launched supervisor `pid` runs the app (its record names it) or ends; a launch
  /// that ends before the app ran (the record is still `before`) with a failure, or shows nothing
  /// within `launchTimeout`, is thrown. The launch is this process's child: it is reaped whatever
  /// happens.
  private func waitForSupervisor(_ pid: pid_t, app: BundleID, session: String, before: AppRecord?)
    throws(ProtFSError)
  {
    let deadline = DispatchTime.now() + launchTimeout
    let store = AppStore(device: device)
    var delay: useconds_t = 2_000
    while true {
      if case .success(let code?) = Kernel.reapChildIfEnded(pid) {
        // A launch that ran the app ended with the app's status, and its record changed.
        if code == 0 || (try? store.record(app)) ?? nil != before { return }
        throw ProtFSError(
          .io,
          "The launch of the app \(app) for the events of \(session) failed: `protfs app launch` ended with status \(code)."
        )
      }
      if let record = try? store.record(app), record.supervisorPID == pid, record.state != .notRunning {
        reap(pid)
        return
      }
      guard DispatchTime.now() < deadline else {
        reap(pid)
        throw ProtFSError(
          .io,
          "The launch of the app \(app) for the events of \(session) did not start its supervisor within \(Int(launchTimeout)) s."
        )
      }
      Kernel.usleep(delay)
      delay = min(delay * 2, 50_000)
    }
  }

  /// Reaps the launch `pid` whenever it ends, on a thread of its own.
  private func reap(_ pid: pid_t) {
    Thread { _ = Kernel.waitForChild(pid) }.start()
  }
}
