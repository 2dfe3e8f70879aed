import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSSystem

/// `app launch`'s options made into a `LaunchPlan`: the command line's syntax ends here.
extension AppLaunchCommand {
  /// What a launch asks for: the installed app started detached, or a plan to run here.
  enum Request {
    /// `app launch BUNDLE-ID` without a command or `--wait`: the installed app's `command`, detached.
    case detached(BundleID, [String])
    /// A launch run here until the app ends.
    case plan(LaunchPlan)
  }

  /// What `invocation` asks for. Throws a usage error for options that do not go together.
  static func request(_ invocation: Invocation) throws -> Request {
    var plan = try optionsPlan(
      invocation, bundleID: invocation.bundleID(invocation.required(AppCommand.bundleArgument)),
      surroundings: .current(excluding: Secrets.environmentKeys))
    let systemLaunches = systemLaunchOptions.filter { invocation.isGiven($0) }.count
    if systemLaunches > 1 {
      throw invocation.usageError("--for-fetch, --for-session, --for-push and --for-bgtask cannot be given together.")
    }
    if plan.prewarm && (systemLaunches == 1 || invocation.flag(wait)) {
      throw invocation.usageError("--prewarm is for a user's launch: it cannot be given with --wait or a --for option.")
    }
    _ = try AppCommand.existingApp(invocation)
    var command = invocation.trailing
    if command.isEmpty {
      // The installed app (`app install`, or its last launch): detached unless --wait.
      command = try installedCommand(plan.bundleID, invocation)
      if !invocation.flag(wait) { return .detached(plan.bundleID, command) }
    }
    plan.kind = try kind(invocation)
    // The command as the record keeps it, its program found and made absolute.
    plan.command = try absoluteCommand(command)
    if plan.prewarm && ExecCommand.passcode.options.contains(where: { invocation.isGiven($0) }) {
      throw invocation.usageError(
        "A prewarmed app's launch cannot take a passcode: give it to the launch that takes the app.")
    }
    return .plan(plan)
  }

  /// The plan a prewarmed app's supervisor reads in another launch's `request`: nil when its words
  /// are not a user's `app launch` of an app of `device` (a `--for` launch, a passcode), or do not
  /// parse. Nothing is read or taken on the way (a push payload's file stays).
  static func plan(of request: LaunchRequest, on device: Device) -> LaunchPlan? {
    let variables = ProcessEnvironment.variables(request.surroundings.environment)
    guard
      case .run(let command, let invocation)? = try? Parser(root: Commands.root, environment: variables)
        .parse(request.words),
      command.name == AppLaunchCommand.command.name, invocation.commandPath.suffix(2) == ["app", "launch"],
      invocation.device.canonicalRoot == device.canonicalRoot,
      !(systemLaunchOptions + ExecCommand.passcode.options).contains(where: invocation.isGiven),
      let bundleID = try? invocation.bundleID(invocation.required(AppCommand.bundleArgument)),
      var plan = try? optionsPlan(invocation, bundleID: bundleID, surroundings: request.surroundings)
    else { return nil }
    var words = invocation.trailing
    if words.isEmpty {
      guard invocation.flag(wait), let installed = try? installedCommand(bundleID, invocation) else { return nil }
      words = installed
    }
    guard let absolute = try? absoluteCommand(words) else { return nil }
    plan.command = absolute
    return plan
  }

  /// A plan for app `bundleID` of `invocation`'s timings, schedule, environment, mount and
  /// Info.plist options, made in `surroundings`; the caller sets its command.
  private static func optionsPlan(_ invocation: Invocation, bundleID: BundleID, surroundings: LaunchPlan.Surroundings)
    throws -> LaunchPlan
  {
    var plan = LaunchPlan(bundleID: bundleID, command: [], surroundings: surroundings)
    plan.timings = try timings(invocation)
    if let text = invocation.value(ExecCommand.schedule) {
      do {
        plan.schedule = try LockSchedule(parsing: text)
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
    }
    plan.passedEnvironment = try ExecCommand.passedEnvironment(invocation)
    plan.prewarm = invocation.flag(prewarm)
    plan.servesMount = !invocation.flag(noMount)
    plan.infoPlist = invocation.value(infoPlist)
    return plan
  }

  /// The timings `invocation` gives, the defaults for the rest.
  private static func timings(_ invocation: Invocation) throws -> AppTimings {
    var timings = AppTimings()
    timings.backgroundTime = try duration(invocation, backgroundTime) ?? timings.backgroundTime
    timings.suspendAfter = try duration(invocation, suspendAfter) ?? timings.suspendAfter
    timings.fetchTime = try duration(invocation, fetchTime) ?? timings.fetchTime
    timings.fetchMinimum = try duration(invocation, fetchMinimum) ?? timings.fetchMinimum
    timings.watchdog = try duration(invocation, watchdog) ?? timings.watchdog
    if let text = invocation.value(pushLimit) {
      guard let count = Int(text), (1...1000).contains(count) else {
        throw invocation.usageError("The push limit '\(text)' is not a count between 1 and 1000 an hour.")
      }
      timings.pushLimit = count
    }
    timings.refreshTime = try duration(invocation, refreshTime) ?? timings.refreshTime
    timings.processingTime = try duration(invocation, processingTime) ?? timings.processingTime
    return timings
  }

  /// Who launches the app: the system when a `--for` option is given (a push's payload is taken
  /// from the file `app push` held it in), else the user.
  private static func kind(_ invocation: Invocation) throws -> LaunchPlan.Kind {
    if invocation.flag(forFetch) { return .fetch }
    if let session = invocation.value(forSession) { return .sessionEvents(session: session) }
    if let push = invocation.value(forPush) {
      return .push(payload: try PushPayloadFile.take(push, on: invocation.device))
    }
    if let request = invocation.value(forBackgroundTask) { return .backgroundTask(request: request) }
    return .user
  }

  /// The command app `bundleID` was installed (or last launched) with.
  private static func installedCommand(_ bundleID: BundleID, _ invocation: Invocation) throws -> [String] {
    guard let installed = try AppStore(device: invocation.device).record(bundleID)?.lastLaunchCommand,
      !installed.isEmpty
    else {
      throw ExitStatus(
        code: 1,
        message:
          "The app \(bundleID) is not installed: give its command (\(invocation.spelling.command("app launch \(bundleID) -- CMD"))) or install it (\(invocation.spelling.command("app install \(bundleID) -- CMD")))."
      )
    }
    return installed
  }

  /// The duration given with `option`, if it was.
  private static func duration(_ invocation: Invocation, _ option: Option) throws -> Double? {
    guard let text = invocation.value(option) else { return nil }
    do {
      return try AppTimings.duration(text, option: option.long)
    } catch {
      throw invocation.usageError(invocation.describe(error))
    }
  }
}
