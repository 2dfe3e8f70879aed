import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// The commands an app calls back with: they find their supervisor through $PROTFS_APP_SOCKET.
package enum AppHelperCommands {
  package static let beginTask = Command(
    name: "begin-task", abstract: "Begin a background task (inside an app); prints its id.",
    arguments: [taskName], run: runBeginTask)
  package static let endTask = Command(
    name: "end-task", abstract: "End a background task (inside an app).", arguments: [taskID], run: runEndTask)
  package static let timeRemaining = Command(
    name: "time-remaining",
    abstract: "Print the app's background time left in seconds, inf in the foreground (inside an app).",
    run: runTimeRemaining)
  package static let fetchCompleted = Command(
    name: "fetch-completed",
    abstract: "Report the result of a background fetch: newData, noData or failed (inside an app).",
    arguments: [result], run: runFetchCompleted)

  package static let pushCompleted = Command(
    name: "push-completed",
    abstract: "Report the result of handling a remote notification: newData, noData or failed (inside an app).",
    discussion: """
      The completion handler of didReceiveRemoteNotification: call it once the notification the
      didReceiveRemoteNotification event carried (as userInfo) is handled, within the background
      time (30 s), or the app is killed with a crash report.
      """,
    arguments: [result], run: runPushCompleted)

  package static let eventsHandled = Command(
    name: "events-handled",
    abstract: "Report that a background session's events were handled (inside an app).",
    discussion: """
      The completion handler of handleEventsForBackgroundURLSession: call it with the session's
      identifier once the session's events (protfs tasks events --session ID) are taken. It ends
      the background time the app was woken with.
      """,
    arguments: [session], run: runEventsHandled)

  package static let setFetchInterval = Command(
    name: "set-fetch-interval",
    abstract: "Ask for background fetches no more often than every SECONDS, or never (inside an app).",
    discussion: """
      setMinimumBackgroundFetchInterval for a program that is not written in Swift: 0 asks for the
      minimum the system allows, never (the default) for none. The system fetches only for an app
      whose Info.plist lists fetch in UIBackgroundModes (`protfs app launch --info-plist`).
      """,
    arguments: [interval], run: runSetFetchInterval)

  /// `<seconds>`.
  static let interval = Argument(name: "seconds", help: "The interval in seconds, or never.")
  /// `<session-id>`.
  static let session = Argument(
    name: "session-id", help: "The session's identifier, as the handleEventsForBackgroundURLSession event gave it.")
  /// `[<name>]`.
  static let taskName = Argument(
    name: "name", help: "The task's name, shown in status and crash reports (default: Called by CALLER).",
    arity: .optional)
  /// `<id>`.
  static let taskID = Argument(name: "id", help: "The id begin-task printed.")
  /// `<result>`.
  static let result = Argument(name: "result", help: "newData, noData or failed.")

  static func runBeginTask(_ invocation: Invocation) throws -> Int32 {
    Console.out(try send(invocation, .beginTask(name: invocation.argument(taskName) ?? callerName())) ?? "")
    return 0
  }

  /// The name iOS gives a task begun without one, after its caller: `Called by NAME`, NAME the
  /// program that ran this command (the app's script), as the kernel names it.
  static func callerName() -> String {
    guard case .success(let bytes) = Kernel.readNamedFile("/proc/\(Kernel.getppid())/comm", limit: 64) else {
      return "Called by an unknown caller"
    }
    let name = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return "Called by \(name.isEmpty ? "an unknown caller" : name)"
  }

  static func runEndTask(_ invocation: Invocation) throws -> Int32 {
    let text = invocation.required(taskID)
    guard let id = Int(text) else {
      let app = invocation.environment[AppEnvironment.bundle] ?? "the app"
      throw ExitStatus(code: 1, message: "'\(text)' is not an open background task of \(app).")
    }
    _ = try send(invocation, .endTask(id: id))
    return 0
  }

  static func runTimeRemaining(_ invocation: Invocation) throws -> Int32 {
    Console.out(try send(invocation, .timeRemaining) ?? "")
    return 0
  }

  static func runPushCompleted(_ invocation: Invocation) throws -> Int32 {
    try reportCompletion(invocation, AppRequest.pushCompleted, "a result")
  }

  static func runFetchCompleted(_ invocation: Invocation) throws -> Int32 {
    try reportCompletion(invocation, AppRequest.fetchCompleted, "a fetch result")
  }

  /// Sends `kind` with the invocation's result (`what` names it in the usage error).
  private static func reportCompletion(
    _ invocation: Invocation, _ request: (AppRequest.CompletionResult) -> AppRequest, _ what: String
  ) throws -> Int32 {
    let value = invocation.required(result)
    guard let completion = AppRequest.CompletionResult(rawValue: value) else {
      throw invocation.usageError("'\(value)' is not \(what): give newData, noData or failed.")
    }
    _ = try send(invocation, request(completion))
    return 0
  }

  static func runSetFetchInterval(_ invocation: Invocation) throws -> Int32 {
    let value = invocation.required(interval)
    let seconds: Double?
    do {
      seconds = try AppRequest.fetchInterval(value)
    } catch {
      throw invocation.usageError(error.message)
    }
    try sendWarning(invocation, .setFetchInterval(seconds: seconds))
    return 0
  }

  static func runEventsHandled(_ invocation: Invocation) throws -> Int32 {
    _ = try send(invocation, .eventsHandled(session: invocation.required(session)))
    return 0
  }

  /// Sends `request`, whose reply's value, if any, is a warning for the app (a background mode its
  /// Info.plist does not declare): printed on standard error.
  static func sendWarning(_ invocation: Invocation, _ request: AppRequest) throws {
    if let warning = try send(invocation, request) { Console.err("Warning: \(warning).") }
  }

  /// Sends `request` to the app's supervisor named by the environment; returns the reply's value.
  static func send(_ invocation: Invocation, _ request: AppRequest) throws -> String? {
    guard let socket = invocation.environment[AppEnvironment.socket], socket.hasPrefix("@"), socket.count > 1 else {
      let name = invocation.commandPath.joined(separator: " ")
      throw ExitStatus(
        code: 1,
        message: "\(name) works only inside an app that protfs app launch runs ($\(AppEnvironment.socket) is not set).")
    }
    let reply: AppReply
    do {
      reply = try AppClient.send(request, to: String(socket.dropFirst()))
    } catch {
      if error.code == .notFound {
        throw ExitStatus(code: 1, message: "The app's supervisor at '\(socket)' is not running.")
      }
      throw error
    }
    if let refusal = reply.error { throw ExitStatus(code: 1, message: refusal.message) }
    return reply.value
  }
}
