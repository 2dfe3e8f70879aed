import Foundation
import ProtFSTestSupport
import Testing

/// A prewarmed app as the attacker (issue 61): it is held frozen with everything it started, is
/// ended through its cgroup by terminate and by every path that gives up on it, and no wait on it
/// is unbounded.
extension AppPrewarmTests {
  /// Held before `UIApplicationMain`, the app is suspended as iOS suspends a prewarmed process: it,
  /// its child in a session of its own and that child's child stop ticking. `terminate` ends all
  /// three, signals ignored, and returns once they are gone.
  @Test func aHeldAppIsFrozenWithAllItStartedAndTerminateEndsThemAll() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let (program, ticks) = try await HostileApp.build(in: d)
    let (status, output) = try await Self.prewarm(d, [program, "held", ticks])
    #expect(status == 0, "\(output)")
    let processes = await HostileApp.waitForAllThree(ticks)
    defer { HostileApp.kill(processes) }
    #expect(processes.count == 3, "\(processes)")
    #expect(await d.waitUntilFrozen(), "\(d.record())")
    // Frozen: over a quarter of a second (a dozen ticks' time) no count moves.
    let before = HostileApp.counts(ticks)
    try await Task.sleep(for: .milliseconds(250))
    #expect(HostileApp.counts(ticks) == before, "the held app ran on")
    let ended = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(ended.status == 0, "\(ended)")
    #expect(HostileApp.running(processes).isEmpty, "still running after terminate: \(HostileApp.running(processes))")
    #expect(d.record()["state"] as? String == "notRunning")
  }

  /// An app that never reaches `UIApplicationMain` is refused for a prewarm, and ended: it, and
  /// what it started, are gone when `prewarm` says so.
  @Test func anAppThatIsNeverHeldIsEndedWhenThePrewarmGivesUp() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let (program, ticks) = try await HostileApp.build(in: d)
    let (status, output) = try await Self.prewarm(d, [program, "never", ticks])
    let processes = HostileApp.processes(ticks)
    defer { HostileApp.kill(processes) }
    #expect(status == 1 && output.contains("did not reach UIApplicationMain"), "\(output)")
    #expect(Set(processes.map(\.role)) == ["main", "child", "grandchild"], "\(processes)")
    #expect(HostileApp.running(processes).isEmpty, "said ended, yet running: \(HostileApp.running(processes))")
    #expect(d.record()["state"] as? String == "notRunning", "\(d.record())")
  }

  /// A held app that closes its events socket cannot be handed its launch: the launch ends it
  /// and starts the app anew, instead of waiting for it forever.
  @Test func aHeldAppThatClosesItsSocketIsEndedAndTheLaunchStartsItAnew() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let (program, ticks) = try await HostileApp.build(in: d)
    let (status, output) = try await Self.prewarm(d, [program, "close", ticks])
    #expect(status == 0, "\(output)")
    let held = await HostileApp.waitForAllThree(ticks)
    defer { HostileApp.kill(held) }
    let app = try d.launch([], [program, "close", ticks])
    defer { app.stop() }
    let anew = await HostileApp.waitForAllThree(ticks, besides: held.map(\.pid))
    defer { HostileApp.kill(anew) }
    #expect(anew.count == 3, "the launch did not start the app anew: \(anew)")
    #expect(HostileApp.running(held).isEmpty, "the held app runs on: \(HostileApp.running(held))")
    let ended = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(ended.status == 0, "\(ended)")
    #expect(HostileApp.running(anew).isEmpty, "\(HostileApp.running(anew))")
    _ = await app.exit()
  }
}

/// `app terminate` returns once every process of the app is gone (issue 61), those it started in
/// sessions of their own and that ignore every signal too; `--no-wait` returns once it has asked.
@Suite struct AppTerminateTests {
  @Test func terminateReturnsOnceEveryProcessOfTheAppIsGone() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let (program, ticks) = try await HostileApp.build(in: d)
    let app = try d.launch([], [program, "never", ticks])
    defer { app.stop() }
    let processes = await HostileApp.waitForAllThree(ticks)
    defer { HostileApp.kill(processes) }
    #expect(processes.count == 3, "\(processes)")
    let ended = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(ended.status == 0 && ended.stdout.contains("Terminated \(AppDevice.bundle)"), "\(ended)")
    #expect(HostileApp.running(processes).isEmpty, "still running after terminate: \(HostileApp.running(processes))")
    #expect(d.record()["state"] as? String == "notRunning", "\(d.record())")
    // Free at once for the next launch.
    let again = try d.launch([], [program, "never", ticks])
    defer { again.stop() }
    let anew = await HostileApp.waitForAllThree(ticks, besides: processes.map(\.pid))
    defer { HostileApp.kill(anew) }
    #expect(anew.count == 3, "the next launch did not start: \(again.output)")
    let asked = try await d.protfs(["app", "terminate", AppDevice.bundle, "--no-wait"])
    #expect(asked.status == 0 && !asked.stdout.contains("Terminated"), "\(asked)")
    _ = await again.exit()
    #expect(HostileApp.running(anew).isEmpty, "\(HostileApp.running(anew))")
  }
}
