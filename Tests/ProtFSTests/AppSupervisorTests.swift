import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem
import Testing

/// What the supervisor decides for the app it runs (a real process standing for it): the record
/// it writes, the suspension, the watchdog, a prewarmed app, who may speak to it.
@Suite struct AppSupervisorTests {
  @Test func theRecordSaysTheAppRunsUnderThisSupervisorThenThatItEnded() throws {
    let app = try SupervisedApp()
    let running = try #require(try app.record())
    #expect(running.state == .active && running.pid == app.pid, "\(running)")
    #expect(running.supervisor == .current && running.supervisorSocket == app.supervisor.socketName)
    #expect(app.end() == 128 + SIGKILL)
    let ended = try #require(try app.record())
    #expect(ended.state == .notRunning && ended.pid == nil && ended.supervisorSocket == nil, "\(ended)")
    #expect(ended.lastExitStatus == 128 + SIGKILL)
  }

  @Test func aBackgroundedAppWithNothingToFinishIsToldThenSuspendedOnTime() throws {
    var timings = AppTimings()
    timings.suspendAfter = 0.05
    let app = try SupervisedApp(timings: timings)
    defer { app.end() }
    #expect(app.supervisor.perform(.background) == .ok())
    #expect(try app.record(becoming: .suspended)?.state == .suspended)
    #expect(app.eventLines().contains { $0.contains(#""event":"didEnterBackground""#) })
    #expect(app.supervisor.perform(.foreground) == .ok())
    #expect(try app.record()?.state == .active)
  }

  @Test func theWatchdogWritesACrashReportWhenTheMainThreadDoesNotAnswer() throws {
    var timings = AppTimings()
    timings.watchdog = 0.05
    let app = try SupervisedApp(timings: timings)
    #expect(app.supervisor.perform(.watchMainThread) == .ok())
    let reports = AppStore(device: app.device.device).crashReportsPath
    let deadline = Date().addingTimeInterval(10)
    while (try? FileManager.default.contentsOfDirectory(atPath: reports))?.isEmpty != false, Date() < deadline {
      usleep(5_000)
    }
    app.end()
    let crash = try #require(app.supervisor.lastCrash)
    #expect(crash.killed && crash.reason.contains("did not return from didFinishLaunchingWithOptions"), "\(crash)")
    #expect(crash.crashReport.map { FileManager.default.fileExists(atPath: $0) } == true)
  }

  @Test func anAnsweredLaunchIsNoCrash() throws {
    var timings = AppTimings()
    timings.watchdog = 0.05
    let app = try SupervisedApp(timings: timings)
    #expect(app.supervisor.perform(.watchMainThread) == .ok())
    #expect(app.supervisor.perform(.mainThreadAnswered(event: 0)) == .ok())
    usleep(300_000)  // past the watchdog's deadline (0.1 s for the launch): nothing may fire
    app.end()
    #expect(app.supervisor.lastCrash == nil)
  }

  @Test func aPrewarmedAppRefusesTheSystemsRequestsUntilLaunched() throws {
    let app = try SupervisedApp(prewarm: true)
    defer { app.end() }
    #expect(try app.record()?.state == .prewarmed)
    let refused = app.supervisor.perform(.background)
    #expect(refused.error?.message.contains("is prewarmed, not launched") == true, "\(refused)")
  }

  @Test(.enabled(if: SupervisedApp.canSpeakAsAnotherUser))
  func aUserThatIsNeitherTheAppsNorAControllerIsTurnedAway() throws {
    let app = try SupervisedApp(appUsers: [502])
    defer { app.end() }
    let reply = try JSONDecoder().decode(
      AppReply.self, from: Data(try app.send(#"{"kind":"timeRemaining"}"#, asUser: 501).utf8))
    #expect(reply.error?.message == "User 501 may not control the app com.example.supervised.", "\(reply)")
  }
}
