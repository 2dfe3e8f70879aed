import Foundation
import ProtFS
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// How the system services know an app's processes (docs/semantics.md §11): by descent from the
/// app's live supervisor, recorded before the app starts.
@Suite(.serialized, .timeLimit(.minutes(2))) struct AppIdentityTests {
  /// The JSON line of `request`.
  static func line(_ request: SessionServiceRequest) throws -> String {
    String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
  }

  @Test func anAppThatOpensItsSessionBeforeItsProcessIsRecordedIsServedAsTheApp() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endAppAndSessionService() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    #expect(try await d.protfs(["sessions", "start"]).status == 0)
    let client = attacker.directory + "/client.py"
    let app = "/usr/bin/python3"
    let open = SessionServiceRequest.openSession(SessionConfiguration(identifier: "\(AppDevice.bundle).race"))
    let socket = SessionServiceClient.socketName(device: d.t.device)
    // The supervisor waits, between starting the app and writing the app's pid in its record,
    // until this test closes the FIFO: the app's first request comes before that record.
    let hold = d.scripts + "/hold"
    #expect(mkfifo(hold, 0o600) == 0)
    let running = try d.launch(
      [], [app, client, socket, try Self.line(open)], environment: ["PROTFS_DEBUG_HOLD_LAUNCH": hold])
    defer { running.stop() }
    let writer = await offPool { () -> Int32 in Glibc.open(hold, O_WRONLY | O_CLOEXEC) }
    try #require(writer >= 0, "the hold")
    // The service answers only once it has opened the session (written in its store);
    // under a bare `swift test`, with every test writing at once, the answer once took longer
    // than the 20 s default. A hang still fails, after 90 s.
    let reply = await running.line(containing: "reply: ", timeout: 90)
    #expect(d.record()["pid"] == nil, "the record named the app's process already: \(d.record())")
    close(writer)
    let answer = try #require(reply?.0, "\(running.output)")
    #expect(answer == "reply: {}", "\(answer)")
    #expect(await running.exit().0 == 0)
  }
}
