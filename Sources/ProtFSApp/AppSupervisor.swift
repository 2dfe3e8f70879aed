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
  private let store: AppStore
  /// The device the app runs on.
  private let device: Device
  private let listener: FileDescriptor
  /// Every process of the app.
  package let processes: AppProcesses
  /// Who may control the app: root and the supervisor's own user.
  private let controllers: Set<uid_t>
  /// Who may speak for the app (its helper commands) and nothing more: the app user.
  private let appUsers: Set<uid_t>
  let queue = DispatchQueue(label: "protfs.app.supervisor")
  private let exited = DispatchSemaphore(value: 0)
  var record: AppRecord
  private var events: FileDescriptor?
  var pid: pid_t = 0
  /// Bumped whenever the pending suspension, warning or kill no longer applies.
  private var generation = 0
  var backgroundStart = DispatchTime.now()
  var warned: Set<Int> = []
  private var nextTask = 1
  private var fetchStart: DispatchTime?
  private var fetchGeneration = 0
  /// The background modes the app's Info.plist declares (`UIBackgroundModes`): the system
  /// schedules fetches only for an app that lists `fetch`. Set it before `start`.
  public var backgroundModes: [String] = []
  /// The interval the app asked for with `setFetchInterval`, nil for never (the default, as on iOS).
  private var fetchInterval: Double?
  /// When the next scheduled fetch is due, while fetches are scheduled.
  private var nextFetch: DispatchTime?
  /// Bumped whenever the planned fetch no longer applies.
  private var fetchPlan = 0
  /// Whether the app asked for its main thread to be watched (`watchMainThread`).
  private var watched = false
  /// The events the watched main thread has not answered yet, by number, with their names.
  private var unanswered: [Int: String] = [:]
  /// The last number given to an event.
  private var eventNumber = 0
  /// The exception the app said it is aborting on (`uncaughtException`), for its crash report.
  private var exception: String?
  /// The sessions whose `handleEventsForBackgroundURLSession` the app has not answered yet.
  var postedSessions: Set<String> = []
  /// The sessions whose answer the app's background time waits for, each with the token of its
  /// pending kill (a later token or none: the kill no longer applies).
  var sessionWaits: [String: Int] = [:]
  /// The last token given in `sessionWaits`.
  var sessionToken = 0
  private var terminating = false
  private var status: Int32 = 1
  /// Whether the system launched the app in the background (for a fetch or session events).
  private let launchedInBackground: Bool

  /// Claims `bundleID`'s socket; throws `.alreadyExists` when a supervisor of that app runs.
  ///
  /// `userLaunch`: false when the system launches the app (for a fetch), which keeps a force-quit.
  /// `appUsers`: who may send the app's own requests (`AppRequest.isTheAppsOwn`), the app user;
  /// root and the caller's own user may send any.
  public init(
    device: Device, bundleID: BundleID, timings: AppTimings, command: [String], userLaunch: Bool = true,
    appUsers: Set<uid_t>
  ) throws(ProtFSError) {
    self.bundleID = bundleID
    self.timings = timings
    self.store = AppStore(device: device)
    self.device = device
    self.socketName = AppEnvironment.socketName(device: device, bundleID: bundleID)
    self.controllers = [0, getuid()]
    self.appUsers = appUsers
    guard
      let listener = try ControlSocket.listenAsService(
        socketName, settling: 2, probe: #"{"kind":"timeRemaining"}"#, trusting: AppUser.trustedServices,
        subject: "The app \(bundleID) cannot be launched", service: "supervisor", retry: "launch the app again")
    else {
      throw ProtFSError(
        .alreadyExists, "The app \(bundleID) is already running.",
        remedy: .advice("terminate it first, or bring it to the foreground"))
    }
    self.listener = listener
    processes = AppProcesses(key: String(socketName.split(separator: ".").last ?? ""))
    var record = (try? store.record(bundleID)) ?? nil ?? AppRecord(bundleID: bundleID.rawValue, backgroundTime: 0)
    record.backgroundTime = timings.backgroundTime
    record.lastLaunchCommand = command
    if userLaunch { record.forceQuit = false }
    launchedInBackground = !userLaunch
    record.tasks = []
    record.backgroundSince = nil
    self.record = record
  }

  /// The app's cgroup, which its first process joins before it runs the app (nil where its process
  /// group stands for it).
  public var cgroup: String? { processes.cgroup }

  /// The variables the app's environment gets.
  public var environment: [String: String] {
    var variables = [
      AppEnvironment.socket: "@" + socketName, AppEnvironment.bundle: bundleID.rawValue,
      AppEnvironment.eventsFD: String(AppEnvironment.eventsDescriptor),
      AppEnvironment.protectedData: device.isProtectedDataAvailable ? "available" : "unavailable",
      AppEnvironment.launchState: launchedInBackground ? "background" : "active",
    ]
    variables.merge(Self.sandbox(device.container(bundleID).absolutePath)) { _, sandbox in sandbox }
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
      record.state = .active
      record.pid = nil
      record.supervisor = .current
      record.cgroup = processes.cgroup
      return record
    }
    try store.write(prepared)
  }

  /// Records that the prepared launch did not start the app.
  public func abandon() {
    queue.sync {
      record.state = .notRunning
      record.supervisor = nil
      record.cgroup = nil
      save()
    }
    processes.end()
  }

  /// Takes charge of the started app `pid` (the leader of its process group), which reads events
  /// from the other end of `events`. Returns at once; `waitForExit` returns its exit status.
  public func start(pid: pid_t, events: FileDescriptor) throws(ProtFSError) {
    _ = valueOrErrno(.fcntl) { fcntl(events.rawValue, F_SETFL, O_NONBLOCK) }
    queue.sync {
      self.pid = pid
      self.events = events
      record.state = .active
      record.pid = pid
      record.supervisor = .current
      record.cgroup = processes.cgroup
    }
    processes.started(pid)
    let first = queue.sync { record }
    try store.write(first)
    Thread { [self] in
      // A wait that fails (no such child: never so for the app this process started) reads as
      // status 0, as the raw status it left untouched always did.
      let code = (try? Kernel.waitForChild(pid).get()) ?? 0
      queue.async { self.finish(code) }
    }.start()
    Thread { [self] in serve() }.start()
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
    while answering.load(ordering: .acquiring) > 0, Date() < answered { usleep(1_000) }
    return queue.sync { status }
  }

  /// Carries out `request` (from the socket, a schedule or a signal).
  public func perform(_ request: AppRequest) -> AppReply {
    let reply = queue.sync { handle(request) }
    // The hooks speak to the session service: off the queue, which the service may need meanwhile.
    guard reply.error == nil else { return reply }
    switch request.kind {
    case .eventsHandled: return Self.hook { () throws(ProtFSError) in try onEventsHandled(request.argument ?? "") }
    case .startSessionService: return Self.hook(onStartSessionService)
    default: return reply
    }
  }

  /// Tells the app that protected data became unavailable or available.
  public func protectedData(available: Bool) {
    queue.async {
      self.send(available ? .protectedDataDidBecomeAvailable : .protectedDataWillBecomeUnavailable)
    }
  }

  /// Sends `signal` to every process of the app.
  public func signalApp(_ signal: Int32) {
    queue.async { if self.pid > 0 { self.processes.signal(signal) } }
  }

  // MARK: - On the queue

  private func handle(_ request: AppRequest) -> AppReply {
    guard pid > 0, !terminating || request.kind == .timeRemaining else {
      return .refused("The app \(bundleID) is terminating.")
    }
    switch request.kind {
    case .background: return enterBackground()
    case .foreground: return enterForeground()
    case .fetch: return startFetch()
    case .terminate: return terminate(user: request.argument == "user")
    case .beginTask: return beginTask(request.argument ?? "")
    case .endTask: return endTask(request.argument ?? "")
    case .timeRemaining:
      guard record.state != .active else { return .ok("inf") }
      return .ok(String(format: "%.3f", remaining()))
    case .fetchCompleted: return completeFetch(request.argument ?? "")
    case .sessionEvents: return postSessionEvents(request.argument ?? "")
    case .eventsHandled: return endSessionEvents(request.argument ?? "")
    case .startSessionService: return .ok()
    case .setFetchInterval: return setFetchInterval(request.argument ?? "")
    case .watchMainThread:
      guard !watched else { return .ok() }
      watched = true
      expectAnswer(0, "didFinishLaunchingWithOptions", within: timings.watchdog * 2)
      return .ok()
    case .mainThreadAnswered:
      let number = request.argument == "launch" ? 0 : Int(request.argument ?? "")
      guard let number, unanswered.removeValue(forKey: number) != nil else {
        return .refused("No event \(request.argument ?? "") waits for the main thread's answer.")
      }
      reschedule()
      return .ok()
    case .uncaughtException:
      // Believed only when the app then dies of SIGABRT; bounded, as everything the app sends.
      exception = String((request.argument ?? "").prefix(4096))
      return .ok()
    }
  }

  func remaining() -> Double {
    let elapsed = Double(DispatchTime.now().uptimeNanoseconds - backgroundStart.uptimeNanoseconds) / 1e9
    return max(0, timings.backgroundTime - elapsed)
  }

  private func enterBackground() -> AppReply {
    guard record.state == .active else { return .refused("The app \(bundleID) is already in the background.") }
    record.state = .background
    record.backgroundSince = Date()
    backgroundStart = .now()
    warned = []
    send(.didEnterBackground)
    reschedule()
    return .ok()
  }

  private func enterForeground() -> AppReply {
    guard record.state != .active else { return .refused("The app \(bundleID) is already in the foreground.") }
    send(.willEnterForeground)
    if record.state == .suspended { processes.resume() }
    // In the foreground no watchdog waits for the sessions' answers (they are still expected).
    sessionWaits = [:]
    record.state = .active
    record.backgroundSince = nil
    reschedule()
    return .ok()
  }

  private func startFetch() -> AppReply {
    guard fetchStart == nil else { return .refused("A fetch of \(bundleID) is already under way.") }
    if record.state == .suspended {
      processes.resume()
      record.state = .background
      record.backgroundSince = Date()
      backgroundStart = .now()
      warned = []
    }
    let start = DispatchTime.now()
    fetchStart = start
    fetchGeneration += 1
    let current = fetchGeneration
    send(.performFetch)
    queue.asyncAfter(deadline: start + timings.fetchTime) { [self] in
      guard fetchGeneration == current, fetchStart != nil else { return }
      record.lastFetch = AppRecord.Fetch(result: "timedOut", duration: timings.fetchTime, time: Date())
      killApp("the background fetch did not complete within \(Self.seconds(timings.fetchTime))")
    }
    reschedule()
    return .ok()
  }

  private func completeFetch(_ result: String) -> AppReply {
    guard ["newData", "noData", "failed"].contains(result) else {
      return .refused("'\(result)' is not a fetch result: give newData, noData or failed.")
    }
    guard let start = fetchStart else { return .refused("No background fetch of \(bundleID) is under way.") }
    let duration = Double(DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds) / 1e9
    record.lastFetch = AppRecord.Fetch(result: result, duration: duration, time: Date())
    fetchStart = nil
    fetchGeneration += 1
    reschedule()
    return .ok()
  }

  /// Records the app's minimum fetch interval and plans the fetches it allows.
  private func setFetchInterval(_ text: String) -> AppReply {
    if text == "never" {
      fetchInterval = nil
    } else if let seconds = Double(text), seconds.isFinite, seconds >= 0 {
      fetchInterval = seconds
    } else {
      return .refused("'\(text)' is not a fetch interval: give seconds (0 for the minimum) or never.")
    }
    nextFetch = nil
    planFetch()
    return .ok(
      backgroundModes.contains("fetch") ? nil : "the app's Info.plist does not list fetch in UIBackgroundModes")
  }

  /// Plans the next fetch the system makes by itself, as iOS does: only for an app that asked (an
  /// interval other than never, and `fetch` in `UIBackgroundModes`), no sooner than the interval
  /// (or `fetchMinimum`, if longer) after the last one, and only while the app is in the
  /// background or suspended (one due in the foreground waits for the next period).
  private func planFetch() {
    fetchPlan += 1
    guard let interval = fetchInterval, backgroundModes.contains("fetch"), pid > 0, !terminating else {
      nextFetch = nil
      return
    }
    let period = max(interval, timings.fetchMinimum, 0.05)
    let due = max(nextFetch ?? (.now() + period), .now())
    nextFetch = due
    let plan = fetchPlan
    queue.asyncAfter(deadline: due) { [self] in
      guard fetchPlan == plan, pid > 0, !terminating else { return }
      if record.state != .active && fetchStart == nil { _ = startFetch() }
      nextFetch = .now() + period
      planFetch()
    }
  }

  private func beginTask(_ name: String) -> AppReply {
    if record.state != .active && remaining() <= 0 {
      return .refused("The app \(bundleID) has no background time left.")
    }
    let id = nextTask
    nextTask += 1
    record.tasks.append(AppRecord.Task(id: id, name: name))
    reschedule()
    return .ok(String(id))
  }

  private func endTask(_ text: String) -> AppReply {
    guard let id = Int(text), let index = record.tasks.firstIndex(where: { $0.id == id }) else {
      return .refused("'\(text)' is not an open background task of \(bundleID).")
    }
    record.tasks.remove(at: index)
    reschedule()
    return .ok()
  }

  private func terminate(user: Bool) -> AppReply {
    record.forceQuit = user
    terminating = true
    generation += 1
    save()
    // A suspended app is killed without notice, as on iOS.
    if record.state == .suspended {
      processes.kill()
      return .ok()
    }
    send(.willTerminate)
    queue.asyncAfter(deadline: .now() + timings.terminateGrace) { [self] in
      if pid > 0 { processes.kill() }
    }
    return .ok()
  }

  /// Plans what happens next in the background: the suspension, or the warnings and the kill.
  func reschedule() {
    generation += 1
    save()
    guard record.state == .background else { return }
    let current = generation
    if !record.tasks.isEmpty {
      let warning = backgroundStart + max(0, timings.backgroundTime - timings.warningLead)
      queue.asyncAfter(deadline: warning) { [self] in
        guard generation == current else { return }
        for task in record.tasks where warned.insert(task.id).inserted {
          send(.backgroundTaskWillExpire, task: task)
        }
      }
      queue.asyncAfter(deadline: backgroundStart + timings.backgroundTime) { [self] in
        guard generation == current, !record.tasks.isEmpty else { return }
        killApp(
          "background tasks were still open when the background time (\(Self.seconds(timings.backgroundTime))) ran out")
      }
    } else if fetchStart == nil && sessionWaits.isEmpty && unanswered.isEmpty {
      let suspension = max(backgroundStart + timings.suspendAfter, .now())
      queue.asyncAfter(deadline: suspension) { [self] in
        guard generation == current, record.state == .background else { return }
        processes.suspend()
        record.state = .suspended
        generation += 1
        save()
      }
    }
  }

  /// The watchdog's kill: a crash report, then SIGKILL to the whole app.
  func killApp(_ reason: String) {
    guard pid > 0, !terminating else { return }
    terminating = true
    generation += 1
    let report = AppCrashReport(
      bundleID: bundleID.rawValue, time: Date(), reason: reason, openTasks: record.tasks.map(\.name), pid: pid)
    _ = try? store.write(report)
    save()
    processes.kill()
  }

  private func finish(_ code: Int32) {
    if let exception, code == 128 + SIGABRT, !terminating {
      let report = AppCrashReport(
        bundleID: bundleID.rawValue, time: Date(), reason: exception, openTasks: record.tasks.map(\.name), pid: pid,
        terminationReason: AppCrashReport.uncaughtException)
      _ = try? store.write(report)
    }
    // Whatever the app left goes with it, in its cgroup or its group.
    processes.end()
    pid = 0
    generation += 1
    fetchGeneration += 1
    fetchPlan += 1
    status = code
    record.state = .notRunning
    record.pid = nil
    record.supervisor = nil
    record.cgroup = nil
    record.tasks = []
    record.backgroundSince = nil
    record.lastExitStatus = code
    save()
    events?.close()
    ControlSocket.shutDown(listener)
    exited.signal()
  }

  private func save() { _ = try? store.write(record) }

  func send(_ event: AppEvent, task: AppRecord.Task? = nil, session: String? = nil) {
    guard let events else { return }
    var line = #"{"event":""# + event.rawValue + "\""
    if watched && event != .willTerminate {
      eventNumber += 1
      line += #","number":\#(eventNumber)"#
      expectAnswer(eventNumber, event.rawValue, within: timings.watchdog)
    }
    if let task {
      line += #","task":\#(task.id),"name":\#(Self.jsonString(task.name))"#
    }
    if let session { line += #","session":\#(Self.jsonString(session))"# }
    line += "}\n"
    // Non-blocking: an app that never reads loses events rather than stalling its supervisor.
    _ = try? AtomicFile.writeAll(events.rawValue, Array(line.utf8), path: "events")
  }

  /// The watchdog: event `number` (`name`) must be answered by the app's main thread `within`
  /// seconds of the app running, or the app is killed with a crash report, as iOS's watchdog kills
  /// an app whose main thread is blocked. Time frozen does not count: a deadline met while the app
  /// is suspended waits for it to run again.
  private func expectAnswer(_ number: Int, _ name: String, within seconds: Double) {
    unanswered[number] = name
    queue.asyncAfter(deadline: .now() + seconds) { [self] in
      guard unanswered[number] != nil, pid > 0, !terminating else { return }
      if record.state == .suspended {
        expectAnswer(number, name, within: seconds)
        return
      }
      killApp("the main thread did not return from \(name) within \(Self.seconds(seconds)) (it is blocked)")
    }
  }

  /// `text` as a JSON string.
  private static func jsonString(_ text: String) -> String {
    (try? JSONEncoder().encode(text)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
  }

  static func seconds(_ value: Double) -> String {
    value == value.rounded() ? "\(Int(value)) s" : String(format: "%.3g s", value)
  }

  // MARK: - The socket

  /// The most connections the app user may hold open to this supervisor at once.
  public static let connectionsPerAppUser = 32
  /// Open connections by the peer's user.
  private let openConnections = Mutex<[uid_t: Int]>([:])
  /// Requests read and not answered yet.
  private let answering = Atomic(0)

  private func serve() {
    while let (connection, peer) = ControlSocket.accept(listener) {
      // Checked before the peer gets a thread: whoever may not talk to the app is answered at once.
      if let refusal = admit(peer) {
        ControlSocket.refuse(connection, line: Self.line(.refused(refusal)))
        continue
      }
      Thread { [self] in
        defer {
          connection.close()
          openConnections.withLock { $0[peer.uid, default: 1] -= 1 }
        }
        ControlSocket.limitWaits(connection)
        let reply: AppReply
        var counted = false
        if let line = ControlSocket.readLine(connection),
          let request = try? JSONDecoder().decode(AppRequest.self, from: Data(line.utf8))
        {
          // Counted until its answer is written (below): an exit waits for it.
          answering.add(1, ordering: .acquiringAndReleasing)
          counted = true
          if controllers.contains(peer.uid) || request.isTheAppsOwn {
            reply = perform(request)
          } else {
            reply = .refused(
              "An app cannot ask for \(request.kind.rawValue) itself (user \(peer.uid) is the app's): the system and the user decide that."
            )
          }
        } else {
          reply = .refused("The request is not valid.")
        }
        #if DEBUG
          // Debug builds: a test holds each answer back, so that the app ends before it is written.
          if let delay = ProcessInfo.processInfo.environment["PROTFS_DEBUG_REPLY_DELAY_MS"].flatMap(UInt32.init) {
            usleep(delay * 1000)
          }
        #endif
        ControlSocket.writeLine(connection, Self.line(reply))
        if counted { answering.subtract(1, ordering: .acquiringAndReleasing) }
      }.start()
    }
    listener.close()
  }

  /// Counts `peer`'s connection in, or says why it is refused: root and the supervisor's own user
  /// control the app; the app user speaks for it only from one of the app's own processes (below
  /// this supervisor: another app, which runs as the same user, may not), with at most
  /// `connectionsPerAppUser` connections open.
  private func admit(_ peer: PeerCredentials) -> String? {
    if !controllers.contains(peer.uid) {
      guard appUsers.contains(peer.uid) else { return "User \(peer.uid) may not control the app \(bundleID)." }
      guard Self.descends(peer.pid, from: getpid()), peer.isStillConnectedProcess else {
        return
          "Process \(peer.pid) is not one of the app \(bundleID)'s; only the app itself, root and its user may speak to its supervisor."
      }
    }
    return openConnections.withLock { counts -> String? in
      if !controllers.contains(peer.uid), counts[peer.uid, default: 0] >= Self.connectionsPerAppUser {
        return
          "The app \(bundleID) holds \(Self.connectionsPerAppUser) connections to its supervisor already; close one first."
      }
      counts[peer.uid, default: 0] += 1
      return nil
    }
  }

  /// Whether process `pid` is a descendant of process `ancestor`.
  static func descends(_ pid: pid_t, from ancestor: pid_t) -> Bool {
    var current = pid
    for _ in 0..<64 where current > 1 {
      guard let parent = ProcessIdentity.parent(of: current) else { return false }
      if parent == ancestor { return true }
      current = parent
    }
    return false
  }

  /// `reply` as a JSON line's text.
  private static func line(_ reply: AppReply) -> String {
    (try? JSONEncoder().encode(reply)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"error":"internal"}"#
  }
}
