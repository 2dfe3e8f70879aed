import Foundation
import ProtFS
import ProtFSApp
import ProtFSCLI
import ProtFSDownloads
import ProtFSLaunch
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Background sessions' events reaching apps (docs/semantics.md §9): the
/// `handleEventsForBackgroundURLSession` event, the background time it wakes an app with, the
/// app's `events-handled` answer, and the session service's launcher for apps not running.
@Suite(.serialized) struct AppSessionEventsTests {
  /// A shell app that echoes its events and answers each session's events after `delay` seconds
  /// (never when `answers` is false), printing the answer's status.
  static func answeringShell(_ d: AppDevice, delay: String = "0", answers: Bool = true) -> String {
    """
    #!/bin/sh
    echo "ready $PROTFS_SESSIONS_SOCKET"
    while read -r line <&3; do
      echo "event $line"
      case "$line" in
        *handleEventsForBackgroundURLSession*)
          session=$(echo "$line" | sed 's/.*"session":"\\([^"]*\\)".*/\\1/')
          if \(answers); then
            sleep \(delay)
            echo "answering $session"
            "\(d.protfsForApps)" app events-handled "$session" && echo "handled $session"
          fi ;;
        *willTerminate*) exit 0 ;;
      esac
    done
    """
  }

  /// The launcher the session service uses, running this build's protfs.
  static func launcher(_ d: AppDevice) -> AppSessionLauncher {
    AppSessionLauncher(device: d.t.device, program: Protfs.binary)
  }

  @Test func theEventReachesARunningAppWhichAnswersItOnce() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("answering.sh", Self.answeringShell(d))
    let app = try d.launch([], [script])
    defer { app.stop() }
    let ready = await app.line(containing: "ready")
    #expect(ready?.0 == "ready " + SessionServiceClient.socketName(device: d.t.device), "\(app.output)")
    try Self.launcher(d).deliverEvents(of: "com.example.s1", to: AppDevice.bundle)
    let event = await app.line(containing: "handleEventsForBackgroundURLSession")
    #expect(event?.0 == #"event {"event":"handleEventsForBackgroundURLSession","session":"com.example.s1"}"#)
    #expect(await app.line(containing: "handled com.example.s1") != nil, "\(app.output)")
    // A foreground app has no budget to end: it stays active.
    #expect(d.record()["state"] as? String == "active")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0)
  }

  @Test func anAppMayAnswerItsEventsButNotAskForThemNorAnswerAnUnknownSession() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // The app speaks to its supervisor's socket directly, as a program that skips the CLI would.
    let script = try d.script(
      "asker.py",
      """
      #!/usr/bin/python3
      import json, os, socket
      def ask(kind, argument=None):
          s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
          s.connect("\\0" + os.environ["PROTFS_APP_SOCKET"][1:])
          s.sendall((json.dumps({"kind": kind, "argument": argument}) + "\\n").encode())
          return s.makefile().readline().strip()
      print("events:", ask("sessionEvents", "mine"), flush=True)
      print("unknown:", ask("events-handled", "nobody"), flush=True)
      print("start:", ask("startSessionService"), flush=True)
      events = os.fdopen(int(os.environ["PROTFS_APP_EVENTS_FD"]))
      for line in events:
          if "handleEventsForBackgroundURLSession" in line:
              print("handled:", ask("events-handled", json.loads(line)["session"]), flush=True)
      """)
    let app = try d.launch([], [script])
    defer { app.stop() }
    let events = await app.line(containing: "events:")
    #expect(events?.0.contains("cannot ask for sessionEvents") == true, "\(app.output)")
    let unknown = await app.line(containing: "unknown:")
    #expect(unknown?.0.contains("No handleEventsForBackgroundURLSession for the session 'nobody'") == true)
    // Its own request starts the device's session service (as root, detached); stopped below.
    let start = await app.line(containing: "start:")
    defer {
      let socket = SessionServiceClient.socketName(device: d.t.device)
      if let pid = SessionServiceClient.ping(socketName: socket) {
        _ = try? Protfs.runBlocking(["--device", d.root, "sessions", "stop"])
        #expect(!isProcess(pid, namedBy: d.root), "the session service \(pid) is still running")
      }
    }
    #expect(start?.0 == #"start: {"value":null,"error":null}"# || start?.0 == #"start: {}"#, "\(app.output)")
    #expect(SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: d.t.device)) != nil)
    try Self.launcher(d).deliverEvents(of: "s2", to: AppDevice.bundle)
    let handled = await app.line(containing: "handled:")
    #expect(handled?.0 == #"handled: {"value":null,"error":null}"# || handled?.0 == #"handled: {}"#, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func aSuspendedAppIsWokenWithBackgroundTimeAndSuspendedAgainAfterItsAnswer() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // The answer comes after the suspension delay: only the wait for it keeps the app running.
    let script = try d.script("answering.sh", Self.answeringShell(d, delay: "0.6"))
    let app = try d.launch(["--suspend-after", "200ms", "--background-time", "10s"], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    try Self.launcher(d).deliverEvents(of: "s3", to: AppDevice.bundle)
    #expect(await app.line(containing: "answering s3") != nil, "\(app.output)")
    // Suspended again once it answered (possibly before its helper printed the reply).
    #expect(await d.waitForState("suspended"))
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "handled s3") != nil, "\(app.output)")
    #expect(d.crashReports().isEmpty)
    let terminate = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(terminate.status == 0, "\(terminate)")
    #expect(await app.exit().0 == 0)
  }

  @Test func anAppThatNeverAnswersIsKilledAtItsBudgetWithACrashReport() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("silent.sh", Self.answeringShell(d, answers: false))
    let app = try d.launch(["--suspend-after", "200ms", "--background-time", "1s"], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    try Self.launcher(d).deliverEvents(of: "s4", to: AppDevice.bundle)
    #expect(await app.line(containing: "handleEventsForBackgroundURLSession") != nil)
    #expect(await app.exit().0 == 137, "\(app.output)")
    let report = d.crashReports().first ?? [:]
    #expect(report["terminationReason"] as? String == "0x8badf00d")
    #expect(
      report["reason"] as? String
        == "the app did not call the completion handler of handleEventsForBackgroundURLSession for session 's4' within 1 s"
    )
  }

  @Test func anAppNotRunningIsLaunchedInTheBackgroundAndGetsTheEvent() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // The detached app's output goes nowhere: it writes what it saw where the test reads it.
    let seen = d.scripts + "/seen"
    try FileManager.default.createDirectory(atPath: seen, withIntermediateDirectories: true)
    chmod(seen, 0o777)
    let script = try d.script(
      "relaunched.sh",
      """
      #!/bin/sh
      while read -r line <&3; do
        echo "$line" >> \(seen)/events
        case "$line" in
          *handleEventsForBackgroundURLSession*) "\(d.protfsForApps)" app events-handled s5 ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
    let first = try await d.protfs(
      ["app", "launch", AppDevice.bundle, "--background-time", "10s", "--schedule", "terminate@50ms", "--", script])
    #expect(first.status == 0, "\(first)")
    try? FileManager.default.removeItem(atPath: seen + "/events")
    // Whatever happens, the detached supervisor and its app end with the test.
    defer { d.endApp() }
    try Self.launcher(d).deliverEvents(of: "s5", to: AppDevice.bundle)
    // Answered, it is suspended (unanswered, it would have been kept running, then killed).
    #expect(await d.waitForState("suspended"))
    let lines = (try? String(contentsOfFile: seen + "/events", encoding: .utf8)) ?? ""
    #expect(
      lines == #"""
        {"event":"didEnterBackground"}
        {"event":"handleEventsForBackgroundURLSession","session":"s5"}

        """#, "\(lines)")
    #expect(d.record()["forceQuit"] as? Bool == false)
    #expect(d.crashReports().isEmpty)
  }

  @Test func theLauncherRefusesAForceQuitAppAndReportsAFailingRelaunch() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let launcher = Self.launcher(d)
    #expect(throws: ProtFSError.self) { try launcher.deliverEvents(of: "s6", to: AppDevice.bundle) }
    #expect(Self.message { try launcher.deliverEvents(of: "s6", to: AppDevice.bundle) }.contains("never launched"))
    let script = try d.script("quitter.sh", "#!/bin/sh\necho ready\nwhile read -r line <&3; do :; done\n")
    let app = try d.launch([], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    _ = await app.exit()
    #expect(launcher.isForceQuit(AppDevice.bundle))
    #expect(Self.message { try launcher.deliverEvents(of: "s6", to: AppDevice.bundle) }.contains("force-quit"))
    // The user launches it again (clearing the force-quit), then its program disappears.
    #expect(try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"]).status == 0)
    #expect(!launcher.isForceQuit(AppDevice.bundle))
    let gone = try d.script("gone.sh", "#!/bin/sh\nexit 0\n")
    #expect(try await d.protfs(["app", "launch", AppDevice.bundle, "--", gone]).status == 0)
    try FileManager.default.removeItem(atPath: gone)
    #expect(
      Self.message { try launcher.deliverEvents(of: "s6", to: AppDevice.bundle) }.contains("not an executable file"))
    // A launcher whose `protfs app launch` fails before the app runs.
    #expect(try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"]).status == 0)
    let failing = AppSessionLauncher(device: d.t.device, program: "/bin/false")
    #expect(
      Self.message { try failing.deliverEvents(of: "s6", to: "com.example.app") }.contains("ended with status 1"))
    let missing = AppSessionLauncher(device: d.t.device, program: "/nonexistent/protfs")
    #expect(Self.message { try missing.deliverEvents(of: "s6", to: "com.example.app") }.contains("/nonexistent/protfs"))
  }

  /// The message of the error `body` throws ("" when it throws none).
  static func message(_ body: () throws -> Void) -> String {
    do {
      try body()
      return ""
    } catch {
      return (error as? ProtFSError)?.message ?? "\(error)"
    }
  }
}
