import Foundation
import ProtFSTestSupport
import Testing

/// Signals to `protfs app launch` reach the app however early they come: one sent while the
/// supervisor has started the app but not yet taken charge of it is held and passed on, never
/// lost (a supervisor that lost it would wait for the app forever) and never fatal to the
/// supervisor (which would leave the app's record and mount behind).
@Suite(.serialized, .timeLimit(.minutes(2))) struct AppLaunchSignalTests {
  @Test func aSIGTERMBeforeTheSupervisorTakesChargeReachesTheApp() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endAppAndSessionService() }
    // The supervisor waits, between starting the app and taking charge of it, until this test
    // closes the FIFO; the SIGTERM is sent in that window.
    var hold = try DebugHoldPoint(in: d.scripts)
    let running = try d.launch(
      [], ["/bin/sh", "-c", DebugHoldPoint.trappingProgram], environment: ["PROTFS_DEBUG_HOLD_LAUNCH": hold.path])
    defer { running.stop() }
    try await hold.expectSIGTERMWhileHeldReachesTheProgram(running)
    #expect(d.record()["state"] as? String == "notRunning", "\(d.record())")
  }
}
