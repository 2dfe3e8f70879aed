import ProtFSSystem

/// The session service's remedies: look at, start or restart the service, use a session from its
/// app, resume a task in the foreground.
extension Remedy.Action {
  /// Look at the device's background sessions and their service.
  package static let listSessions = Self("listSessions")
  /// Start the device's session service (as root).
  package static let startSessionService = Self("startSessionService")
  /// Stop the device's session service, then start it again.
  package static let restartSessionService = Self("restartSessionService")
  /// Use the session from its app (launched as an app), or as root.
  package static let useSessionFromItsApp = Self("useSessionFromItsApp")
  /// Resume task argument `id` in the foreground, where nothing else runs it.
  package static let resumeTask = Self("resumeTask")
}

extension Remedy {
  /// Look at the device's background sessions and their service.
  package static let listSessions = Remedy(
    .listSessions, advice: "look at the device's background sessions and their service")

  /// Start the device's session service (as root).
  package static let startSessionService = Remedy(
    .startSessionService, advice: "start the device's session service as root")

  /// Stop the device's session service, then start it again.
  package static let restartSessionService = Remedy(
    .restartSessionService, advice: "stop the device's session service and start it again")

  /// Use the session from its app (launched as an app), or as root.
  package static let useSessionFromItsApp = Remedy(
    .useSessionFromItsApp, advice: "run it as root, or from the app the session belongs to")

  /// Resume task `id` in the foreground, where nothing else runs it.
  package static func resumeTask(id: Int64) -> Remedy {
    Remedy(.resumeTask, ["id": .number(id)], advice: "resume task \(id) in the foreground")
  }
}
