import Foundation
import ProtFSTestSupport
import Testing

/// A program protfs starts for untrusted code (`exec`, `app launch`) never gets the caller's
/// terminal (issue 61): it leads a session of its own on a pseudo-terminal protfs relays, so that
/// it cannot type into root's shell with `TIOCSTI`, while an interactive shell, window sizes,
/// Ctrl-C and Ctrl-Z still work through the relay. Each test runs protfs as a user at a terminal
/// runs it: in a session whose controlling terminal is a new pseudo-terminal, the "caller's".
@Suite(.timeLimit(.minutes(3))) struct TerminalTests {
  /// Runs ARGV at a terminal of its own (33 rows, 99 columns), plays the steps, and reports what
  /// the terminal showed, the exit status, and what was left in the terminal's input queue: what
  /// the caller's shell would read and run next.
  static let harness = #"""
    # Runs a command as a user at a terminal runs it: in a session of its own whose controlling
    # terminal is a new pseudo-terminal (the "caller's terminal"), then plays the steps given as JSON
    # (send text, wait for output, expect the command to stop and continue it) and prints a JSON
    # report: what the terminal showed, the exit status, and what was left in the caller's terminal's
    # input queue (what a shell would read next).
    import fcntl, json, os, select, signal, struct, sys, termios, time
    steps = json.loads(sys.argv[1])
    argv = sys.argv[2:]
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 33, 99, 0, 0))
    pid = os.fork()
    if pid == 0:
        # Ignored, as a CI runner or a shell's background job may leave them: what the program gets
        # must not depend on what its caller ignored.
        for ignored in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGHUP):
            signal.signal(ignored, signal.SIG_IGN)
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(master)
        os.execv(argv[0], argv)
    shell_side = os.dup(slave)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 150  # within the suite's time limit; each wait has its own 30 s

    looked = 0  # a wait looks only at what came after the last one's match

    def pump(until=None, timeout=30.0):
        global shown, looked
        end = min(deadline, time.monotonic() + timeout)
        while until is None or until not in shown[looked:]:
            left = end - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([master], [], [], left)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:
                return until is None
            if not data:
                return until is None
            shown += data
        if until is not None:
            looked = shown.index(until, looked) + len(until)
        return True

    report = {"steps": []}
    status = None
    for step in steps:
        kind = step[0]
        if kind == "send":
            os.write(master, step[1].encode())
            report["steps"].append("sent")
        elif kind == "wait":
            report["steps"].append("saw" if pump(step[1].encode()) else "missed " + step[1])
        elif kind == "stopped":
            end = time.monotonic() + 20
            stopped = False
            while time.monotonic() < end:
                got, raw = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
                if got == pid and os.WIFSTOPPED(raw):
                    stopped = True
                    break
                if got == pid:
                    status = os.waitstatus_to_exitcode(raw)
                    break
                pump(timeout=0.05)
            report["steps"].append("stopped" if stopped else "not stopped")
        elif kind == "continue":
            os.kill(pid, signal.SIGCONT)
            report["steps"].append("continued")
    if status is None:
        # Bounded: a command still running (or stopped) after the steps is killed and reported.
        end = time.monotonic() + 30
        while status is None:
            got, raw = os.waitpid(pid, os.WUNTRACED | os.WNOHANG)
            if got == pid and not os.WIFSTOPPED(raw):
                status = os.waitstatus_to_exitcode(raw)
            elif (got == pid and os.WIFSTOPPED(raw)) or time.monotonic() > end:
                report["steps"].append("stopped at the end" if got == pid else "still running at the end")
                os.kill(pid, signal.SIGKILL)
                os.kill(pid, signal.SIGCONT)
                status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            else:
                pump(timeout=0.05)
    pump(timeout=0.3)  # what the command wrote last (the harness holds the terminal: no end of file)
    fcntl.fcntl(shell_side, fcntl.F_SETFL, os.O_NONBLOCK)
    try:
        pending = os.read(shell_side, 65536)
    except (BlockingIOError, OSError):
        pending = b""
    report["shown"] = shown.decode(errors="replace")
    report["status"] = status
    report["pending"] = pending.decode(errors="replace")
    report["callerSession"] = pid
    report["callerTerminal"] = os.ttyname(shell_side)
    print(json.dumps(report))
    """#

  /// What the caller's terminal showed and kept.
  struct Report: Decodable {
    let steps: [String]
    let shown: String
    let status: Int
    let pending: String
    let callerSession: Int
    let callerTerminal: String
  }

  /// The attacker inside: types a command into its standard input's terminal with `TIOCSTI`, and
  /// says who and where it is.
  static let typist = """
    import fcntl, json, os, termios
    typed = 0
    for c in b"touch /tmp/protfs-pwned\\n":
        try:
            fcntl.ioctl(0, termios.TIOCSTI, bytes([c]))
            typed += 1
        except OSError:
            pass
    print(json.dumps({"uid": os.getuid(), "session": os.getsid(0), "terminal": os.ttyname(0), "typed": typed}))
    """

  /// Runs `protfs --device ROOT ARGUMENTS` at a terminal with `steps` (JSON).
  static func atTerminal(_ d: AppDevice, _ arguments: [String], steps: String = "[]") async throws -> Report {
    let harness = d.scripts + "/terminal-harness.py"
    if !FileManager.default.fileExists(atPath: harness) {
      try Self.harness.write(toFile: harness, atomically: true, encoding: .utf8)
    }
    let run = try await Protfs.runProgram(
      "/usr/bin/python3", [harness, steps, Protfs.binary, "--device", d.root] + arguments)
    #expect(run.status == 0, "\(run)")
    let report = try JSONDecoder().decode(Report.self, from: Data(run.stdout.utf8))
    #expect(!report.steps.contains { $0.hasPrefix("missed") || $0.hasSuffix("at the end") }, "\(report)")
    return report
  }

  /// The attacker's own words about itself, from the terminal's output.
  static func said(_ report: Report) throws -> [String: Any] {
    let line = try #require(report.shown.split(separator: "\r\n").first { $0.hasPrefix("{") })
    return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
  }

  @Test(arguments: [["exec", "--"], ["app", "launch", AppDevice.bundle, "--no-mount", "--"]])
  func aProgramTypesNothingIntoTheCallersTerminal(_ words: [String]) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let typist = try d.script("typist.py", Self.typist)
    let report = try await Self.atTerminal(d, words + ["/usr/bin/python3", typist])
    #expect(report.status == 0, "\(report)")
    let said = try Self.said(report)
    // TIOCSTI reached only the program's own terminal: nothing waits in the caller's input.
    #expect(report.pending.isEmpty, "typed into the caller's terminal: \(report)")
    #expect(said["uid"] as? Int == 501)
    #expect(said["session"] as? Int != report.callerSession, "\(said)")
    #expect(said["terminal"] as? String != report.callerTerminal, "\(said)")
  }

  /// What an app names reaches root's terminal escaped: a background task named with escape
  /// sequences (retitle the terminal, write its clipboard with OSC 52, clear it) and a carriage
  /// return shows as text in `app status`, and does nothing to the terminal.
  @Test func anAppsNamesReachTheTerminalEscaped() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let app = try d.launch(
      [],
      [
        try d.script(
          "namer.sh",
          """
          #!/bin/sh
          name=$(printf 'up\\033]0;owned\\007\\033]52;c;cm0gLXJmIH4K\\007\\033[2J\\rload\\342\\200\\256\\nFAKE: not running')
          "$PROTFS" app begin-task "$name" >/dev/null || exit 3
          echo ready
          exec cat <&"$PROTFS_APP_EVENTS_FD" >/dev/null
          """)
      ])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    let status = try await d.protfs(["app", "status", AppDevice.bundle])
    #expect(status.status == 0, "\(status)")
    #expect(!status.stdout.contains("\u{1B}") && !status.stdout.contains("\r") && !status.stdout.contains("\u{202E}"))
    #expect(
      status.stdout.contains("up\\x1b]0;owned\\x07\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[2J\\rload\\u{202e}\\nFAKE"),
      "\(status.stdout)")
    // A line break of the app's makes no line of its own in root's output.
    #expect(!status.stdout.split(separator: "\n").contains { $0.hasPrefix("FAKE") }, "\(status.stdout)")
    // JSON is for programs, and escapes the controls as JSON does.
    let json = try await d.protfs(["app", "status", AppDevice.bundle, "--json"])
    #expect(json.stdout.contains("up\\u001b]0;owned"), "\(json.stdout)")
  }

  /// `exec -- bash` is an interactive shell: it reads what is typed, knows the caller's window
  /// size, stops its own jobs with Ctrl-Z, continues them with fg, and interrupts them with Ctrl-C.
  /// The job is one process that never forks: a shell loop that runs `sleep` can be caught by
  /// Ctrl-Z between its `vfork` and the child's exec (dash does so), and then the shell, waiting
  /// for its child uninterruptibly, never stops, on any terminal. It answers SIGCONT with a
  /// write(2) (a print could be stopped inside and not be entered again), and the next line is
  /// typed once the prompt is back (bash's line editor drops what comes with the Ctrl-C).
  @Test func anInteractiveShellWorksThroughTheRelay() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let steps = """
      [["wait", "$ "], ["send", "stty size; echo sum-$((20+22))\\n"], ["wait", "sum-42"],
       ["send", "python3 -c 'import os, signal, time; signal.signal(signal.SIGCONT, lambda *_: os.write(1, b\\"cont-%d\\\\n\\" % 2)); os.write(1, b\\"go-%d\\\\n\\" % 4); time.sleep(600)'\\n"],
       ["wait", "go-4"], ["send", "\\u001a"], ["wait", "Stopped"], ["send", "fg\\n"], ["wait", "cont-2"],
       ["send", "\\u0003"], ["wait", "$ "],
       ["send", "echo back-$((3+3))\\n"], ["wait", "back-6"], ["send", "exit 3\\n"]]
      """
    let report = try await Self.atTerminal(d, ["exec", "--", "/bin/bash", "--norc", "--noprofile", "-i"], steps: steps)
    #expect(report.shown.contains("33 99\r\n") && report.shown.contains("sum-42"), "\(report.shown)")
    #expect(report.status == 3 && report.pending.isEmpty, "\(report)")
  }

  /// Ctrl-Z stops a program run by exec together with protfs, as it stopped both before the relay;
  /// the shell's continue resumes both, and Ctrl-C then ends it (130).
  @Test func ctrlZStopsExecAndCtrlCEndsIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let steps = #"[["wait", "ready"], ["send", "\u001a"], ["stopped"], ["continue"], ["send", "\u0003"]]"#
    let report = try await Self.atTerminal(
      d, ["exec", "--", "/bin/sh", "-c", "echo ready; exec sleep 30"], steps: steps)
    #expect(report.steps == ["saw", "sent", "stopped", "continued", "sent"], "\(report)")
    #expect(report.status == 130, "\(report)")
  }
}
