import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem
import Testing

/// An app's lifecycle run on a simulated clock: requests at chosen moments, and every timer the
/// lifecycle plans fired at its deadline, in order. No process, socket or wait: a day of
/// background fetches takes microseconds, and iOS's own budgets (30 s, 15 minutes) are used as
/// they are.
private struct Simulation {
  var life: AppLifecycle
  /// The simulated monotonic clock, in seconds.
  private(set) var clock: Double = 1_000
  /// The timers planned and not fired yet, in the order they were planned.
  private var timers: [(deadline: Double, timer: AppLifecycle.Timer)] = []

  init(timings: AppTimings = AppTimings(), modes: [String] = []) throws {
    let bundleID = try BundleID("com.example.app")
    life = AppLifecycle(
      bundleID: bundleID, timings: timings, record: AppRecord(bundleID: bundleID.rawValue, backgroundTime: 30))
    life.backgroundModes = modes
    life.started(4242)
  }

  var moment: AppLifecycle.Moment { AppLifecycle.Moment(uptime: clock, date: Date(timeIntervalSince1970: clock)) }

  /// What the lifecycle asked for, timers kept aside to be fired by `wait`.
  private mutating func take(_ effects: [AppLifecycle.Effect]) -> [AppLifecycle.Effect] {
    effects.filter { effect in
      guard case .schedule(let timer, let deadline) = effect else { return true }
      timers.append((deadline, timer))
      return false
    }
  }

  /// Sends `kind` with `argument` (as the command line and the old wire form give it) now: the
  /// reply, and the effects it had (timers aside). An argument that is not one of `kind`'s is
  /// refused as the supervisor refuses it, before the lifecycle sees it.
  mutating func ask(_ kind: AppRequest.Kind, _ argument: String? = nil) -> (AppReply, [AppLifecycle.Effect]) {
    let request: AppRequest
    do {
      request = try AppRequest(parsing: kind, argument)
    } catch {
      return (.refused(error), [])
    }
    let (reply, effects) = life.handle(request, at: moment)
    return (reply, take(effects))
  }

  /// Sends `kind`; records an issue unless it is carried out. Returns the effects.
  @discardableResult
  mutating func expectOK(
    _ kind: AppRequest.Kind, _ argument: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
  ) -> [AppLifecycle.Effect] {
    let (reply, effects) = ask(kind, argument)
    #expect(reply.error == nil, "\(kind): \(reply.error?.message ?? "")", sourceLocation: sourceLocation)
    return effects
  }

  /// Lets `seconds` pass, firing every timer due meanwhile at its deadline (earliest first, then
  /// in the order planned); returns what they did.
  mutating func wait(_ seconds: Double) -> [AppLifecycle.Effect] {
    let end = clock + seconds
    var done: [AppLifecycle.Effect] = []
    while let next = timers.indices.filter({ timers[$0].deadline <= end }).min(by: {
      (timers[$0].deadline, $0) < (timers[$1].deadline, $1)
    }) {
      let (deadline, timer) = timers.remove(at: next)
      clock = max(clock, deadline)
      done += take(life.fire(timer, at: moment))
    }
    clock = end
    return done
  }

  /// The app exits with `status` now (killed by `signal`, saying `crashedThread` crashed).
  mutating func exit(
    _ status: Int32, signal: Int32? = nil, crashedThread: (number: Int, name: String?)? = nil
  ) -> [AppLifecycle.Effect] {
    take(life.exited(status, signal: signal, crashedThread: crashedThread, at: moment))
  }
}

/// The events among `effects`.
private func events(_ effects: [AppLifecycle.Effect]) -> [AppEvent] {
  effects.compactMap { if case .send(let line) = $0 { line.event } else { nil } }
}

/// The crash report among `effects`, if any.
private func crashReport(_ effects: [AppLifecycle.Effect]) -> AppCrashReport? {
  effects.lazy.compactMap { if case .writeCrashReport(let report) = $0 { report } else { nil } }.first
}

/// Whether `effects` are the watchdog's kill: a crash report, the record saved, the processes killed.
private func isKill(_ effects: [AppLifecycle.Effect]) -> Bool {
  effects.count == 3 && crashReport(effects) != nil && effects[1] == .save && effects[2] == .kill
}

@Suite("App lifecycle, without processes")
struct AppLifecycleStateTests {
  @Test func anAppWithNothingToFinishIsSuspendedAfterItsGrace() throws {
    var app = try Simulation()
    #expect(events(app.expectOK(.background)) == [.didEnterBackground])
    #expect(app.life.record.state == .background)
    #expect(app.life.record.backgroundSince == app.moment.date)
    #expect(app.wait(4.9).isEmpty)
    #expect(app.ask(.timeRemaining).0 == .ok("25.100"))
    #expect(app.wait(0.1) == [.suspend, .save])
    #expect(app.life.record.state == .suspended)
    #expect(app.wait(3_600).isEmpty)
    #expect(app.ask(.background).0.error?.message.contains("already in the background") == true)
  }

  @Test func openTasksAreWarnedThenKilledWithACrashReportWhenTheTimeRunsOut() throws {
    var app = try Simulation()
    app.expectOK(.background)
    #expect(app.ask(.beginTask, "upload").0 == .ok("1"))
    #expect(app.ask(.beginTask, "").0 == .ok("2"))
    #expect(app.wait(24.9).isEmpty)
    let warnings = app.wait(0.1)
    #expect(events(warnings) == [.backgroundTaskWillExpire, .backgroundTaskWillExpire])
    #expect(warnings.compactMap { if case .send(let line) = $0 { line.task?.id } else { nil } } == [1, 2])
    let end = app.wait(5)
    #expect(isKill(end), "\(end)")
    let report = try #require(crashReport(end))
    #expect(report.openTasks == ["upload", ""] && report.pid == 4242)
    #expect(report.terminationReason == AppCrashReport.watchdog)
    #expect(report.reason.contains("background time (30 s) ran out"), "\(report.reason)")
    #expect(app.life.terminating)
    #expect(app.ask(.endTask, "1").0.error?.message.contains("terminating") == true)
    #expect(app.ask(.timeRemaining).0 == .ok("0.000"))
  }

  /// An app once began background tasks without end, with names up to a request line long: its
  /// record passed 1 MiB, after which `app status` said no app was launched, and its crash
  /// report was 1.2 MB. Open tasks are capped and names cut.
  @Test func anAppBeginsAtMostAThousandTasksWithNamesOfAtMost256Bytes() throws {
    var app = try Simulation()
    let long = String(repeating: "é", count: 40_000)
    #expect(app.ask(.beginTask, long).0 == .ok("1"))
    #expect(app.life.record.tasks[0].name == String(repeating: "é", count: 128))
    for n in 2...AppLifecycle.maximumOpenTasks { #expect(app.ask(.beginTask, long).0 == .ok(String(n))) }
    let refused = app.ask(.beginTask, "one more").0
    #expect(refused.error?.message.contains("1000 background tasks open already") == true, "\(refused)")
    #expect(try JSONEncoder().encode(app.life.record).count < 400_000)
    // Ending one makes room again.
    app.expectOK(.endTask, "7")
    #expect(app.ask(.beginTask, "again").0 == .ok("1001"))
  }

  @Test func endingTheLastTaskCancelsTheKillAndTheAppIsSuspendedInstead() throws {
    var app = try Simulation()
    app.expectOK(.background)
    app.expectOK(.beginTask, "sync")
    #expect(app.wait(10).isEmpty)
    app.expectOK(.endTask, "1")
    // Its grace (5 s after entering the background) is over: the suspension comes at once.
    #expect(app.wait(0) == [.suspend, .save])
    #expect(app.wait(3_600).isEmpty)
  }

  @Test func aTaskEndedTwiceOrNeverBegunIsRefused() throws {
    var app = try Simulation()
    app.expectOK(.beginTask, "a")
    app.expectOK(.endTask, "1")
    for text in ["1", "2", "-1", "1e99", "", "one", String(repeating: "9", count: 400)] {
      #expect(app.ask(.endTask, text).0.error?.message.contains("is not an open background task") == true, "\(text)")
    }
  }

  @Test func aTaskBegunWithNoBackgroundTimeLeftIsRefused() throws {
    var timings = AppTimings()
    timings.backgroundTime = 10
    var app = try Simulation(timings: timings)
    app.expectOK(.background)
    // A fetch under way keeps the app from being suspended; its own time (30 s) outlasts the 10.
    app.expectOK(.fetch)
    #expect(app.wait(10.5).isEmpty)
    #expect(app.ask(.beginTask, "late").0.error?.message.contains("no background time left") == true)
  }

  @Test func theForegroundResumesASuspendedAppAndItsOldDeadlinesDoNothing() throws {
    var app = try Simulation()
    app.expectOK(.background)
    app.expectOK(.beginTask, "a")
    app.expectOK(.endTask, "1")
    #expect(app.wait(5) == [.suspend, .save])
    let foreground = app.expectOK(.foreground)
    #expect(foreground == [.send(.init(event: .willEnterForeground)), .resume, .save])
    #expect(app.life.record.state == .active && app.life.record.backgroundSince == nil)
    #expect(app.ask(.timeRemaining).0 == .ok("inf"))
    // The task's warning and kill, planned for 25 s and 30 s, no longer apply.
    #expect(app.wait(3_600).isEmpty)
    #expect(app.ask(.foreground).0.error?.message.contains("already in the foreground") == true)
    app.expectOK(.background)
    #expect(app.wait(5) == [.suspend, .save])
  }

  @Test func aFetchWakesASuspendedAppAndKillsItWhenItIsNotCompletedInTime() throws {
    var app = try Simulation()
    app.expectOK(.background)
    _ = app.wait(5)
    #expect(app.expectOK(.fetch) == [.resume, .send(.init(event: .performFetch)), .save])
    #expect(app.life.record.state == .background)
    #expect(app.ask(.fetch).0.error?.message.contains("already under way") == true)
    #expect(app.wait(29.9).isEmpty)
    let timeout = app.wait(0.1)
    #expect(isKill(timeout), "\(timeout)")
    #expect(crashReport(timeout)?.reason.contains("fetch did not complete within 30 s") == true)
    #expect(app.life.record.lastFetch?.result == "timedOut")
  }

  @Test func aCompletedFetchIsRecordedAndTheAppIsSuspendedAgain() throws {
    var app = try Simulation()
    app.expectOK(.background)
    _ = app.wait(5)
    app.expectOK(.fetch)
    _ = app.wait(2)
    #expect(app.ask(.fetchCompleted, "lots").0.error?.message.contains("'lots' is not a fetch result") == true)
    app.expectOK(.fetchCompleted, "newData")
    #expect(app.life.record.lastFetch == AppRecord.Fetch(result: "newData", duration: 2, time: app.moment.date))
    #expect(app.ask(.fetchCompleted, "newData").0.error?.message.contains("No background fetch") == true)
    // Woken 2 s ago, it has 3 s of its grace left; the fetch's timeout no longer applies.
    #expect(app.wait(2.9).isEmpty)
    #expect(app.wait(0.1) == [.suspend, .save])
    #expect(app.wait(3_600).isEmpty)
  }

  @Test func theSystemFetchesOnlyForAnAppThatAskedAndDeclaredFetch() throws {
    // Declared, never asked (iOS's default interval is never).
    var declared = try Simulation(modes: ["fetch"])
    declared.expectOK(.background)
    #expect(!events(declared.wait(86_400)).contains(.performFetch))

    // Asked, not declared: told why nothing will come.
    var undeclared = try Simulation()
    let (reply, _) = undeclared.ask(.setFetchInterval, "0")
    #expect(reply.value?.contains("does not list fetch in UIBackgroundModes") == true)
    undeclared.expectOK(.background)
    #expect(!events(undeclared.wait(86_400)).contains(.performFetch))

    // Both: every fetchMinimum (15 minutes), however short the interval asked for.
    var app = try Simulation(modes: ["fetch"])
    #expect(app.ask(.setFetchInterval, "0").0 == .ok())
    app.expectOK(.background)
    #expect(!events(app.wait(899)).contains(.performFetch))
    let first = app.wait(1)
    #expect(first.first == .resume && events(first) == [.performFetch], "\(first)")
    app.expectOK(.fetchCompleted, "noData")
    #expect(events(app.wait(900)) == [.performFetch])
  }

  @Test func aScheduledFetchDueInTheForegroundWaitsForTheNextPeriod() throws {
    var app = try Simulation(modes: ["fetch"])
    app.expectOK(.setFetchInterval, "1800")
    #expect(app.wait(1_800).isEmpty)
    app.expectOK(.background)
    #expect(events(app.wait(1_799)) == [])
    #expect(events(app.wait(1)) == [.performFetch])
    app.expectOK(.fetchCompleted, "newData")
    app.expectOK(.setFetchInterval, "never")
    #expect(!events(app.wait(86_400)).contains(.performFetch))
  }

  @Test func aFetchIntervalThatIsNoNumberOfSecondsIsRefused() throws {
    var app = try Simulation(modes: ["fetch"])
    for text in ["nan", "-1", "inf", "-inf", "", "soon", "1e400"] {
      #expect(app.ask(.setFetchInterval, text).0.error?.message.contains("is not a fetch interval") == true, "\(text)")
    }
  }

  @Test func sessionEventsWakeASuspendedAppAndHoldOffItsSuspensionUntilAnswered() throws {
    var app = try Simulation()
    app.expectOK(.background)
    _ = app.wait(5)
    let posted = app.expectOK(.sessionEvents, "com.example.bg")
    #expect(
      posted == [.resume, .send(.init(event: .handleEventsForBackgroundURLSession, session: "com.example.bg")), .save])
    #expect(app.wait(29).isEmpty)
    #expect(app.ask(.eventsHandled, "com.example.other").0.error?.message.contains("No handleEvents") == true)
    app.expectOK(.eventsHandled, "com.example.bg")
    #expect(app.wait(0) == [.suspend, .save])
    #expect(app.ask(.eventsHandled, "com.example.bg").0.error != nil)
    #expect(app.wait(3_600).isEmpty)
  }

  @Test func sessionEventsLeftUnansweredKillTheAppWhenItsBackgroundTimeEnds() throws {
    var app = try Simulation()
    app.expectOK(.background)
    app.expectOK(.sessionEvents, "s1")
    // Posted again before the answer: still one wait, from the first post.
    _ = app.wait(10)
    app.expectOK(.sessionEvents, "s1")
    let end = app.wait(20)
    #expect(isKill(end), "\(end)")
    #expect(crashReport(end)?.reason.contains("for session 's1' within 30 s") == true)
    #expect(app.ask(.sessionEvents, "").0.error != nil)
  }

  @Test func sessionEventsInTheForegroundAreOnlyDelivered() throws {
    var app = try Simulation()
    let posted = app.expectOK(.sessionEvents, "s1")
    #expect(events(posted) == [.handleEventsForBackgroundURLSession])
    #expect(app.wait(3_600).isEmpty)
    app.expectOK(.eventsHandled, "s1")
  }

  @Test func terminateKillsASuspendedAppAtOnceAndARunningOneAfterItsGrace() throws {
    var suspended = try Simulation()
    suspended.expectOK(.background)
    _ = suspended.wait(5)
    #expect(suspended.expectOK(.terminate, "user") == [.save, .kill])
    #expect(suspended.life.record.forceQuit)

    var running = try Simulation()
    #expect(running.expectOK(.terminate) == [.save, .send(.init(event: .willTerminate))])
    #expect(!running.life.record.forceQuit)
    #expect(running.wait(1.9).isEmpty)
    #expect(running.wait(0.1) == [.kill])
    for kind in [AppRequest.Kind.background, .foreground, .fetch, .terminate, .beginTask, .sessionEvents] {
      #expect(running.ask(kind, "1").0.error?.message.contains("is terminating") == true, "\(kind)")
    }
    #expect(running.ask(.timeRemaining).0 == .ok("inf"))
  }

  @Test func theWatchdogKillsAnAppWhoseMainThreadDoesNotAnswer() throws {
    var app = try Simulation()
    app.expectOK(.watchMainThread)
    _ = app.wait(19)
    app.expectOK(.mainThreadAnswered, "launch")
    #expect(app.ask(.mainThreadAnswered, "launch").0.error != nil)
    let background = app.expectOK(.background)
    #expect(background.first == .send(.init(event: .didEnterBackground, number: 1)))
    // An event not answered holds off the suspension, and then kills the app.
    let end = app.wait(10)
    #expect(isKill(end), "\(end)")
    #expect(crashReport(end)?.reason.contains("did not return from didEnterBackground within 10 s") == true)
  }

  @Test func theWatchdogDoesNotCountTheTimeTheAppIsSuspended() throws {
    var app = try Simulation()
    app.expectOK(.watchMainThread)
    app.expectOK(.mainThreadAnswered, "launch")
    app.expectOK(.background)
    app.expectOK(.mainThreadAnswered, "1")
    #expect(app.wait(5) == [.suspend, .save])
    let lock = app.take(protectedDataAvailable: false)
    #expect(lock == [.send(.init(event: .protectedDataWillBecomeUnavailable, number: 2))])
    #expect(app.wait(3_600).isEmpty)
    #expect(events(app.expectOK(.foreground)) == [.willEnterForeground])
    app.expectOK(.mainThreadAnswered, "3")
    // Running again, it has the watchdog's time to answer event 2, which it does not.
    let end = app.wait(10)
    #expect(isKill(end), "\(end)")
    #expect(crashReport(end)?.reason.contains("protectedDataWillBecomeUnavailable") == true)
  }

  @Test func anUncaughtExceptionIsReportedOnlyWhenTheAppDiesOfSIGABRT() throws {
    var aborted = try Simulation()
    aborted.expectOK(.uncaughtException, "NSInvalidArgumentException: " + String(repeating: "x", count: 10_000))
    let report = try #require(crashReport(aborted.exit(128 + SIGABRT, signal: SIGABRT)))
    #expect(report.terminationReason == AppCrashReport.uncaughtException)
    #expect(report.reason.count == 4096 && report.reason.hasPrefix("NSInvalidArgumentException: "))

    var exited = try Simulation()
    exited.expectOK(.uncaughtException, "claimed")
    #expect(crashReport(exited.exit(0)) == nil)
    // Exiting with code 134 is no SIGABRT.
    var coded = try Simulation()
    coded.expectOK(.uncaughtException, "claimed")
    #expect(crashReport(coded.exit(128 + SIGABRT)) == nil)
    // Another crash signal: the app's claim of an exception is not its reason.
    var segfaulted = try Simulation()
    segfaulted.expectOK(.uncaughtException, "claimed")
    #expect(crashReport(segfaulted.exit(128 + SIGSEGV, signal: SIGSEGV))?.reason.contains("claimed") == false)
  }

  /// Every crash signal gets a report with iOS's exception type, its termination reason in words
  /// and the crashed thread the app named; a kill (SIGKILL, SIGTERM, SIGINT) and an exit get none.
  @Test(arguments: [
    (SIGSEGV, "EXC_BAD_ACCESS (SIGSEGV)", "Segmentation fault"), (SIGBUS, "EXC_BAD_ACCESS (SIGBUS)", "Bus error"),
    (SIGILL, "EXC_BAD_INSTRUCTION (SIGILL)", "Illegal instruction"),
    (SIGTRAP, "EXC_BREAKPOINT (SIGTRAP)", "Trace/BPT trap"), (SIGABRT, "EXC_CRASH (SIGABRT)", "Abort trap"),
    (SIGFPE, "EXC_ARITHMETIC (SIGFPE)", "Floating point exception"),
  ])
  func everyCrashSignalIsReportedWithItsExceptionTypeAndThread(signal: Int32, type: String, words: String) throws {
    var app = try Simulation()
    app.expectOK(.beginTask, "upload")
    let report = try #require(crashReport(app.exit(128 + signal, signal: signal, crashedThread: (2, "worker"))))
    #expect(report.terminationReason == type)
    #expect(report.reason == "Namespace SIGNAL, Code \(signal), \(words): \(signal)")
    #expect(report.crashedThread == 2 && report.crashedThreadName == "worker")
    #expect(report.openTasks == ["upload"] && report.pid == 4242)
    var unclaimed = try Simulation()
    let bare = try #require(crashReport(unclaimed.exit(128 + signal, signal: signal)))
    #expect(bare.crashedThread == nil && bare.crashedThreadName == nil)
  }

  @Test(arguments: [SIGKILL, SIGTERM, SIGINT, SIGHUP])
  func aKillIsNoCrash(signal: Int32) throws {
    var app = try Simulation()
    #expect(crashReport(app.exit(128 + signal, signal: signal)) == nil)
  }

  /// What the app's crash handler sends is a claim: only a record for the signal the app died of
  /// counts, its thread must be a number a process has, its name is escaped; garbage around it
  /// is skipped and a record cut short is none.
  @Test func aCrashRecordIsBelievedOnlyWithinItsBounds() {
    let real = CrashRecord(signal: SIGSEGV, thread: 3, name: Array("worker".utf8))
    let junk = Array("\u{1b}]0;owned\u{7}PFSCRAS".utf8)
    let otherSignal = CrashRecord(signal: SIGABRT, thread: 1, name: Array("x".utf8))
    var bytes = junk + real.bytes + otherSignal.bytes
    #expect(CrashRecord.records(in: bytes) == [real, otherSignal])
    let thread = AppCrashReport.crashedThread(in: CrashRecord.records(in: bytes), signal: SIGSEGV)
    #expect(thread?.number == 3 && thread?.name == "worker")
    #expect(AppCrashReport.crashedThread(in: CrashRecord.records(in: bytes), signal: SIGILL) == nil)
    bytes = real.bytes.dropLast()
    #expect(CrashRecord.records(in: bytes).isEmpty)

    for thread: Int32 in [-1, -5, 65_536, .max] {
      let record = CrashRecord(signal: SIGSEGV, thread: thread, name: Array("x".utf8))
      #expect(AppCrashReport.crashedThread(in: [record], signal: SIGSEGV) == nil)
    }
    // A name of control characters and broken UTF-8 is shown escaped; one longer than a record
    // holds is cut to it; a length past the name is no record.
    let hostile = CrashRecord(signal: SIGSEGV, thread: 0, name: Array("\u{1b}[2J\n\"}".utf8) + [0xFF])
    let named = AppCrashReport.crashedThread(in: CrashRecord.records(in: hostile.bytes), signal: SIGSEGV)
    #expect(named?.name == "\\x1b[2J\\n\"}\u{FFFD}")
    let long = CrashRecord(signal: SIGSEGV, thread: 0, name: Array(repeating: 0x41, count: 500))
    #expect(CrashRecord.records(in: long.bytes).first?.name.count == 47)
    var overlong = real.bytes
    overlong[16] = 48
    #expect(CrashRecord.records(in: overlong).isEmpty)
  }

  @Test func theExitEndsEveryDeadlineAndEveryRequest() throws {
    var app = try Simulation(modes: ["fetch"])
    app.expectOK(.setFetchInterval, "0")
    app.expectOK(.background)
    app.expectOK(.beginTask, "a")
    app.expectOK(.fetch)
    #expect(app.exit(9) == [.save])
    #expect(app.life.record.state == .notRunning && app.life.record.tasks.isEmpty)
    #expect(app.life.record.lastExitStatus == 9 && app.life.record.pid == nil)
    #expect(app.wait(86_400).isEmpty)
    #expect(app.ask(.background).0.error?.message.contains("is terminating") == true)
    #expect(app.take(protectedDataAvailable: true).isEmpty)
  }
}

extension Simulation {
  /// Protected data became available or not, now: the effects.
  fileprivate mutating func take(protectedDataAvailable available: Bool) -> [AppLifecycle.Effect] {
    take(life.protectedData(available: available, at: moment))
  }
}

/// Remote notifications (`protfs app push`), on the simulated clock.
@Suite("Remote notifications, without processes")
struct AppPushStateTests {
  static let silent = #"{"aps":{"content-available":1},"url":"https://example.com/new"}"#
  static let visible = #"{"aps":{"alert":"Hello"}}"#

  @Test func aSilentPushWakesASuspendedAppAndHoldsOffItsSuspensionUntilCompleted() throws {
    var app = try Simulation()
    app.expectOK(.background)
    #expect(app.wait(5) == [.suspend, .save])
    let pushed = app.expectOK(.push, Self.silent)
    let line = AppLifecycle.EventLine(
      event: .didReceiveRemoteNotification,
      userInfo: #"{"aps":{"content-available":1},"url":"https://example.com/new"}"#)
    #expect(pushed == [.resume, .send(line), .save], "\(pushed)")
    #expect(app.life.record.state == .background)
    #expect(app.ask(.push, Self.silent).0.error?.message.contains("still being handled") == true)
    #expect(app.wait(29).isEmpty)
    #expect(app.ask(.pushCompleted, "lots").0.error?.message.contains("'lots' is not a result") == true)
    app.expectOK(.pushCompleted, "newData")
    #expect(app.ask(.pushCompleted, "newData").0.error?.message.contains("No remote notification") == true)
    #expect(app.wait(0) == [.suspend, .save])
    #expect(app.wait(3_600).isEmpty)
  }

  @Test func aSilentPushLeftUncompletedKillsTheAppWhenItsTimeEnds() throws {
    var app = try Simulation()
    app.expectOK(.background)
    app.expectOK(.push, Self.silent)
    #expect(app.wait(29.9).isEmpty)
    let end = app.wait(0.1)
    #expect(isKill(end), "\(end)")
    #expect(crashReport(end)?.reason.contains("didReceiveRemoteNotification within 30 s") == true)
  }

  @Test func aVisiblePushReachesOnlyAnActiveApp() throws {
    var app = try Simulation()
    #expect(events(app.expectOK(.push, Self.visible)) == [.didReceiveRemoteNotification])
    // In the foreground nothing waits for the handler: no kill when the time is up.
    let later = app.wait(3_600)
    #expect(!later.contains(.kill) && crashReport(later) == nil, "\(later)")
    app.expectOK(.background)
    _ = app.wait(5)
    let (reply, effects) = app.ask(.push, Self.visible)
    #expect(reply == .ok("shown") && effects.isEmpty, "\(reply) \(effects)")
    #expect(app.life.record.state == .suspended)
  }

  @Test func aPayloadThatIsNoAPNsPayloadIsRefused() throws {
    var app = try Simulation()
    let cases = [
      "": "is not JSON", "nope": "is not JSON", "[1]": "needs an \"aps\" dictionary",
      #"{"aps":1}"#: "needs an \"aps\" dictionary", #"{"x":{}}"#: "needs an \"aps\" dictionary",
      #"{"aps":{},"pad":""# + String(repeating: "x", count: 5_000) + #""}"#: "at most 4096 bytes",
    ]
    for (payload, message) in cases {
      let (reply, effects) = app.ask(.push, payload)
      #expect(reply.error?.message.contains(message) == true && effects.isEmpty, "\(payload.prefix(40)): \(reply)")
    }
  }

  @Test func theThrottleHoldsSilentPushesOverItsBudgetAndDeliversTheNewestLater() throws {
    var timings = AppTimings()
    timings.pushLimit = 2
    var app = try Simulation(timings: timings)
    app.expectOK(.background)
    for _ in 0..<2 {
      #expect(events(app.expectOK(.push, Self.silent)) == [.didReceiveRemoteNotification])
      app.expectOK(.pushCompleted, "newData")
      _ = app.wait(60)
    }
    // The third and fourth within the hour are held; only the newest is delivered, once the first
    // delivery is an hour old.
    #expect(app.ask(.push, Self.silent) == (.ok("throttled"), []))
    let newest = #"{"aps":{"content-available":1},"n":4}"#
    #expect(app.ask(.push, newest).0 == .ok("throttled"))
    // Visible notifications are not throttled.
    #expect(app.ask(.push, Self.visible).0 == .ok("shown"))
    let later = app.wait(3_600)
    let delivered = later.compactMap { effect -> String? in
      guard case .send(let line) = effect, line.event == .didReceiveRemoteNotification else { return nil }
      return line.userInfo
    }
    #expect(delivered == [newest], "\(later)")
  }

  @Test func withoutALimitEveryPushIsDelivered() throws {
    var app = try Simulation()
    for _ in 0..<20 {
      #expect(events(app.expectOK(.push, Self.silent)) == [.didReceiveRemoteNotification])
      app.expectOK(.pushCompleted, "noData")
    }
  }

  @Test func onlyTheNumberOneMakesAPushSilent() throws {
    for (aps, silent) in [
      #"{"content-available":1}"#: true, #"{"content-available":1.0}"#: true, #"{"content-available":true}"#: false,
      #"{"content-available":"1"}"#: false, #"{"content-available":0}"#: false, "{}": false,
    ] {
      let notification = try RemoteNotification(payload: Data(#"{"aps":\#(aps)}"#.utf8))
      #expect(notification.isContentAvailable == silent, "\(aps)")
    }
  }
}

/// BGTaskScheduler's rules (`protfs app refresh`, `process`, `expire` and the `bgtask-*` helpers),
/// on the simulated clock.
@Suite("Background tasks, without processes")
struct AppBackgroundTaskStateTests {
  static let refresh = "com.example.refresh"
  static let cleanup = "com.example.cleanup"

  /// An app that permits both identifiers and declares `modes`, with their launch handlers
  /// registered (unless `registering` is false).
  fileprivate func app(modes: [String] = ["fetch", "processing"], registering: Bool = true) throws -> Simulation {
    var app = try Simulation(modes: modes)
    let identifiers = [Self.refresh, Self.cleanup] + (0..<12).map { "com.example.p\($0)" }
    app.life.permittedTaskIdentifiers = identifiers
    if registering { for identifier in identifiers { app.expectOK(.bgTaskRegister, identifier) } }
    return app
  }

  func submit(_ identifier: String, _ type: BackgroundTaskRequest.Kind, earliest: Date? = nil) -> String {
    BackgroundTaskMessage(identifier: identifier, type: type, earliestBeginDate: earliest).json
  }

  func launch(_ type: BackgroundTaskRequest.Kind, _ identifier: String? = nil, now: Bool = false) -> String {
    BackgroundTaskMessage(identifier: identifier, type: type, now: now ? true : nil).json
  }

  func completion(_ identifier: String, _ success: Bool) -> String {
    BackgroundTaskMessage(identifier: identifier, success: success).json
  }

  @Test func registrationNeedsAPermittedIdentifierOnceAndBeforeTheLaunchFinished() throws {
    var app = try app(registering: false)
    // A request before its launch handler is registered is iOS's exception.
    let early = app.ask(.bgTaskSubmit, submit(Self.refresh, .refresh)).0
    #expect(early.code == "programmingError" && early.error?.message.contains("No launch handler registered") == true)
    #expect(app.ask(.bgTaskRegister, "com.example.other").0.code == "notPermitted")
    app.expectOK(.bgTaskRegister, Self.refresh)
    let twice = app.ask(.bgTaskRegister, Self.refresh).0
    #expect(twice.code == "programmingError" && twice.error?.message.contains("already been registered") == true)
    app.expectOK(.watchMainThread)
    app.expectOK(.mainThreadAnswered, "launch")
    let late = app.ask(.bgTaskRegister, Self.cleanup).0
    #expect(
      late.code == "programmingError" && late.error?.message.contains("before application finishes launching") == true)
  }

  @Test func aSubmissionNeedsThePermittedIdentifierAndTheModeAndRespectsTheLimits() throws {
    var app = try app(modes: ["fetch"])
    #expect(app.ask(.bgTaskSubmit, submit("com.example.other", .refresh)).0.code == "notPermitted")
    let noMode = app.ask(.bgTaskSubmit, submit(Self.cleanup, .processing)).0
    #expect(
      noMode.code == "notPermitted" && noMode.error?.message.contains("'processing' in the UIBackgroundModes") == true)
    app.expectOK(.bgTaskSubmit, submit(Self.refresh, .refresh))
    // The same identifier replaces its request; another refresh is one too many.
    app.expectOK(.bgTaskSubmit, submit(Self.refresh, .refresh, earliest: Date(timeIntervalSince1970: 5_000)))
    #expect(app.life.record.taskRequests.map(\.earliestBeginDate) == [Date(timeIntervalSince1970: 5_000)])
    #expect(app.ask(.bgTaskSubmit, submit(Self.cleanup, .refresh)).0.code == "tooManyPendingTaskRequests")
    #expect(app.ask(.bgTaskSubmit, "{nope").0.error?.message.contains("not valid") == true)
    #expect(
      app.ask(.bgTaskSubmit, #"{"identifier":"a b","type":"refresh"}"#).0.error?.message.contains("not valid") == true)

    var processing = try self.app()
    for index in 0..<10 { processing.expectOK(.bgTaskSubmit, submit("com.example.p\(index)", .processing)) }
    #expect(
      processing.ask(.bgTaskSubmit, submit("com.example.p10", .processing)).0.code == "tooManyPendingTaskRequests")
    processing.expectOK(.bgTaskCancel, "com.example.p3")
    processing.expectOK(.bgTaskSubmit, submit("com.example.p10", .processing))
    #expect(BackgroundTaskMessage.requests(processing.expectOKValue(.bgTaskRequests)).count == 10)
    processing.expectOK(.bgTaskCancel)
    #expect(processing.life.record.taskRequests.isEmpty)
  }

  @Test func aRefreshWakesASuspendedAppWhenDueAndItsCompletionLetsItBeSuspendedAgain() throws {
    var app = try app()
    app.expectOK(.bgTaskSubmit, submit(Self.refresh, .refresh, earliest: app.moment.date.addingTimeInterval(900)))
    app.expectOK(.background)
    #expect(app.wait(5) == [.suspend, .save])
    let early = app.ask(.bgTaskLaunch, launch(.refresh)).0
    #expect(
      early.error?.message.contains("may not begin before") == true && early.error?.message.contains("--now") == true)
    #expect(app.ask(.bgTaskLaunch, launch(.processing)).0.error?.message.contains("No processing task request") == true)
    _ = app.wait(900)
    let (reply, effects) = app.ask(.bgTaskLaunch, launch(.refresh))
    #expect(reply == .ok(Self.refresh))
    let line = AppLifecycle.EventLine(event: .bgTaskLaunch, identifier: Self.refresh, taskType: .refresh)
    #expect(effects == [.resume, .send(line), .save], "\(effects)")
    #expect(app.life.record.taskRequests.isEmpty && app.life.record.state == .background)
    // Running, the app is not suspended; completed, it is.
    #expect(app.wait(20).isEmpty)
    app.expectOK(.bgTaskCompleted, completion(Self.refresh, true))
    #expect(app.life.record.lastBackgroundTask?.result == "success")
    #expect(app.ask(.bgTaskCompleted, completion(Self.refresh, true)).0.error?.message.contains("is running") == true)
    #expect(app.wait(0) == [.suspend, .save])
    #expect(app.wait(3_600).isEmpty)
  }

  @Test func aTaskNotCompletedIsExpiredThenKilledWithACrashReport() throws {
    var app = try app()
    app.expectOK(.bgTaskSubmit, submit(Self.refresh, .refresh, earliest: app.moment.date.addingTimeInterval(900)))
    app.expectOK(.background)
    app.expectOK(.bgTaskLaunch, launch(.refresh, Self.refresh, now: true))
    #expect(
      app.ask(.bgTaskLaunch, launch(.refresh, now: true)).0.error?.message.contains("No refresh task request") == true)
    #expect(app.wait(24.9).isEmpty)
    #expect(events(app.wait(0.1)) == [.bgTaskExpiration])
    let end = app.wait(5)
    #expect(isKill(end), "\(end)")
    #expect(crashReport(end)?.reason.contains("'\(Self.refresh)' was not completed") == true)
    #expect(app.life.record.lastBackgroundTask?.result == "timedOut")
  }

  @Test func anExpirationOnDemandLeavesAFifthOfTheTimeToComplete() throws {
    var app = try app()
    app.expectOK(.bgTaskSubmit, submit(Self.cleanup, .processing))
    app.expectOK(.background)
    app.expectOK(.bgTaskLaunch, launch(.processing))
    #expect(app.wait(60).isEmpty)
    #expect(app.ask(.bgTaskExpire, "com.example.none").0.error?.message.contains("No background task") == true)
    let expired = app.expectOK(.bgTaskExpire, Self.cleanup)
    #expect(events(expired) == [.bgTaskExpiration])
    #expect(app.wait(4.9).isEmpty)
    #expect(isKill(app.wait(0.1)))
  }

  @Test func anAppCompletedAfterItsExpirationIsNotKilled() throws {
    var app = try app()
    app.expectOK(.bgTaskSubmit, submit(Self.cleanup, .processing))
    app.expectOK(.background)
    app.expectOK(.bgTaskLaunch, launch(.processing))
    app.expectOK(.bgTaskExpire, Self.cleanup)
    app.expectOK(.bgTaskCompleted, completion(Self.cleanup, false))
    #expect(app.life.record.lastBackgroundTask?.result == "failure")
    let later = app.wait(3_600)
    #expect(!isKill(later) && crashReport(later) == nil, "\(later)")
    #expect(app.life.record.state == .suspended)
  }

  @Test func theAppAsksOnlyItsOwnAndTheSystemRunsAndExpires() {
    for kind in [AppRequest.Kind.bgTaskRegister, .bgTaskSubmit, .bgTaskCancel, .bgTaskRequests, .bgTaskCompleted] {
      #expect(kind.isTheAppsOwn, "\(kind)")
    }
    #expect(!AppRequest.Kind.bgTaskLaunch.isTheAppsOwn && !AppRequest.Kind.bgTaskExpire.isTheAppsOwn)
  }
}

extension Simulation {
  /// Sends `kind`; records an issue unless it is carried out. Returns the reply's value.
  fileprivate mutating func expectOKValue(
    _ kind: AppRequest.Kind, _ argument: String? = nil, sourceLocation: SourceLocation = #_sourceLocation
  ) -> String {
    let (reply, _) = ask(kind, argument)
    #expect(reply.error == nil, "\(kind): \(reply.error?.message ?? "")", sourceLocation: sourceLocation)
    return reply.value ?? ""
  }
}

/// The background modes that keep an app running (`audio`, `location`), on the simulated clock.
@Suite("Audio and location, without processes")
struct AppBackgroundModeStateTests {
  @Test func playingAudioKeepsAnAppWithTheModeRunningAndStoppingLetsItBeSuspended() throws {
    var app = try Simulation(modes: ["audio"])
    app.expectOK(.audio, "play")
    app.expectOK(.background)
    #expect(app.wait(3_600).isEmpty)
    #expect(app.life.record.state == .background)
    app.expectOK(.audio, "stop")
    #expect(app.wait(5) == [.suspend, .save])
  }

  @Test func withoutTheModeAudioKeepsNothingRunningAndTheReplySaysSo() throws {
    var app = try Simulation()
    let (reply, _) = app.ask(.audio, "play")
    #expect(reply.error == nil && reply.value?.contains("does not list audio") == true, "\(reply)")
    app.expectOK(.background)
    #expect(app.wait(5) == [.suspend, .save])
    #expect(app.ask(.audio, "loud").0.error?.message.contains("not play or stop") == true)
  }

  @Test func backgroundLocationUpdatesKeepTheAppRunningAndLocationsReachOnlyARunningUpdatingApp() throws {
    var app = try Simulation(modes: ["location"])
    #expect(app.ask(.location, "48.8584,2.2945").0 == .ok("not updating"))
    app.expectOK(.locationUpdates, "foreground")
    let delivered = app.expectOK(.location, "48.8584,2.2945")
    let coordinate = try #require(AppLifecycle.Coordinate("48.8584,2.2945"))
    #expect(delivered == [.send(AppLifecycle.EventLine(event: .didUpdateLocations, coordinate: coordinate))])
    // Foreground updates keep nothing running: suspended, the app gets no location.
    app.expectOK(.background)
    #expect(app.wait(5) == [.suspend, .save])
    #expect(app.ask(.location, "1,2") == (.ok("suspended"), []))
    app.expectOK(.foreground)
    app.expectOK(.locationUpdates, "background")
    app.expectOK(.background)
    #expect(app.wait(3_600).isEmpty)
    #expect(events(app.expectOK(.location, "-33.8568, 151.2153")) == [.didUpdateLocations])
    app.expectOK(.locationUpdates, "stop")
    #expect(app.wait(0) == [.suspend, .save])
  }

  @Test func aLocationThatIsNoLocationIsRefused() throws {
    var app = try Simulation()
    for text in ["", "1", "91,0", "0,181", "a,b", "1,2,3", "nan,0", String(repeating: "1", count: 100) + ",0"] {
      #expect(app.ask(.location, text).0.error?.message.contains("is not a location") == true, "\(text)")
    }
    #expect(!AppRequest.Kind.location.isTheAppsOwn && AppRequest.Kind.audio.isTheAppsOwn)
  }
}
