import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSLock
import ProtFSSystem

/// `protfs app launch BUNDLE-ID -- CMD`: runs CMD as the app, in the foreground, and supervises it
/// until it ends (docs/semantics.md §8).
package enum AppLaunchCommand {
  package static let command = Command(
    name: "launch",
    abstract: "Run a program as the app, in the foreground, until it ends; or start the installed app (simctl launch).",
    discussion: """
      Without CMD, the app installed with `protfs app install` (or launched before) is started
      detached from this shell, as `simctl launch` starts one: the command returns once the app
      runs, printing BUNDLE-ID: PID; its output goes to the device's .protfs/logs/BUNDLE-ID.log.
      With --wait it runs here until it ends, as with CMD.

      CMD runs confined exactly as under `protfs exec`, through a mount of the device served for it
      while it runs (or the device's mount when one is active), so that the class decides every
      open, create and write as on a phone, refusals being "Operation not permitted" (EPERM).
      Where FUSE is not there (or with --no-mount) it runs under permission modes alone, with a
      warning: refusals are then "Permission denied". As iOS's sandbox keeps an app, it sees its
      own container alone of the device's Containers/ and its own bundle alone of Bundles/, and its
      processes reach no other app's (through /proc or a signal), though every app runs as the app
      user. It runs in a session of its own (on a pseudo-terminal protfs relays when the launch
      has a terminal), with an environment built for it as iOS builds an app's, never the
      caller's: HOME, CFFIXED_USER_HOME and TMPDIR in its container, PATH
      /usr/local/bin:/usr/bin:/bin and protfs's own directory, the caller's LANG, $PROTFS_APP_EVENTS_FD (its events, one
      JSON object a line), $PROTFS_APP_SOCKET and $PROTFS_APP_BUNDLE, and only what the caller
      passes on purpose: each $PROTFS_CHILD_NAME as NAME (as simctl's SIMCTL_CHILD_), and each
      --env NAME=VALUE; neither replaces the app's own variables. In the background it runs for
      --suspend-after without tasks, then is frozen with every process it started (its cgroup, or
      SIGSTOP to its process group where there is no cgroup v2) until it returns to the foreground;
      with tasks, for --background-time, with a backgroundTaskWillExpire event per task a fifth of
      the budget (at most 5 s) before the end; tasks still open at the end get it killed (exit 137)
      with a crash report in the device's .protfs/crash-reports/. A fetch must complete within
      --fetch-time. --schedule takes exec's steps and background, foreground, fetch, terminate,
      push (a silent remote notification), refresh and process (the first BGTaskScheduler request
      of the kind that is due), for example background@1s,foreground@5s,push@6s. A BGTask has
      --refresh-time or --processing-time to be completed.
      --for-session ID launches it in the background (as
      the session service does) and posts handleEventsForBackgroundURLSession for session ID, which
      the app answers with events-handled within --background-time. $PROTFS_SESSIONS_SOCKET names
      the device's session service. The exit status is CMD's (128+N when a signal N
      ended it, so 137 when the system killed it).

      A Swift app (ProtFSKit) is watched as iOS's watchdog watches apps: its main thread must return
      from didFinishLaunchingWithOptions within twice --watchdog and from every later event within
      --watchdog, or the app is killed (exit 137) with a crash report; it is not suspended while
      its main thread has not returned.

      The system fetches by itself only for an app that asked: an interval set with
      setMinimumBackgroundFetchInterval (or `protfs app set-fetch-interval`) and fetch in its
      Info.plist's UIBackgroundModes; then while it is in the background or suspended, no more
      often than the interval or --fetch-minimum. `protfs app fetch` forces one, as Xcode does.

      A Swift CMD runs from the app's bundle on the device, Bundles/BUNDLE-ID.app/ (a hard link to
      CMD, or a copy across file systems, made at every launch), beside its Info.plist: --info-plist's,
      or the one installed by an earlier launch, with CFBundleIdentifier set to BUNDLE-ID. So
      Foundation's Bundle.main is the app's bundle. Its home directory, $TMPDIR and the search paths
      lead into its container.
      """,
    arguments: [AppCommand.bundleArgument],
    options: [
      backgroundTime, suspendAfter, fetchTime, fetchMinimum, refreshTime, processingTime, watchdog, infoPlist,
      noMount, ExecCommand.schedule, ExecCommand.environment, pushLimit, forFetch, forSession, forPush,
      forBackgroundTask, wait, prewarm,
    ]
      + ExecCommand.passcode.options,
    takesTrailingCommand: true,
    trailingCommandIsOptional: true,
    run: run
  )

  /// The options with which the system launches the app in the background (a fetch, a session's
  /// events, a push, a BGTask), not the user: at most one at a time.
  package static var systemLaunchOptions: [Option] { [forFetch, forSession, forPush, forBackgroundTask] }

  /// `--for-fetch` (hidden in effect: `app fetch` gives it): the system launches the app in the
  /// background for a fetch; not a user launch, so a force-quit stays remembered.
  package static let forFetch = Option.flag(
    "for-fetch", help: "Launch in the background for a fetch, as `protfs app fetch` does for an app not running.")
  /// `--for-session SESSION-ID` (the session service gives it): the system launches the app in the
  /// background for session events; not a user launch, so a force-quit stays remembered.
  package static let forSession = Option.value(
    "for-session", "session-id",
    help: "Launch in the background and post the events of this background session, as the session service does.")
  /// `--for-push PAYLOAD` (`app push` gives it): the system launches the app in the background for
  /// a silent remote notification; not a user launch, so a force-quit stays remembered.
  package static let forPush = Option.value(
    "for-push", "payload",
    help:
      "Launch in the background and deliver this remote notification, as `protfs app push` does for an app not running."
  )
  /// `--for-bgtask MESSAGE` (`app refresh` and `app process` give it): the system launches the app
  /// in the background to run a BGTaskScheduler request; not a user launch.
  package static let forBackgroundTask = Option.value(
    "for-bgtask", "request",
    help:
      "Launch in the background and run this BGTaskScheduler request, as `protfs app refresh` does for an app not running."
  )
  /// `--prewarm` (`app prewarm` gives it): start the app and hold it before UIApplicationMain until
  /// a launch takes it (`PrewarmedLaunch`).
  package static let prewarm = Option.flag(
    "prewarm",
    help: "Start the app and hold it before UIApplicationMain for a later launch, as `protfs app prewarm` does.")
  /// `--push-limit COUNT`.
  package static let pushLimit = Option.value(
    "push-limit", "count",
    help: "Throttle silent pushes as iOS does: at most COUNT an hour, one over it held (default: no throttle).")
  /// `--wait`.
  package static let wait = Option.flag(
    "wait", help: "Without CMD: run the installed app here until it ends, as with CMD, instead of detached.")
  /// `--refresh-time DURATION`.
  package static let refreshTime = Option.value(
    "refresh-time", "duration", help: "Time a BGAppRefreshTask may run (default 30s).")
  /// `--processing-time DURATION`.
  package static let processingTime = Option.value(
    "processing-time", "duration", help: "Time a BGProcessingTask may run (default 3m).")
  /// `--no-mount`.
  package static let noMount = Option.flag(
    "no-mount",
    help: "Run without a mount of the app's own: permission modes alone (refusals are EACCES, not EPERM).")
  /// `--watchdog DURATION`.
  package static let watchdog = Option.value(
    "watchdog", "duration",
    help: "How long a Swift app's main thread may take to answer an event, twice that its launch (default 10s).")
  /// `--fetch-minimum DURATION`.
  package static let fetchMinimum = Option.value(
    "fetch-minimum", "duration",
    help: "The shortest time between the fetches the system schedules, whatever the app asks (default 15m).")
  /// `--info-plist FILE`.
  package static let infoPlist = Option.value(
    "info-plist", "file",
    help: "The app's Info.plist (XML or binary), installed in its bundle; the last one given is kept.")
  /// `--background-time DURATION`.
  package static let backgroundTime = Option.value(
    "background-time", "duration", help: "Background time while the app holds tasks (default 30s).")
  /// `--suspend-after DURATION`.
  package static let suspendAfter = Option.value(
    "suspend-after", "duration", help: "Running time in the background without tasks (default 5s).")
  /// `--fetch-time DURATION`.
  package static let fetchTime = Option.value(
    "fetch-time", "duration", help: "Time a background fetch may take (default 30s).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let plan: LaunchPlan
    switch try request(invocation) {
    case .detached(let bundleID, let command):
      return try AppInstallCommand.launchDetached(invocation, bundleID, command)
    case .plan(let planned): plan = planned
    }
    let givesPasscode = ExecCommand.passcode.options.contains { invocation.isGiven($0) }
    if !plan.prewarm, let status = try takePrewarmed(plan, invocation, givesPasscode: givesPasscode) {
      return status
    }
    var launcher = AppLauncher(device: invocation.device)
    launcher.lockController = invocation.lockController
    if plan.schedule.steps.contains(where: { $0.action == .unlock }) {
      launcher.passcode = try invocation.passcode(ExecCommand.passcode, prompt: nil)
    }
    launcher.report = { Console.err($0) }
    launcher.describe = describer(invocation)
    let device = invocation.device
    launcher.planOfRequest = { request in Self.plan(of: request, on: device) }
    return try ExecCommand.runReportingUnrunnable { try launcher.run(plan) }
  }

  /// A prewarmed app taken by this launch (a user's, with its command and surroundings): its exit
  /// status. Nil when there was none, or it was ended: any other launch ends it first, and so does
  /// a launch from a terminal, which the app gets a terminal of its own for (TerminalRelay): the
  /// held app would get this one's descriptors.
  private static func takePrewarmed(_ plan: LaunchPlan, _ invocation: Invocation, givesPasscode: Bool) throws
    -> Int32?
  {
    let device = invocation.device
    // Made in the surroundings the plan was made in: this process's.
    let request = LaunchRequest(words: Array(CommandLine.arguments.dropFirst()), surroundings: plan.surroundings)
    let outcome = try PrewarmedLaunch.take(
      plan.bundleID, device: device, request: request,
      mayTake: !plan.kind.isSystemLaunch && !givesPasscode && !TerminalRelay.standardStreamsIncludeTerminal)
    guard case .ran(let status) = outcome else { return nil }
    // The prewarmed app's supervisor recorded how it ended before it told this launch.
    if let crash = try AppStore(device: device).record(plan.bundleID)?.lastCrash {
      Console.err("protfs: \(plan.bundleID) \(TerminalText.escaped(crash.summary))")
    }
    return status
  }

  /// How the launch words an error in a warning: a protfs error with its remedy as a command.
  static func describer(_ invocation: Invocation) -> @Sendable (any Error) -> String {
    let spelling = invocation.spelling
    return { error in (error as? ProtFSError)?.commandLineDescription(spelling) ?? "\(error)" }
  }

  /// The options given to `invocation` among `options`, as arguments that give them again.
  static func givenOptions(_ invocation: Invocation, among options: [Option]) -> [String] {
    var given: [String] = []
    for option in options {
      if option.isFlag {
        if invocation.flag(option) { given.append("--" + option.long) }
      } else {
        for value in invocation.values(option) { given += ["--" + option.long, value] }
      }
    }
    return given
  }

  /// `command` with its program looked up and made absolute, as the app's record keeps it.
  static func absoluteCommand(_ command: [String]) throws -> [String] {
    try ExecutableLookup.absoluteCommand(command)
  }
}
