import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `protfs app`: shell and Python programs run as apps, with background time, suspension, fetch and
/// termination (docs/semantics.md §8). The apps echo their events to standard output, which the
/// tests read to know where the app is.
@Suite(.serialized) struct AppLifecycleTests {
  /// A shell app: echoes each event; on entering the background begins a task called `upload` and
  /// never ends it; prints the time remaining then and at the expiration warning, each between the
  /// times just before and just after it asked.
  static let forgetfulShell = """
    #!/bin/sh
    echo ready
    while read -r line <&"$PROTFS_APP_EVENTS_FD"; do
      echo "event $line"
      case "$line" in
        *didEnterBackground*)
          echo "seen $(date +%s.%N)"
          id=$("$PROTFS" app begin-task upload) || exit 3
          echo "task $id"
          echo "remaining $(date +%s.%N) $("$PROTFS" app time-remaining) $(date +%s.%N)" ;;
        *backgroundTaskWillExpire*) echo "warned $(date +%s.%N) $("$PROTFS" app time-remaining) $(date +%s.%N)" ;;
      esac
    done
    """

  @Test func backgroundTimeRunningOutKillsTheAppOnTimeWithACrashReport() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("forgetful.sh", Self.forgetfulShell)
    let app = try d.launch(["--background-time", "2s"], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "time-remaining"], environment: [:]).status == 1)
    // The background begins while this command runs, and before the app sees it.
    let sent = Date().timeIntervalSince1970
    let background = try await d.protfs(["app", "background", AppDevice.bundle])
    let returned = Date().timeIntervalSince1970
    #expect(background.status == 0, "\(background)")
    let remaining = await app.line(containing: "remaining ")
    let seen = await app.line(containing: "seen ")
    let warned = await app.line(containing: "warned ")
    let (status, _) = await app.exit()
    #expect(status == 137, "\(app.output)")
    let seenAt = Double(seen?.0.split(separator: " ").last ?? "") ?? 0
    let began = (earliest: sent, latest: min(returned, seenAt))
    // time-remaining is right to 100 ms: 2 s less the time since the background began (a span this
    // test knows only within the launches of two programs, which a busy machine makes slow).
    func isRight(_ line: (String, Date)?) -> Bool {
      let fields = (line?.0.split(separator: " ").dropFirst() ?? []).compactMap { Double($0) }
      guard fields.count == 3 else { return false }
      let (asked, left, answered) = (fields[0], fields[1], fields[2])
      return left >= 2 - (answered - began.earliest) - 0.1 && left <= 2 - (asked - began.latest) + 0.1
    }
    #expect(isRight(remaining), "\(remaining?.0 ?? "no line"), background began in \(began)")
    // At the warning, a fifth of the time (0.4 s) is left.
    #expect(isRight(warned), "\(warned?.0 ?? "no line"), background began in \(began)")
    let atWarning = Double(warned?.0.split(separator: " ").dropFirst(2).first ?? "") ?? -1
    #expect(atWarning > 0 && atWarning <= 0.4, "\(atWarning)")
    #expect(app.output.contains { $0.contains(#""event":"backgroundTaskWillExpire","task":1,"name":"upload""#) })
    let reports = d.crashReports()
    #expect(reports.count == 1)
    let report = reports.first ?? [:]
    #expect(report["bundleID"] as? String == AppDevice.bundle)
    #expect(report["terminationReason"] as? String == "0x8badf00d")
    #expect(report["openTasks"] as? [String] == ["upload"])
    // The kill came 2 s after the background began, within 100 ms.
    let killedAt =
      ISO8601DateFormatter.withMilliseconds.date(from: report["time"] as? String ?? "")?
      .timeIntervalSince1970 ?? 0
    #expect(
      killedAt - began.latest < 2.1 && killedAt - began.earliest > 1.9,
      "killed at \(killedAt), background began in \(began)")
    #expect(d.record()["state"] as? String == "notRunning")
    #expect(d.record()["lastExitStatus"] as? Int == 137)
  }

  /// A Python app that ends its task in time: it is then suspended, and resumes on foreground.
  static let python = """
    #!/usr/bin/env python3
    import os, subprocess, sys
    protfs = os.environ["PROTFS"]
    events = os.fdopen(int(os.environ["PROTFS_APP_EVENTS_FD"]))
    print("ready", flush=True)
    for line in events:
        print("event " + line.strip(), flush=True)
        if "didEnterBackground" in line:
            task = subprocess.run([protfs, "app", "begin-task", "save"], capture_output=True, text=True).stdout.strip()
            subprocess.run([protfs, "app", "end-task", task], check=True)
            print("ended " + task, flush=True)
        if "willEnterForeground" in line:
            print("resumed", flush=True)
        if "willTerminate" in line:
            sys.exit(0)
    """

  @Test func terminatingASuspendedAppAnswersAlthoughTheAppEndsAtOnce() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("idle.sh", "#!/bin/sh\necho ready\nexec sleep 600\n")
    // The supervisor holds each answer back 300 ms: the kill of a suspended app ends it (and
    // `app launch` would exit) long before the answer to `terminate` is written.
    let app = try d.launch(["--suspend-after", "100ms"], [script], environment: ["PROTFS_DEBUG_REPLY_DELAY_MS": "300"])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    let terminated = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(terminated.status == 0, "\(terminated)")
    #expect(await app.exit().0 == 137)
  }

  @Test func aTaskEndedInTimeLetsTheAppBeSuspendedThenResumedOnForeground() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script("saver.py", Self.python)
    // The app begins its task from didEnterBackground by starting `protfs app begin-task`, which a
    // loaded machine was seen to take longer than 300 ms to start: suspended before the task
    // began, the app never ended it. 2 s leaves it the time; the suspension still follows the end.
    let app = try d.launch(["--suspend-after", "2s"], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "ended 1") != nil, "\(app.output)")
    #expect(await d.waitForState("suspended"))
    #expect(await d.waitUntilFrozen(), "\(d.record())")
    let status = try await d.protfs(["app", "status", AppDevice.bundle])
    #expect(status.stdout.contains("suspended"), "\(status)")
    #expect(try await d.protfs(["app", "foreground", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "resumed") != nil)
    #expect(d.record()["state"] as? String == "active")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    let (exitStatus, _) = await app.exit()
    #expect(exitStatus == 0, "\(app.output)")
    #expect(d.crashReports().isEmpty)
  }

  @Test func aSimulatedFetchRecordsNewData() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script(
      "fetcher.sh",
      """
      #!/bin/sh
      echo ready
      while read -r line <&3; do
        case "$line" in
          *performFetch*) "$PROTFS" app fetch-completed newData && echo fetched ;;
        esac
      done
      """)
    let app = try d.launch([], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "fetched") != nil, "\(app.output)")
    let json = try await d.protfs(["app", "status", "--json"])
    let entries = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
    let fetch = entries?.first?["lastFetch"] as? [String: Any]
    #expect(fetch?["result"] as? String == "newData", "\(json)")
    #expect((fetch?["duration"] as? Double ?? 99) < 5)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    // The script ignores willTerminate: the kill after the grace ends it.
    let (status, _) = await app.exit()
    #expect(status == 137)
  }

  @Test func anAppCannotMoveItselfToTheForegroundNorWakeItself() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // The app speaks to its supervisor's socket directly, as a program that skips the CLI would.
    let script = try d.script(
      "escaper.py",
      """
      #!/usr/bin/python3
      import json, os, socket
      def ask(kind, argument=None):
          s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
          s.connect("\\0" + os.environ["PROTFS_APP_SOCKET"][1:])
          s.sendall((json.dumps({"kind": kind, "argument": argument}) + "\\n").encode())
          return s.makefile().readline().strip()
      events = os.fdopen(int(os.environ["PROTFS_APP_EVENTS_FD"]))
      print("ready", flush=True)
      for line in events:
          if "didEnterBackground" in line:
              print("foreground:", ask("foreground"), flush=True)
              print("fetch:", ask("fetch"), flush=True)
              print("launch-own:", ask("bgTaskLaunch", json.dumps({"type": "refresh", "now": True})), flush=True)
              print("expire-own:", ask("bgTaskExpire", "com.example.refresh"), flush=True)
              print("task:", ask("beginTask", "escape"), flush=True)
      """)
    let app = try d.launch([], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    let foreground = await app.line(containing: "foreground:")
    #expect(foreground?.0.contains("cannot ask for foreground") == true, "\(app.output)")
    let fetch = await app.line(containing: "fetch:")
    #expect(fetch?.0.contains("cannot ask for fetch") == true, "\(app.output)")
    // When a BGTask runs, and when it expires, is the system's to decide too.
    #expect(
      await app.line(containing: "launch-own:")?.0.contains("cannot ask for bgTaskLaunch") == true, "\(app.output)")
    #expect(
      await app.line(containing: "expire-own:")?.0.contains("cannot ask for bgTaskExpire") == true, "\(app.output)")
    // Its own requests still work.
    let task = await app.line(containing: "task:")
    #expect(task != nil && task?.0.contains("cannot") == false, "\(app.output)")
    let status = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
    #expect(status.stdout.contains("\"state\" : \"background\""), "\(status)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    _ = await app.exit()
  }

  @Test func killingTheSupervisorEndsTheAppAndFreesItsName() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    // An app that never reads its events (so no end of file tells it that its supervisor is gone).
    let script = try d.script("idle.sh", "#!/bin/sh\necho ready\nexec sleep 100000 3<&-\n")
    let app = try d.launch([], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    let pid = try #require(await d.recordedPID(), "\(d.record())")
    #expect(kill(app.process.processIdentifier, SIGKILL) == 0)
    let ended = await offPool { Kernel.waitForExit(of: pid_t(pid), milliseconds: 10_000) }
    #expect(ended, "the app outlived its supervisor")
    _ = await app.exit()
    // The bundle id is free again: a new launch starts.
    let again = try d.launch([], [script])
    defer { again.stop() }
    #expect(await again.line(containing: "ready") != nil, "\(again.output)")
    let terminate = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(terminate.status == 0, "\(terminate)")
    _ = await again.exit()
  }

  @Test func statusNamesARecordItCannotRead() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    try FileManager.default.createDirectory(atPath: d.root + "/.protfs/apps", withIntermediateDirectories: true)
    let path = d.root + "/.protfs/apps/\(AppDevice.bundle).json"
    try Data("garbage{".utf8).write(to: URL(fileURLWithPath: path))
    let status = try await d.protfs(["app", "status"])
    #expect(status.status == 0, "\(status)")
    #expect(status.stderr.contains("warning:") && status.stderr.contains(path), "\(status)")
  }

  @Test func aFetchLaunchesAnAppNotRunningUnlessTheUserForceQuitIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script(
      "fetcher.sh",
      """
      #!/bin/sh
      while read -r line <&3; do
        case "$line" in
          *performFetch*) "$PROTFS" app fetch-completed newData ;;
          *willTerminate*) exit 0 ;;
        esac
      done
      """)
    #expect(try await d.protfs(["app", "fetch", AppDevice.bundle]).stderr.contains("never launched"))
    let first = try await d.protfs(["app", "launch", AppDevice.bundle, "--schedule", "terminate@50ms", "--", script])
    #expect(first.status == 0, "\(first)")
    // The schedule ends the app 50 ms after its launch; the fetch is to find it not running, and
    // under load the next command may come sooner than that.
    #expect(await d.waitForState("notRunning"), "\(d.record())")
    let fetch = try await d.protfs(["app", "fetch", AppDevice.bundle], environment: ["PROTFS": d.protfsForApps])
    #expect(fetch.status == 0, "\(fetch)")
    #expect(fetch.stdout.contains("in the background for a fetch"))
    // Whatever happens, the detached supervisor and its app end with the test.
    defer { d.endApp() }
    let fetched = await d.waitForFetchResult() == "newData"
    #expect(fetched)
    // Launched for the fetch, the app never came to the foreground: it is in the background, or
    // already suspended if the fetch took longer than the suspension delay (5 s) under load.
    let state = d.record()["state"] as? String
    #expect(state == "background" || state == "suspended", "\(d.record())")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    #expect(await d.waitForState("notRunning"))
    let refused = try await d.protfs(["app", "fetch", AppDevice.bundle])
    #expect(refused.status == 1)
    #expect(refused.stderr.contains("force-quit"), "\(refused)")
  }

  @Test func terminateSendsWillTerminateAndUserTerminationIsRemembered() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script(
      "quitter.sh",
      """
      #!/bin/sh
      echo ready
      while read -r line <&3; do
        case "$line" in *willTerminate*) echo bye; exit 7 ;; esac
      done
      """)
    let app = try d.launch([], [script])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil)
    // Already running: a second launch is refused and starts nothing.
    let second = try await d.protfs(["app", "launch", AppDevice.bundle, "--", script])
    #expect(second.status == 1)
    #expect(second.stderr.contains("already running"), "\(second)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle, "--user"]).status == 0)
    #expect(await app.line(containing: "bye") != nil)
    let (status, _) = await app.exit()
    #expect(status == 7)
    #expect(d.record()["forceQuit"] as? Bool == true)
    let shown = try await d.protfs(["app", "status"])
    #expect(shown.stdout.contains("force-quit"), "\(shown)")
    // The next launch by the user clears it.
    let relaunch = try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"])
    #expect(relaunch.status == 0, "\(relaunch)")
    #expect(d.record()["forceQuit"] as? Bool == false)
  }

  @Test func oneTimelineDrivesTheLockAndTheAppAndAnUnansweredFetchIsAKill() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let script = try d.script(
      "listener.sh",
      """
      #!/bin/sh
      while read -r line <&3; do echo "event $line"; done
      """)
    let app = try d.launch(
      ["--fetch-time", "500ms", "--schedule", "lock@100ms,unlock@200ms,background@300ms,fetch@400ms"], [script])
    defer { app.stop() }
    let (status, _) = await app.exit()
    #expect(status == 137)
    let events = app.output.compactMap { line -> String? in
      guard let data = line.dropFirst("event ".count).data(using: .utf8),
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
      else { return nil }
      return object["event"] as? String
    }
    #expect(
      events == [
        "protectedDataWillBecomeUnavailable", "protectedDataDidBecomeAvailable", "didEnterBackground", "performFetch",
      ], "\(app.output)")
    let fetch = d.record()["lastFetch"] as? [String: Any]
    #expect(fetch?["result"] as? String == "timedOut")
    #expect(d.crashReports().first?["reason"] as? String == "the background fetch did not complete within 0.5 s")
  }

  @Test(arguments: [
    (["app", "launch", "com.example.none", "--", "/bin/true"], 1, "has no container"),
    (["app", "launch", AppDevice.bundle, "--", "/nonexistent/program"], 1, "not an executable file"),
    (["app", "launch", AppDevice.bundle, "--background-time", "0s", "--", "/bin/true"], 64, "between 1ms and 60m"),
    (["app", "launch", AppDevice.bundle, "--background-time", "2h", "--", "/bin/true"], 64, "between 1ms and 60m"),
    (["app", "launch", AppDevice.bundle, "--schedule", "sleep@1s", "--", "/bin/true"], 64, "is not an action"),
    (["app", "begin-task", "x"], 1, "works only inside an app"),
    (["app", "time-remaining"], 1, "works only inside an app"),
    (["app", "events-handled", "s1"], 1, "works only inside an app"),
    (
      ["app", "launch", AppDevice.bundle, "--for-fetch", "--for-session", "s1", "--", "/bin/true"], 64,
      "cannot be given together"
    ),
    (["app", "fetch-completed", "maybe"], 64, "is not a fetch result"),
    (["app", "background", AppDevice.bundle], 1, "is not running"),
    (["app", "terminate", "com.example.none"], 1, "has no container"),
    (["exec", "--schedule", "background@1s", "--", "/bin/true"], 64, "needs an app"),
  ])
  func badInputIsOneClearError(arguments: [String], status: Int32, message: String) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let result = try await d.protfs(arguments)
    #expect(result.status == status, "\(result)")
    #expect(result.stderr.contains(message), "\(result)")
    #expect(result.stderr.hasPrefix("Error: "), "\(result)")
    #expect(d.record()["state"] as? String != "active")
  }
}

extension ISO8601DateFormatter {
  /// The crash reports' format.
  static var withMilliseconds: ISO8601DateFormatter {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter
  }
}
