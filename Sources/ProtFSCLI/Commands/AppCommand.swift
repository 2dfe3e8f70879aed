import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// `protfs app`: runs programs as iOS apps, with background time, suspension, fetch and termination.
package enum AppCommand {
  package static let command = Command(
    name: "app",
    abstract: "Run a program as an iOS app: background time, suspension, background fetch, termination.",
    discussion: """
      `protfs app launch` runs a program as an app, confined as `protfs exec` runs one, and
      supervises it until it ends. From any shell, background, foreground, fetch and terminate
      drive it, and status shows it. The app reads its events as JSON lines on the descriptor
      $PROTFS_APP_EVENTS_FD and calls back with begin-task, end-task, time-remaining,
      fetch-completed and events-handled, which find their app through $PROTFS_APP_SOCKET.
      $PROTFS_SESSIONS_SOCKET names the device's session service.
      """,
    subcommands: [
      AppLaunchCommand.command, AppPrewarmCommand.command, AppInstallCommand.command, AppUninstallCommand.command,
      AppControlCommands.background,
      AppControlCommands.foreground,
      AppControlCommands.fetch, AppControlCommands.push, AppControlCommands.terminate, AppStatusCommand.command,
      AppListCommand.command,
      AppContainerCommand.command,
      AppHelperCommands.beginTask, AppHelperCommands.endTask, AppHelperCommands.timeRemaining,
      AppHelperCommands.fetchCompleted, AppHelperCommands.pushCompleted, AppHelperCommands.eventsHandled,
      AppHelperCommands.setFetchInterval,
      AppBackgroundTaskCommands.refresh, AppBackgroundTaskCommands.process, AppBackgroundTaskCommands.expire,
      AppBackgroundTaskCommands.requests, AppBackgroundTaskCommands.register, AppBackgroundTaskCommands.submit,
      AppBackgroundTaskCommands.completed, AppBackgroundTaskCommands.cancel, AppBackgroundModeCommands.location,
      AppBackgroundModeCommands.audio, AppBackgroundModeCommands.locationUpdates,
    ]
  )

  /// `<bundle-id>`.
  package static let bundleArgument = Argument(name: "bundle-id", help: "The app's bundle id.")

  /// The bundle id of an app whose container exists.
  package static func existingApp(_ invocation: Invocation) throws -> BundleID {
    let bundleID = try invocation.bundleID(invocation.required(bundleArgument))
    let device = invocation.device
    try device.requireInitialized()
    try device.container(bundleID).requireExists()
    return bundleID
  }

  /// The message for an app without a supervisor.
  package static func notRunning(_ bundleID: BundleID) -> String { "The app \(bundleID) is not running." }

  /// Sends `request` to the supervisor of `bundleID`; a refusal becomes an error (exit 1).
  package static func send(_ request: AppRequest, to bundleID: BundleID, device: Device) throws -> AppReply {
    let reply: AppReply
    do throws(ProtFSError) {
      // The supervisor's socket is in the app's record while it runs (its name is not known in advance).
      guard let socket = try AppStore(device: device).supervisorSocket(bundleID) else {
        throw ProtFSError(.notFound, notRunning(bundleID))
      }
      reply = try AppClient.send(request, to: socket)
    } catch {
      if error.code == .notFound { throw ExitStatus(code: 1, message: notRunning(bundleID)) }
      throw error
    }
    if let refusal = reply.error { throw ExitStatus(code: 1, message: refusal.message) }
    return reply
  }
}
