import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSSystem

/// BGTaskScheduler from the shell: `protfs app refresh|process|expire|requests`, the system's side
/// (what Xcode's debugger commands `_simulateLaunchForTaskWithIdentifier` and
/// `_simulateExpirationForTaskWithIdentifier` do), and `bgtask-register|submit|completed|cancel`,
/// the app's side for a program not written in Swift (docs/semantics.md §8).
package enum AppBackgroundTaskCommands {
  package static let refresh = launch(.refresh, "refresh", "BGAppRefreshTask")
  package static let process = launch(.processing, "process", "BGProcessingTask")

  package static let expire = Command(
    name: "expire",
    abstract: "Expire a running background task now, as _simulateExpirationForTaskWithIdentifier does.",
    discussion: """
      The app gets bgTaskExpiration (its BGTask's expirationHandler runs) and must complete the task
      (setTaskCompleted, or bgtask-completed) within a fifth of its time, at most 5 s, or it is
      killed with a crash report.
      """,
    arguments: [AppCommand.bundleArgument, identifierArgument],
    run: runExpire)

  package static let requests = Command(
    name: "requests",
    abstract: "List the app's pending BGTaskScheduler requests (running or not).",
    discussion: """
      Each line names the request's identifier, its type (refresh or processing) and its earliest
      begin date. With --json: an array of objects with identifier, type, earliestBeginDate (an
      ISO 8601 date, or null), requiresNetworkConnectivity and requiresExternalPower (null for a
      refresh request).
      """,
    arguments: [AppCommand.bundleArgument],
    options: [CommonOptions.json],
    run: runRequests)

  package static let register = Command(
    name: "bgtask-register",
    abstract: "Register a BGTask's launch handler (inside an app, while it launches).",
    discussion: """
      BGTaskScheduler.register for a program not written in Swift: the identifier must be in the
      Info.plist's BGTaskSchedulerPermittedIdentifiers (`protfs app launch --info-plist`), and
      may be registered once. The launch then arrives as a bgTaskLaunch event.
      """,
    arguments: [identifierArgument],
    run: runRegister)

  package static let submit = Command(
    name: "bgtask-submit",
    abstract: "Submit a BGTaskScheduler request (inside an app).",
    discussion: """
      BGTaskScheduler.submit: --refresh (BGAppRefreshTaskRequest; fetch in UIBackgroundModes) or
      --processing (BGProcessingTaskRequest; processing in UIBackgroundModes), for an identifier
      in BGTaskSchedulerPermittedIdentifiers registered with bgtask-register. At most one refresh and ten processing requests are
      pending; a request of the same identifier replaces the last. It is run by `protfs app
      refresh` or `protfs app process` (or a scheduled refresh@ or process@ step), never before
      --earliest from now.
      """,
    arguments: [identifierArgument],
    options: [refreshFlag, processingFlag, earliest, requiresNetwork, requiresPower],
    run: runSubmit)

  package static let completed = Command(
    name: "bgtask-completed",
    abstract: "Complete a running BGTask: --success or --failure (inside an app).",
    discussion: """
      BGTask.setTaskCompleted(success:): call it when the work a bgTaskLaunch event started is done,
      or at once after its bgTaskExpiration, or the app is killed with a crash report.
      """,
    arguments: [identifierArgument],
    options: [success, failure],
    run: runCompleted)

  package static let cancel = Command(
    name: "bgtask-cancel",
    abstract: "Cancel a pending BGTaskScheduler request, or all of them with --all (inside an app).",
    arguments: [optionalIdentifier],
    options: [all],
    run: runCancel)

  /// `<identifier>`.
  static let identifierArgument = Argument(
    name: "identifier", help: "The task's identifier, as BGTaskSchedulerPermittedIdentifiers lists it.")
  /// `[<identifier>]`.
  static let optionalIdentifier = Argument(
    name: "identifier", help: "The task's identifier (default: the first pending request due).", arity: .optional)
  /// `--now`.
  static let now = Option.flag("now", help: "Run the request even before its earliest begin date.")
  /// `--refresh`.
  static let refreshFlag = Option.flag("refresh", help: "A BGAppRefreshTaskRequest (about 30 s).")
  /// `--processing`.
  static let processingFlag = Option.flag("processing", help: "A BGProcessingTaskRequest (minutes).")
  /// `--earliest DURATION`.
  static let earliest = Option.value(
    "earliest", "duration", help: "The earliest begin date, this long from now (such as 15m; default: none).")
  /// `--requires-network`.
  static let requiresNetwork = Option.flag(
    "requires-network", help: "A processing request's requiresNetworkConnectivity.")
  /// `--requires-power`.
  static let requiresPower = Option.flag("requires-power", help: "A processing request's requiresExternalPower.")
  /// `--success`.
  static let success = Option.flag("success", help: "The task succeeded.")
  /// `--failure`.
  static let failure = Option.flag("failure", help: "The task failed (or stopped at its expiration).")
  /// `--all`.
  static let all = Option.flag("all", help: "Cancel every pending request (cancelAllTaskRequests).")

  private static func launch(_ type: BackgroundTaskRequest.Kind, _ name: String, _ task: String) -> Command {
    Command(
      name: name,
      abstract: "Run the app's pending \(type.rawValue) request (a \(task)), as Xcode's debugger command does.",
      discussion: """
        Runs the pending \(type.rawValue) request named by IDENTIFIER (default: the first one due),
        never before its earliest begin date unless --now, as _simulateLaunchForTaskWithIdentifier
        does: a running app (suspended or not) gets bgTaskLaunch with the request's identifier and
        its launch handler runs; an app that is not running is launched in the background with
        the command it was last launched with (not one the user force-quit). The app must complete
        the task within its time (--\(type == .refresh ? "refresh" : "processing")-time of app launch,
        default \(type == .refresh ? "30s" : "3m")); bgTaskExpiration comes a fifth of it (at most 5 s)
        before the end, and an app that has not completed it then is killed with a crash report.
        """,
      arguments: [AppCommand.bundleArgument, optionalIdentifier],
      options: [now],
      run: { invocation in try runLaunch(invocation, type) })
  }

  static func runLaunch(_ invocation: Invocation, _ type: BackgroundTaskRequest.Kind) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    let message = BackgroundTaskMessage(
      identifier: invocation.argument(optionalIdentifier), type: type, now: invocation.flag(now) ? true : nil)
    do {
      let reply = try AppCommand.send(.bgTaskLaunch(message), to: bundleID, device: device)
      Console.out("Launched the \(type.rawValue) task '\(reply.value ?? "")' of \(bundleID).")
      return 0
    } catch let status as ExitStatus where status.message == AppCommand.notRunning(bundleID) {
      // Checked here first, so that an app is not launched for a request it cannot run.
      let pending = (try AppStore(device: device).record(bundleID))?.taskRequests ?? []
      if case .failure(let reason) = BackgroundTaskRequest.choose(
        from: pending, for: message, type: type, at: Date(), app: bundleID.rawValue)
      {
        throw ExitStatus(code: 1, message: reason.message)
      }
      try AppControlCommands.launchInBackground(
        bundleID, device: device, for: .backgroundTask(message: message.json), purpose: "its \(type.rawValue) task")
      return 0
    }
  }

  static func runExpire(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    _ = try AppCommand.send(
      .bgTaskExpire(identifier: invocation.required(identifierArgument)), to: bundleID, device: invocation.device)
    return 0
  }

  /// One request, as `--json` prints it: every key, absent values as null.
  struct Entry: Encodable {
    var request: BackgroundTaskRequest

    func encode(to encoder: Encoder) throws {
      var keys = encoder.container(keyedBy: CodingKeys.self)
      try keys.encode(request.identifier, forKey: .identifier)
      try keys.encode(request.type, forKey: .type)
      // A date as every --json date is written (JSONOutput).
      try keys.encode(request.earliestBeginDate, forKey: .earliestBeginDate)
      try keys.encode(request.requiresNetworkConnectivity, forKey: .requiresNetworkConnectivity)
      try keys.encode(request.requiresExternalPower, forKey: .requiresExternalPower)
    }

    enum CodingKeys: String, CodingKey {
      case identifier, type, earliestBeginDate, requiresNetworkConnectivity, requiresExternalPower
    }
  }

  static func runRequests(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let pending = (try AppStore(device: invocation.device).record(bundleID))?.taskRequests ?? []
    if invocation.flag(CommonOptions.json) {
      try Console.json(pending.map(Entry.init))
      return 0
    }
    if pending.isEmpty { Console.out("The app \(bundleID) has no pending task requests.") }
    for request in pending {
      var parts = [request.identifier, request.type.rawValue]
      parts.append(request.earliestBeginDate.map { "not before " + AppStore.timestamp($0) } ?? "any time")
      if request.requiresNetworkConnectivity == true { parts.append("requires network") }
      if request.requiresExternalPower == true { parts.append("requires external power") }
      Console.out(parts.joined(separator: "  "))
    }
    return 0
  }

  static func runRegister(_ invocation: Invocation) throws -> Int32 {
    _ = try AppHelperCommands.send(invocation, .bgTaskRegister(identifier: invocation.required(identifierArgument)))
    return 0
  }

  static func runSubmit(_ invocation: Invocation) throws -> Int32 {
    let identifier = invocation.required(identifierArgument)
    guard invocation.flag(refreshFlag) != invocation.flag(processingFlag) else {
      throw invocation.usageError("Give one of --refresh and --processing.")
    }
    let type: BackgroundTaskRequest.Kind = invocation.flag(refreshFlag) ? .refresh : .processing
    if type == .refresh, invocation.flag(requiresNetwork) || invocation.flag(requiresPower) {
      throw invocation.usageError("--requires-network and --requires-power apply to --processing requests only.")
    }
    var earliestDate: Date?
    if let text = invocation.value(earliest) {
      do {
        earliestDate = Date().addingTimeInterval(try AppTimings.duration(text, option: earliest.long))
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
    }
    guard BackgroundTaskRequest.isValidIdentifier(identifier) else {
      throw invocation.usageError(
        "'\(identifier)' is not a task identifier: give 1 to \(BackgroundTaskRequest.identifierLimit) characters without spaces."
      )
    }
    let message = BackgroundTaskMessage(
      identifier: identifier, type: type, earliestBeginDate: earliestDate,
      requiresNetworkConnectivity: type == .processing ? invocation.flag(requiresNetwork) : nil,
      requiresExternalPower: type == .processing ? invocation.flag(requiresPower) : nil)
    _ = try AppHelperCommands.send(invocation, .bgTaskSubmit(message))
    return 0
  }

  static func runCompleted(_ invocation: Invocation) throws -> Int32 {
    guard invocation.flag(success) != invocation.flag(failure) else {
      throw invocation.usageError("Give one of --success and --failure.")
    }
    _ = try AppHelperCommands.send(
      invocation,
      .bgTaskCompleted(identifier: invocation.required(identifierArgument), success: invocation.flag(success)))
    return 0
  }

  static func runCancel(_ invocation: Invocation) throws -> Int32 {
    let identifier = invocation.argument(optionalIdentifier)
    guard (identifier == nil) == invocation.flag(all) else {
      throw invocation.usageError("Give the identifier of the request to cancel, or --all.")
    }
    _ = try AppHelperCommands.send(invocation, .bgTaskCancel(identifier: identifier))
    return 0
  }
}
