import Foundation
import ProtFSTestSupport
import Testing

/// Signals to `protfs exec` and `protfs watch` count from the moment the command has started:
/// one that comes while exec has just started its program is passed on to it (not fatal to exec,
/// which would orphan the program, nor lost, which would leave exec waiting), and one that comes
/// before the watch has said anything stops it with status 0.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ExecWatchSignalTests {
  @Test func aSIGTERMRightAfterExecStartsItsProgramReachesTheProgram() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // exec waits, between starting the program and passing signals on to it, until this test
    // closes the FIFO; the SIGTERM is sent in that window.
    var hold = try DebugHoldPoint(in: d.scripts)
    let running = try RunningApp(
      device: d, arguments: ["--device", d.root, "exec", "--", "/bin/sh", "-c", DebugHoldPoint.trappingProgram],
      environment: ["PROTFS_DEBUG_HOLD_EXEC": hold.path])
    defer { running.stop() }
    try await hold.expectSIGTERMWhileHeldReachesTheProgram(running)
  }

  @Test func aSIGTERMBeforeTheWatchSaysAnythingStopsItWithStatusZero() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    var hold = try DebugHoldPoint(in: d.scripts)
    let running = try RunningApp(
      device: d, arguments: ["--device", d.root, "watch"], environment: ["PROTFS_DEBUG_HOLD_WATCH": hold.path])
    defer { running.stop() }
    try #require(await hold.reached(), "the hold")
    #expect(kill(running.process.processIdentifier, SIGTERM) == 0)
    hold.release()
    #expect(await running.exit().0 == 0, "\(running.output)")
  }
}
