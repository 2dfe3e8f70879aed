import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// Runs one app's life (docs/semantics.md §8): keeps its record, sends its events, suspends,
/// resumes and kills it on time, and answers the commands that reach it through its socket.
///
/// The process itself is started by the caller (confined as `protfs exec` confines a program), in
/// a process group of its own and, where the kernel allows, a cgroup of its own that it joins
/// before it runs (`AppProcesses`): every process of the app is suspended, resumed and killed
/// with it.
///
/// `@unchecked Sendable`: every mutable property is touched only on `queue`.
public final class AppSupervisor: @unchecked Sendable {
  /// The app.
  public let bundleID: BundleID
  /// Its budgets and graces.
  public let timings: AppTimings
  /// The abstract socket name it listens on.
  public let socketName: String
  /// Called when the app answers `eventsHandled` for a session (the CLI tells the session service);
  /// what it throws becomes the reply's error. Set it before `start`.
  public var onEventsHandled: @Sendable (String) throws(ProtFSError) -> Void = { _ in }
  /// Called when the app asks for `startSessionService`; what it throws becomes the reply's error.
  /// Set it before `start`.
  public var onStartSessionService: @Sendable () throws(ProtFSError) -> Void = { () throws(ProtFSError) in
    throw ProtFSError(.notFound, "The session service cannot be started from here.")
  }
  /// Called with what the supervisor could not do but carries on without (the app's record or its
  /// crash report not written): a line on the supervisor's standard error unless set otherwise.
  /// Set it before `start`.
  public var onProblem: @Sendable (String) -> Void = { problem in
    FileHandle.standardError.write(Data("protfs app: \(problem)\n".utf8))
  }
  let store: AppStore
  /// The device the app runs on.
  let device: Device
  let listener: FileDescriptor
  /// The app's claim (`AppStore.claim`), held as long as this process lives.
  let claim: FileDescriptor
  /// Every process of the app.
  package let processes: AppProcesses
  /// Who may control the app: root and the supervisor's own user.
  let controllers: Set<uid_t>
  /// Who may speak for the app (its helper commands) and nothing more: the app user.
  let appUsers: Set<uid_t>
  let queue = DispatchQueue(label: "protfs.app.supervisor")
  let exited = DispatchSemaphore(value: 0)
  /// The app's life: what it is in, and what each request and deadline does (`AppLifecycle`).
  var lifecycle: AppLifecycle
  var events: FileDescriptor?
  var status: Int32 = 1
  /// Whether the system launched the app in the background (for a fetch or session events).
  let launchedInBackground: Bool
  /// The background modes the app's Info.plist declares (`UIBackgroundModes`): the system
  /// schedules fetches only for an app that lists `fetch`. Set it before `start`.
  public var backgroundModes: [String] {
    get { queue.sync { lifecycle.backgroundModes } }
    set { queue.sync { lifecycle.backgroundModes = newValue } }
  }
  /// The BGTask identifiers the app's Info.plist permits (`BGTaskSchedulerPermittedIdentifiers`).
  /// Set it before `start`.
  public var permittedTaskIdentifiers: [String] {
    get { queue.sync { lifecycle.permittedTaskIdentifiers } }
    set { queue.sync { lifecycle.permittedTaskIdentifiers = newValue } }
  }

  /// Claims `bundleID`'s socket; throws `.alreadyExists` when a supervisor of that app runs.
  ///
  /// `userLaunch`: false when the system launches the app (for a fetch), which keeps a force-quit.
  /// `appUsers`: who may send the app's own requests (`AppRequest.isTheAppsOwn`), the app user;
  /// root and the caller's own user may send any. `claimed` runs as soon as the socket is this
  /// process's (it is then the app's one supervisor), before the rest is read: work that only the
  /// one supervisor may do (the app's mount) starts there, beside the rest of the launch.
  public init(
    device: Device, bundleID: BundleID, timings: AppTimings, command: [String], userLaunch: Bool = true,
    appUsers: Set<uid_t>, claimed: () -> Void = {}
  ) throws(ProtFSError) {
    self.bundleID = bundleID
    self.timings = timings
    self.store = AppStore(device: device)
    self.device = device
    self.controllers = [0, Kernel.getuid()]
    self.appUsers = appUsers
    guard let claim = try Self.claim(bundleID, in: store, settling: 2) else {
      throw ProtFSError(
        .alreadyExists, "The app \(bundleID) is already running.",
        remedy: .advice("terminate it first, or bring it to the foreground"))
    }
    self.claim = claim
    // Holding the claim, this is the app's one supervisor: a prewarmed app's socket file left by a
    // supervisor killed with SIGKILL names nobody.
    try store.setPrewarmSocket(bundleID, nil)
    // Chosen at random at each launch: anyone may bind an abstract name first, and a name known in
    // advance could be taken before the launch (which would then be refused). The app learns it
    // from its environment, the system's commands from the app's record.
    let key = AppEnvironment.key(device: device, bundleID: bundleID)
    var bound: (String, FileDescriptor)?
    for _ in 0..<4 where bound == nil {
      let name = "protfs-app.\(key).\(Self.randomHex())"
      do {
        bound = (name, try ControlSocket.listen(name))
      } catch  where error.errno == EADDRINUSE {
        continue
      }
    }
    guard let (socketName, listener) = bound else {
      throw ProtFSError(
        .io, "The app \(bundleID) cannot be launched: no socket name for its supervisor could be bound.")
    }
    self.socketName = socketName
    self.listener = listener
    claimed()
    processes = AppProcesses(key: key)
    var record = (try? store.record(bundleID)) ?? nil ?? AppRecord(bundleID: bundleID.rawValue, backgroundTime: 0)
    record.backgroundTime = timings.backgroundTime
    record.lastLaunchCommand = command
    if userLaunch { record.forceQuit = false }
    launchedInBackground = !userLaunch
    record.tasks = []
    record.backgroundSince = nil
    lifecycle = AppLifecycle(bundleID: bundleID, timings: timings, record: record)
  }

  /// The app's claim, nil while another supervisor holds it. A claim still held for a moment by
  /// a supervisor going away (its descriptor lives on in a child being started, until its
  /// `exec`) is waited for, up to `settling` seconds; one held by a supervisor the record shows
  /// alive is not.
  static func claim(_ bundleID: BundleID, in store: AppStore, settling: Double) throws(ProtFSError)
    -> FileDescriptor?
  {
    let deadline = Date().addingTimeInterval(settling)
    // Short waits first: a supervisor that just ended lets go within a millisecond or two.
    var delay: useconds_t = 500
    while true {
      if let claim = try store.claim(bundleID) { return claim }
      if Date() >= deadline || (try? store.record(bundleID))??.isSupervised == true { return nil }
      Kernel.usleep(delay)
      delay = min(delay * 2, 20_000)
    }
  }

  /// 128 random bits in hexadecimal.
  static func randomHex() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<2).map { _ in
      let text = String(generator.next() as UInt64, radix: 16)
      return String(repeating: "0", count: 16 - text.count) + text
    }.joined()
  }

  /// The app's cgroup, which its first process joins before it runs the app (nil where its process
  /// group stands for it).
  public var cgroup: String? { processes.cgroup }

  /// Whether the app is started ahead of its launch and held (`protfs app prewarm`) until
  /// `activate`: its record says `prewarmed`, the system's requests are refused, and it reads its
  /// events from a socket (`AppEnvironment.prewarm`). Set it before `environment` and `prepare`.
  public var prewarm = false

  /// The variables the app's environment gets.
  public var environment: [String: String] {
    var variables = [
      AppEnvironment.socket: "@" + socketName, AppEnvironment.bundle: bundleID.rawValue,
      AppEnvironment.eventsFD: String(AppEnvironment.eventsDescriptor),
      AppEnvironment.protectedData: device.isProtectedDataAvailable ? "available" : "unavailable",
      AppEnvironment.launchState: launchedInBackground ? "background" : "active",
    ]
    variables.merge(Self.sandbox(device.container(bundleID).absolutePath)) { _, sandbox in sandbox }
    if prewarm { variables[AppEnvironment.prewarm] = "1" }
    return variables
  }

  /// The variables that make the container the app's sandbox, as on iOS: its home directory
  /// (`NSHomeDirectory()`: `HOME`, and `CFFIXED_USER_HOME`, which Foundation reads first and also
  /// for root), `NSTemporaryDirectory()` (`tmp/`), and the directories Linux Foundation's search
  /// paths read (`NSSearchPathForDirectoriesInDomains` gives `Library/Caches` for caches and
  /// `Library/Application Support` for application support; `Documents` follows from the home).
  static func sandbox(_ container: String) -> [String: String] {
    [
      "HOME": container, "CFFIXED_USER_HOME": container, "TMPDIR": container + "/tmp/",
      "XDG_CACHE_HOME": container + "/Library/Caches",
      "XDG_DATA_HOME": container + "/Library/Application Support",
      "XDG_CONFIG_HOME": container + "/Library/Preferences",
    ]
  }

  /// Records the launch before the app's process exists: the supervisor (this process, with its
  /// start time) is what names the app's processes to the system services, so a request the app
  /// makes at once, before `start`, is already answered as the app's. Call it right before the app
  /// is started; `abandon()` undoes it when it could not be.
  public func prepare() throws(ProtFSError) {
    let prepared = queue.sync { () -> AppRecord in
      lifecycle.record.state = prewarm ? .prewarmed : .active
      lifecycle.record.pid = nil
      lifecycle.record.supervisor = .current
      lifecycle.record.cgroup = processes.cgroup
      lifecycle.record.supervisorSocket = socketName
      return lifecycle.record
    }
    try store.write(prepared)
  }

  /// Records that the prepared launch did not start the app, and lets go of the app's claim: the
  /// next launch (in this process too) finds it free.
  public func abandon() {
    queue.sync {
      lifecycle.record.state = .notRunning
      lifecycle.record.supervisor = nil
      lifecycle.record.cgroup = nil
      lifecycle.record.supervisorSocket = nil
      save()
    }
    withdraw()
  }

  /// Ends what a launch that failed before it was prepared started (nothing was recorded), and
  /// lets go of the app's claim.
  public func withdraw() {
    processes.end()
    claim.close()
  }

  /// Takes charge of the started app `pid` (the leader of its process group), which reads events
  /// from the other end of `events`. Returns at once; `waitForExit` returns its exit status.
  public func start(pid: pid_t, events: FileDescriptor) throws(ProtFSError) {
    _ = Kernel.fcntl(events.rawValue, F_SETFL, O_NONBLOCK)
    queue.sync {
      self.events = events
      lifecycle.started(pid)
      if prewarm { lifecycle.record.state = .prewarmed }
      lifecycle.record.supervisor = .current
      lifecycle.record.cgroup = processes.cgroup
      lifecycle.record.supervisorSocket = socketName
    }
    processes.started(pid)
    queue.async { [self] in
      signalsReachTheApp = true
      for signal in pendingSignals { deliver(signal) }
      pendingSignals = []
    }
    Thread { [self] in
      // A wait that fails (no such child: never so for the app this process started) reads as
      // status 0, as the raw status it left untouched always did.
      let end = (try? Kernel.waitForChildEnd(pid).get()) ?? .exited(0)
      queue.async { self.finish(end) }
    }.start()
    // Serving first: the app's first request (it asks at once) is accepted while the record is
    // written. The record is read and written on the queue, so a request's own save cannot be
    // overwritten by an older state.
    Thread { [self] in serve() }.start()
    try queue.sync { Result { () throws(ProtFSError) in try store.write(lifecycle.record) } }.get()
  }

  /// Waits until the app ended, or until `deadline`; returns its exit status, or nil at the deadline.
  ///
  /// Requests being answered when the app ended get their answers first (for up to a second): the
  /// process that called this usually exits next, and a `terminate` whose kill ended the app at
  /// once must still hear that it was done.
  public func waitForExit(until deadline: DispatchTime = .distantFuture) -> Int32? {
    guard exited.wait(timeout: deadline) == .success else { return nil }
    exited.signal()
    let answered = Date().addingTimeInterval(1)
    while answering.load(ordering: .acquiring) > 0, Date() < answered { Kernel.usleep(1_000) }
    return queue.sync { status }
  }

  /// The system's kill of the app's last run, or its crash, with the crash report's path; nil when
  /// it ended otherwise, or has not ended. Read once `waitForExit` returned a status.
  public var lastCrash: AppRecord.Crash? { queue.sync { lifecycle.record.lastCrash } }

  /// Carries out `request` (from the socket, a schedule or a signal).
  public func perform(_ request: AppRequest) -> AppReply {
    let reply = queue.sync { () -> AppReply in
      guard lifecycle.record.state != .prewarmed else {
        return .refused(
          "The app \(bundleID) is prewarmed, not launched: launch it (protfs app launch), or end it (protfs app terminate)."
        )
      }
      let (reply, effects) = lifecycle.handle(request, at: .now)
      carryOut(effects)
      return reply
    }
    // The hooks speak to the session service: off the queue, which the service may need meanwhile.
    guard reply.error == nil else { return reply }
    switch request {
    case .eventsHandled(let session): return Self.hook { () throws(ProtFSError) in try onEventsHandled(session) }
    case .startSessionService: return Self.hook(onStartSessionService)
    default: return reply
    }
  }

  /// Tells the app that protected data became unavailable or available.
  public func protectedData(available: Bool) {
    queue.async { self.carryOut(self.lifecycle.protectedData(available: available, at: .now)) }
  }

  /// Sends `signal` to every process of the app.
  public func signalApp(_ signal: Int32) {
    queue.async {
      if self.signalsReachTheApp {
        self.deliver(signal)
      } else {
        // Before the app runs: it gets the signal as soon as it does.
        self.pendingSignals.append(signal)
      }
    }
  }

  /// Passes `signal` on to the app, on the queue. A prewarmed app is discarded instead (iOS ends a
  /// prewarmed process without notice): it was never launched, and could ignore the signal and
  /// run on.
  func deliver(_ signal: Int32) {
    if lifecycle.record.state == .prewarmed {
      processes.kill()
    } else {
      processes.signal(signal)
    }
  }

  /// Signals that reached the supervisor before the app was started.
  var pendingSignals: [Int32] = []
  /// Whether the app's processes are known, so that a signal reaches them.
  var signalsReachTheApp = false

  /// The most connections the app user may hold open to this supervisor at once.
  public static let connectionsPerAppUser = 32
  /// Open connections by the peer's user.
  let openConnections = Mutex<[uid_t: Int]>([:])
  /// Requests read and not answered yet.
  let answering = Atomic(0)
}

extension AppLifecycle.Moment {
  /// This moment, on the clock `DispatchQueue.asyncAfter` schedules by.
  static var now: Self {
    Self(uptime: Double(DispatchTime.now().uptimeNanoseconds) / 1e9, date: Date())
  }
}
