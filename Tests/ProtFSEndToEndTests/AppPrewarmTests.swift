import Foundation
import ProtFSTestSupport
import Testing

/// `protfs app prewarm`: a Swift app started ahead of its launch and held before
/// `UIApplicationMain`, as iOS 15 prewarms apps (docs/semantics.md §8), then taken by the launch
/// with its command and surroundings, or discarded by any other.
@Suite(.serialized) struct AppPrewarmTests {
  /// Runs `protfs app prewarm BUNDLE -- CMD` with the environment `RunningApp` gives a
  /// launch (a prewarmed app is taken only by a launch in the same environment); returns its exit
  /// status and output.
  static func prewarm(_ d: AppDevice, _ command: [String], options: [String] = []) async throws -> (Int32, String) {
    try await offPool {
      let process = TestProcess()
      process.executableURL = URL(fileURLWithPath: Protfs.binary)
      process.arguments = ["--device", d.root, "app", "prewarm", AppDevice.bundle] + options + ["--"] + command
      var environment = ProcessInfo.processInfo.environment
      environment["PROTFS_DEVICE"] = nil
      environment.merge(AppDevice.passedToTheApp(["PROTFS": d.protfsForApps])) { $1 }
      process.environment = environment
      let output = Pipe()
      process.standardOutput = output
      process.standardError = output
      process.standardInput = FileHandle.nullDevice
      try process.start()
      let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
      process.waitUntilExit()
      return (process.terminationStatus, text)
    }
  }

  /// The pid `app prewarm` printed (`BUNDLE: PID`).
  static func printedPID(_ output: String) -> Int? {
    output.split(separator: "\n").first { $0.hasPrefix(AppDevice.bundle + ": ") }
      .flatMap { Int($0.dropFirst(AppDevice.bundle.count + 2)) }
  }

  /// The socket a held app's launch is taken on, as its supervisor names it
  /// (`.protfs/apps/BUNDLE-ID.prewarm`); nil when none is held.
  static func launchSocket(_ d: AppDevice) -> String? {
    try? String(contentsOfFile: d.root + "/.protfs/apps/\(AppDevice.bundle).prewarm", encoding: .utf8)
  }

  /// The app's log (its output while it was held).
  static func log(_ d: AppDevice) -> String {
    (try? String(contentsOfFile: d.root + "/.protfs/logs/\(AppDevice.bundle).log", encoding: .utf8)) ?? ""
  }

  /// Whether process `pid` is gone, waiting up to 10 s off the pool.
  static func isGone(_ pid: Int) async -> Bool {
    await offPool {
      let deadline = Date() + 10
      while Date() < deadline {
        if kill(pid_t(pid), 0) != 0 && errno == ESRCH { return true }
        usleep(5_000)
      }
      return false
    }
  }

  @Test func theLaunchTakesTheHeldAppWhichLaunchesOnlyThenWithTheLaunchsTerminal() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    let (status, output) = try await Self.prewarm(d, [runner])
    #expect(status == 0, "\(output)")
    let held = try #require(Self.printedPID(output), "\(output)")
    #expect(d.record()["state"] as? String == "prewarmed")
    #expect(d.record()["pid"] as? Int == held)
    // Held before UIApplicationMain: its delegate was never told it launched.
    #expect(!Self.log(d).contains("ready"), "\(Self.log(d))")
    // The system does not count it as running.
    let background = try await d.protfs(["app", "background", AppDevice.bundle])
    #expect(background.status == 1 && background.stderr.contains("is not running"), "\(background.stderr)")
    let list = try await d.protfs(["app", "list"])
    #expect(list.stdout.contains("prewarmed"), "\(list.stdout)")

    let app = try d.launch([], [runner])
    defer { app.stop() }
    // Its first line reaches the launch's standard output, from the same process.
    #expect(await app.line(containing: "ready, state inactive") != nil, "\(app.output)")
    #expect(d.record()["pid"] as? Int == held)
    #expect(await d.waitForState("active"))
    #expect(Self.launchSocket(d) == nil)
    // From here it is an app like any other: driven, and its end is the launch's.
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "background task ") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.line(containing: "terminating") != nil, "\(app.output)")
    let (exit, _) = await app.exit()
    #expect(exit == 0, "\(app.output)")
    #expect(d.record()["state"] as? String == "notRunning")
  }

  @Test func theUsualFormIsTakenBeforeProtfssSwiftPartStartsAndAnyOtherFormByIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    // `app launch BUNDLE-ID -- CMD`: the C constructor takes it, and the Swift part never starts,
    // so the launch is one thread, waiting for the app's end.
    let held = try #require(Self.printedPID(try await Self.prewarm(d, [runner]).1))
    let app = try d.launch([], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(d.record()["pid"] as? Int == held)
    let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(app.process.processIdentifier)/task"))
    #expect(threads?.count == 1, "\(threads ?? [])")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0, "\(app.output)")

    // Options before the bundle id: the constructor leaves the launch to the Swift part, which
    // takes the held app all the same.
    let second = try #require(Self.printedPID(try await Self.prewarm(d, [runner], options: ["--no-mount"]).1))
    let other = try RunningApp(
      device: d, arguments: ["--device", d.root, "app", "launch", "--no-mount", AppDevice.bundle, "--", runner])
    defer { other.stop() }
    #expect(await other.line(containing: "ready") != nil, "\(other.output)")
    #expect(d.record()["pid"] as? Int == second)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await other.exit().0 == 0, "\(other.output)")
  }

  @Test func aLaunchWithOtherOptionsEndsTheHeldAppAndStartsItAnew() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    let (status, output) = try await Self.prewarm(d, [runner])
    let held = try #require(Self.printedPID(output), "\(output)")
    #expect(status == 0)
    let app = try d.launch(["--suspend-after", "300ms"], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(await Self.isGone(held))
    let pid = await d.recordedPID()
    #expect(pid != nil && pid != held, "\(d.record())")
    #expect(d.record()["state"] as? String == "active")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0, "\(app.output)")
  }

  @Test func terminateEndsAHeldAppWithoutEventsAndAShellProgramIsNotPrewarmed() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    let (_, output) = try await Self.prewarm(d, [runner])
    let held = try #require(Self.printedPID(output), "\(output)")
    let ended = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(ended.status == 0 && ended.stdout.contains("Ended the prewarmed app"), "\(ended.stderr)")
    #expect(await Self.isGone(held))
    #expect(d.record()["state"] as? String == "notRunning")
    #expect(!Self.log(d).contains("terminating"), "\(Self.log(d))")
    #expect(d.crashReports().isEmpty)

    let shell = try await Self.prewarm(d, ["/bin/sh", "-c", "sleep 60"])
    #expect(shell.0 == 1 && shell.1.contains("is not a Swift program"), "\(shell.1)")
    #expect(d.record()["state"] as? String == "notRunning")
  }

  @Test func aSecondPrewarmReplacesTheFirstAndAKilledSupervisorLeavesNothingInTheWay() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    let first = try #require(Self.printedPID(try await Self.prewarm(d, [runner]).1))
    let (status, output) = try await Self.prewarm(d, [runner])
    let second = try #require(Self.printedPID(output), "\(output)")
    #expect(status == 0 && second != first)
    #expect(await Self.isGone(first))
    // The supervisor killed with SIGKILL: its held app goes with it, its socket file stays behind.
    let supervisor = try #require(d.record()["supervisorPID"] as? Int)
    kill(pid_t(supervisor), SIGKILL)
    #expect(await Self.isGone(second))
    #expect(Self.launchSocket(d) != nil)
    // The next launch finds nobody there, starts the app anew, and clears the file.
    let app = try d.launch([], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(Self.launchSocket(d) == nil)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0, "\(app.output)")
  }

  @Test func signalsReachTheTakenAppAndAKilledLaunchTakesItAlong() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    _ = try await Self.prewarm(d, [runner])
    let app = try d.launch([], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    kill(app.process.processIdentifier, SIGTERM)
    // As for an app its launch started: the app ends by the signal, and so does the launch.
    #expect(await app.exit().0 == 143, "\(app.output)")
    #expect(await d.waitForState("notRunning"))

    let (_, output) = try await Self.prewarm(d, [runner])
    let held = try #require(Self.printedPID(output), "\(output)")
    let second = try d.launch([], [runner])
    defer { second.stop() }
    #expect(await second.line(containing: "ready") != nil, "\(second.output)")
    kill(second.process.processIdentifier, SIGKILL)
    #expect(await Self.isGone(held), "the taken app outlived its killed launch")
    #expect(await d.waitForState("notRunning"))
  }

  @Test func theHeldAppLearnsTheLockStateOfItsLaunchNotOfItsPrewarm() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let runner = try d.installExample("BackgroundRunner")
    let (status, output) = try await Self.prewarm(d, [runner])
    let held = try #require(Self.printedPID(output), "\(output)")
    #expect(status == 0)
    // Locked after the prewarm, before the launch: the app starts with protected data unavailable.
    #expect(try await d.protfs(["lock"]).status == 0)
    let app = try d.launch([], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(app.output.first { $0.hasPrefix("ready") }?.hasSuffix("protected data false") == true, "\(app.output)")
    #expect(d.record()["pid"] as? Int == held)
    // And it hears of the unlock, as any launched app does.
    #expect(try await d.protfs(["unlock"]).status == 0)
    #expect(await app.line(containing: "protected data available: true") != nil, "\(app.output)")
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0, "\(app.output)")
  }

  @Test func onlyRootOrTheSupervisorsUserTakesTheHeldAppAndGarbageIsTurnedAway() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let runner = try d.installExample("BackgroundRunner")
    let (_, output) = try await Self.prewarm(d, [runner])
    let held = try #require(Self.printedPID(output), "\(output)")
    let socket = try #require(Self.launchSocket(d))
    for uid in [Attacker.appUser, Attacker.nobody] {
      let forged = try await attacker.run(as: uid, "client.py", [socket, "launch 0"])
      #expect(forged.stdout.contains("reply: refused: user \(uid) may not launch"), "\(forged.stdout)")
    }
    // Root, without descriptors or with a lie about its key's length: turned away.
    let garbage = try await Protfs.runProgram(
      "/usr/bin/python3", [attacker.directory + "/client.py", socket, "launch 99999999999"])
    #expect(garbage.stdout.contains("reply: refused: not a launch"), "\(garbage.stdout)")
    // Still held, and still taken by its launch.
    #expect(d.record()["state"] as? String == "prewarmed")
    let app = try d.launch([], [runner])
    defer { app.stop() }
    #expect(await app.line(containing: "ready") != nil, "\(app.output)")
    #expect(d.record()["pid"] as? Int == held)
    #expect(try await d.protfs(["app", "terminate", AppDevice.bundle]).status == 0)
    #expect(await app.exit().0 == 0, "\(app.output)")
  }
}
