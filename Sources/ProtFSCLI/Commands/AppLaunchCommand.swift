import Foundation
import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSMount
import ProtFSRuntime
import ProtFSSessions
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
    var schedule = LockSchedule(steps: [])
    if let text = invocation.value(ExecCommand.schedule) {
      do {
        schedule = try LockSchedule(parsing: text)
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
    }
    let passed = try ExecCommand.passedEnvironment(invocation)
    let session = invocation.value(forSession)
    let push = try invocation.value(forPush).map { try PushPayloadFile.take($0, on: invocation.device) }
    let backgroundTask = invocation.value(forBackgroundTask)
    let systemLaunches = systemLaunchOptions.filter { invocation.isGiven($0) }.count
    if systemLaunches > 1 {
      throw invocation.usageError("--for-fetch, --for-session, --for-push and --for-bgtask cannot be given together.")
    }
    let prewarming = invocation.flag(prewarm)
    let systemLaunch = systemLaunches == 1
    if prewarming && (systemLaunch || invocation.flag(wait)) {
      throw invocation.usageError("--prewarm is for a user's launch: it cannot be given with --wait or a --for option.")
    }
    let bundleID = try AppCommand.existingApp(invocation)
    var command = invocation.trailing
    if command.isEmpty {
      // The installed app (`app install`, or its last launch): detached unless --wait.
      guard let installed = try AppStore(device: invocation.device).record(bundleID)?.lastLaunchCommand,
        !installed.isEmpty
      else {
        throw ExitStatus(
          code: 1,
          message:
            "The app \(bundleID) is not installed: give its command (\(invocation.spelling.command("app launch \(bundleID) -- CMD"))) or install it (\(invocation.spelling.command("app install \(bundleID) -- CMD")))."
        )
      }
      if !invocation.flag(wait) { return try AppInstallCommand.launchDetached(invocation, bundleID, installed) }
      command = installed
    }
    // The command as the record keeps it, its program found and made absolute.
    let absolute = try absoluteCommand(command)
    let program = absolute[0]
    let device = invocation.device
    let givesPasscode = ExecCommand.passcode.options.contains { invocation.isGiven($0) }
    if prewarming && givesPasscode {
      throw invocation.usageError(
        "A prewarmed app's launch cannot take a passcode: give it to the launch that takes the app.")
    }
    // What a launch must be to take this prewarmed app, made before anything here changes.
    var prewarmKey: PrewarmedLaunch.LaunchKey?
    if prewarming {
      prewarmKey = PrewarmedLaunch.key(
        of: PrewarmedLaunch.LaunchRequest.current(words: Array(CommandLine.arguments.dropFirst())))
      guard prewarmKey != nil else {
        throw ExitStatus(code: 70, message: "The prewarmed app \(bundleID) cannot know its own launch.")
      }
    } else {
      // A prewarmed app: a user's launch with its command and surroundings takes it; any other
      // launch ends it first. So does a launch from a terminal, which the app gets a terminal of
      // its own for (TerminalRelay): the held app would get this one's descriptors.
      let outcome = try PrewarmedLaunch.take(
        bundleID, device: device,
        mayTake: !systemLaunch && !givesPasscode && !TerminalRelay.standardStreamsIncludeTerminal)
      if case .ran(let status) = outcome {
        // The prewarmed app's supervisor recorded how it ended before it told this launch.
        if let crash = try AppStore(device: device).record(bundleID)?.lastCrash {
          Console.err("protfs: \(bundleID) \(TerminalText.escaped(crash.summary))")
        }
        return status
      }
    }
    var passcode: String?
    if schedule.steps.contains(where: { $0.action == .unlock }) {
      passcode = try invocation.passcode(ExecCommand.passcode, prompt: nil)
    }
    // The app's mount comes up while the rest is prepared: it takes longer than the rest, so it is
    // begun first, once this process is the app's one supervisor (its socket is bound).
    var pendingMount: HostedMount?
    defer { pendingMount?.stop() }
    let supervisor = try AppSupervisor(
      device: device, bundleID: bundleID, timings: timings,
      command: absolute,
      userLaunch: !systemLaunch,
      appUsers: AppUser.canAssume ? [AppUser.standard.uid] : []
    ) { pendingMount = beginMount(invocation, device: device, bundleID: bundleID.rawValue) }
    supervisor.prewarm = prewarming
    let bundle: AppBundle
    do {
      bundle = try AppBundle(bundleID: bundleID, infoPlist: invocation.value(infoPlist), device: device)
    } catch {
      supervisor.processes.end()
      throw error
    }
    supervisor.backgroundModes = bundle.backgroundModes
    supervisor.permittedTaskIdentifiers = bundle.permittedTaskIdentifiers
    let sessionsSocket = SessionServiceClient.socketName(device: device)
    supervisor.onEventsHandled = { (session: String) throws(ProtFSError) in
      try SessionServiceClient.eventsHandled(session: session, bundleID: bundleID.rawValue, socketName: sessionsSocket)
    }
    // The app's session asks for the service: started here, as root, detached.
    supervisor.onStartSessionService = { () throws(ProtFSError) in
      do {
        try SessionServiceStarter.ensureRunning(device)
      } catch let error as ProtFSError {
        throw error
      } catch {
        throw ProtFSError(.io, "The session service did not start: \(error).")
      }
    }
    // An app that closes its event descriptor must not kill its supervisor: the next event's write
    // fails with EPIPE (and is dropped) instead of raising SIGPIPE here.
    signal(SIGPIPE, SIG_IGN)
    // A socket: the events go to the app on it, and the other way a ProtFSKit app's crash handler
    // sends its crash record (and a held app that it is held, and the launch that takes it its
    // standard streams).
    let (writeEnd, readEnd) = try DescriptorPassing.socketPair()
    var environment = supervisor.environment
    environment[AppEnvironment.sessionsSocket] = sessionsSocket
    // The app's FileManager (ProtFSKit) and helper commands find the device it was launched on.
    environment["PROTFS_DEVICE"] = device.root
    // Only a Swift program is run from the bundle (where Foundation finds it): anything else keeps
    // its path, which it may use to find what lies beside it.
    let bundled: [String]
    if AppBundle.isSwiftProgram(program) {
      bundled = [try bundle.install(program, on: device)] + command.dropFirst()
    } else {
      // The Info.plist alone is installed, for the launches that do not give one.
      try bundle.install(nil, on: device)
      bundled = command
    }
    try supervisor.prepare()
    // The app leads a session of its own, on a pseudo-terminal of its own when this launch has a
    // terminal (a prewarmed app gets its launch's streams later, over the socket).
    let terminal: TerminalRelay?
    do {
      terminal = prewarming ? nil : try ConfinedSpawn.terminalForStandardStreams()
    } catch {
      supervisor.abandon()
      throw error
    }
    defer { terminal?.finish() }
    // Signals to protfs go to the whole app. Forwarded from before the spawn: one that arrives
    // before the app runs is held for it. A window size change is passed on as its terminal's.
    try SignalForwarding.forward([SIGINT, SIGTERM, SIGHUP, SIGWINCH]) { signal in
      if signal == SIGWINCH {
        terminal?.resize()
      } else {
        supervisor.signalApp(signal)
      }
    }
    let mount = serving(pendingMount)
    let options = ConfinedSpawn.Options(
      mountpoint: mount?.mountpoint ?? MountRegistry(device: device).deviceMounts().first?.mountpoint,
      terminal: terminal,
      descriptor: (readEnd.rawValue, AppEnvironment.eventsDescriptor),
      environment: environment, passed: passed, closingOthers: true,
      descriptorLimit: mount.map { _ in HostedMount.originalDescriptorLimit }, cgroup: supervisor.cgroup,
      endsWithParent: true, sandbox: bundleID.rawValue)
    let spawned = Result { try ConfinedSpawn.startCommand(bundled, device: device, options, by: "app launch") }
    readEnd.close()
    let pid: pid_t
    do {
      pid = try spawned.get()
    } catch {
      supervisor.abandon()
      throw error
    }
    // An app is never stopped from the keyboard (iOS has no such thing): Ctrl-Z is a key it reads.
    terminal?.start(leader: pid, suspending: false)
    DebugHold.wait("PROTFS_DEBUG_HOLD_LAUNCH")
    try supervisor.start(pid: pid, events: writeEnd)
    var launcher: PrewarmedLaunch.Launcher?
    if prewarming {
      switch try PrewarmedLaunch.hold(supervisor, device: device, events: writeEnd, key: prewarmKey!) {
      case .ended(let status): return status
      case .launched(let taken): launcher = taken
      }
    }
    let systemRequests =
      invocation.flag(forFetch)
      ? [AppRequest(.background), AppRequest(.fetch)]
      : session.map { [AppRequest(.background), AppRequest(.sessionEvents, $0)] }
        ?? push.map { [AppRequest(.background), AppRequest(.push, $0)] }
        ?? backgroundTask.map { [AppRequest(.background), AppRequest(.bgTaskLaunch, $0)] } ?? []
    for request in systemRequests {
      if let failure = supervisor.perform(request).error { Console.err("warning: \(failure)") }
    }
    // Watching starts before the first scheduled step can lock the device.
    let watcher = watchProtectedData(try? device.protectedDataEvents(), supervisor)
    defer { watcher.cancel() }
    let controller = invocation.lockController
    let start = DispatchTime.now()
    for step in schedule.steps {
      if supervisor.waitForExit(until: start + step.offset) != nil { break }
      if let failure = perform(step.action, supervisor, controller, passcode: passcode, spelling: invocation.spelling) {
        Console.err("warning: the scheduled \(step.action.rawValue) failed: \(failure)")
      }
    }
    let status = supervisor.waitForExit() ?? 1
    // As iOS's log says it: the exit status alone (137) does not tell a kill by the watchdog.
    if let crash = supervisor.lastCrash { Console.err("protfs: \(bundleID) \(TerminalText.escaped(crash.summary))") }
    if let launcher {
      // The launch that took the prewarmed app returns once this process is gone, its mount and
      // claim with it, as a launch that supervised the app itself does: the next finds them free.
      pendingMount?.stop()
      pendingMount = nil
      supervisor.releaseClaim()
      launcher.finish(status)
    }
    return status
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

  /// The mount the app runs through, begun: none when the device's own mount is active (the app
  /// uses it) or with --no-mount; otherwise one served here for the app alone, or, where this
  /// process cannot mount, none and a warning.
  private static func beginMount(_ invocation: Invocation, device: Device, bundleID: String) -> HostedMount? {
    if invocation.flag(noMount) || !MountRegistry(device: device).deviceMounts().isEmpty { return nil }
    do throws(ProtFSError) {
      return try HostedMount.begin(device: device, bundleID: bundleID)
    } catch {
      warnWithoutMount(error)
      return nil
    }
  }

  /// `mount` once it serves, or nil and a warning when it does not.
  private static func serving(_ mount: HostedMount?) -> HostedMount? {
    do throws(ProtFSError) {
      try mount?.waitUntilServing()
      return mount
    } catch {
      warnWithoutMount(error)
      return nil
    }
  }

  private static func warnWithoutMount(_ error: ProtFSError) {
    Console.err(
      "warning: \(error.message) The app runs under permission modes alone: refusals are \"Permission denied\", not iOS's \"Operation not permitted\"."
    )
  }

  /// Passes the device's lock and unlock on to the app while it runs.
  private static func watchProtectedData(_ events: AsyncStream<ProtectedDataEvent>?, _ supervisor: AppSupervisor)
    -> Task<Void, Never>
  {
    Task {
      guard let events else { return }
      for await event in events {
        supervisor.protectedData(available: event.event == .protectedDataDidBecomeAvailable)
      }
    }
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

  /// Makes one scheduled change; returns why it failed (its remedy spelled by `spelling`) instead of
  /// throwing, as the app keeps running.
  private static func perform(
    _ action: LockSchedule.Action, _ supervisor: AppSupervisor, _ controller: LockController, passcode: String?,
    spelling: CommandSpelling
  ) -> String? {
    let request: AppRequest
    switch action {
    case .background: request = AppRequest(.background)
    case .foreground: request = AppRequest(.foreground)
    case .fetch: request = AppRequest(.fetch)
    case .terminate: request = AppRequest(.terminate)
    case .push: request = AppRequest(.push, LockSchedule.Action.silentPushPayload)
    case .refresh, .process:
      request = AppRequest(.bgTaskLaunch, BackgroundTaskMessage(type: action == .refresh ? .refresh : .processing).json)
    case .lock, .inactive, .unlock, .reboot:
      do {
        switch action {
        case .inactive: try controller.lock(inactive: true)
        case .unlock: try controller.unlock(passcode: passcode)
        case .reboot: try controller.reboot()
        default: try controller.lock()
        }
        return nil
      } catch {
        return error.commandLineDescription(spelling)
      }
    }
    return supervisor.perform(request).error
  }

  /// `command` with its program looked up and made absolute, as the app's record keeps it.
  static func absoluteCommand(_ command: [String]) throws -> [String] {
    let lookup = executableLookup(command[0])
    guard let program = lookup.path else {
      let skipped =
        lookup.closedDirectories.isEmpty
        ? ""
        : " (skipped the directories uid \(AppUser.standard.uid) cannot search: "
          + lookup.closedDirectories.joined(separator: ", ") + ")"
      throw ExitStatus(code: 1, message: "Cannot run '\(command[0])': it is not an executable file\(skipped).")
    }
    return [program.hasPrefix("/") ? program : FileManager.default.currentDirectoryPath + "/" + program]
      + command.dropFirst()
  }

  /// The file `name` runs, looked up in $PATH as execvp does, when it is an executable regular file.
  static func executablePath(_ name: String) -> String? { executableLookup(name).path }

  /// The file `name` runs, looked up in $PATH as execvp does, when it is an executable regular
  /// file, and the directories passed over: as root, as the app user (who runs it) looks it up,
  /// so that a directory closed to it (root's own, first on root's PATH) is skipped.
  static func executableLookup(_ name: String) -> (path: String?, closedDirectories: [String]) {
    let candidates =
      name.contains("/")
      ? [name]
      : (ProcessEnvironment.value("PATH") ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/\(name)" }
    var closed: [String] = []
    for path in candidates {
      if AppUser.canAssume, AppUser.standard.firstClosedDirectory(to: path) != nil {
        closed.append((path as NSString).deletingLastPathComponent)
        continue
      }
      var status = stat()
      guard case .success = valueOrErrno(.stat, { stat(path, &status) }), status.st_mode & S_IFMT == S_IFREG,
        status.st_mode & 0o111 != 0
      else { continue }
      return (path, closed)
    }
    return (nil, closed)
  }
}
