import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The app and every other user are untrusted (docs/semantics.md §11): each test is an attack a
/// uid-501 program or `nobody` makes on root's session service or an app's supervisor, and what
/// the system does instead of giving in.
@Suite(.serialized, .timeLimit(.minutes(3))) struct TrustBoundaryTests {
  let app = SessionServiceFixture.app

  /// The JSON line of `request`.
  static func line(_ request: SessionServiceRequest) throws -> String {
    String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
  }

  // MARK: Floods and garbage

  @Test func nobodyHoldingAThousandConnectionsStopsNoDownloadAndIsTurnedAwayAtOnce() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    #expect(try await Protfs.run(["--device", f.t.root, "sessions", "start"]).status == 0)
    // 1,019 idle connections: with the common limit of 1,024 descriptors, a service that gave
    // each a thread and waited for its first line ran out of descriptors and shut down.
    let holder = try attacker.start(as: Attacker.nobody, "hold.py", [f.socketName, "1019"])
    defer { holder.stop() }
    let report = await holder.read(until: "open ")
    #expect(report.contains("held 1019") && report.contains("refused 1019"), "\(report)")

    let body = DownloadFixture.bytes(512 << 10)
    let server = try FaultServer(body: body, entityTag: "\"f1\"", mode: .normal)
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("after.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    let waited = try await Protfs.run(["--device", f.t.root, "tasks", "wait", "1"])
    #expect(waited.status == 0, "\(waited)")
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/after.bin")) == Data(body))
  }

  @Test func garbageOnTheServicesSocketGetsOneRefusalAndTheServiceServesOn() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    try f.startInProcess()
    // From nobody: refused before anything is read.
    let fromNobody = try await attacker.run(as: Attacker.nobody, "flood.py", [f.socketName, "10000000"])
    #expect(fromNobody.stdout.contains("may not use the session service"), "\(fromNobody)")
    // From root: a line that is not JSON, one of the wrong shape, one too long, one never ended.
    for (size, flag) in [(10, ""), (200_000, ""), (5_000_000, "--unended")] {
      let sent = try await Protfs.runProgram(
        "/usr/bin/python3",
        [attacker.directory + "/flood.py", f.socketName, String(size)] + (flag.isEmpty ? [] : [flag]))
      #expect(sent.status == 0, "\(sent)")
      if size == 10 { #expect(sent.stdout.contains("cannot read the request: it is not JSON"), "\(sent)") }
    }
    let wrongShape = try await Protfs.runProgram(
      "/usr/bin/python3",
      [attacker.directory + "/client.py", f.socketName, #"{"kind":"createDownloadTask","task":"x"}"#])
    #expect(wrongShape.stdout.contains("a wrong value at 'task'"), "\(wrongShape)")
    let unknownKind = try await Protfs.runProgram(
      "/usr/bin/python3", [attacker.directory + "/client.py", f.socketName, #"{"kind":"format-disk"}"#])
    #expect(unknownKind.stdout.contains("cannot read the request"), "\(unknownKind)")
    #expect(f.servicePID == getpid())
  }

  @Test func theAppUserOutsideAnyAppListsNoTasksWhateverAppItNames() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    try f.startInProcess()
    for line in [#"{"kind":"appTasks"}"#, #"{"kind":"appTasks","bundleID":"com.example.app"}"#] {
      let asked = try await attacker.run(as: Attacker.appUser, "client.py", [f.socketName, line])
      #expect(asked.stdout.contains("is not running as an app"), "\(asked)")
      #expect(!asked.stdout.contains("records"), "\(asked)")
    }
    // A body the service could not carry in one message is no way in either: the line is cut off
    // at its limit, the client is told so, the connection ends, and the service serves on.
    let huge = try await Protfs.runProgram(
      "/usr/bin/python3", [attacker.directory + "/flood.py", f.socketName, String(3 << 20)])
    #expect(huge.status == 0, "\(huge)")
    #expect(huge.stdout.contains("takes request lines of at most 2097152 bytes"), "\(huge)")
    #expect(f.servicePID == getpid())
  }

  /// A process of the app user outside every app once held the 64 connections the app user's
  /// apps shared, sending a byte every few seconds (each wait was bounded, the line was not), and
  /// every app was refused. Now such a process is let go at once, each app counts its own
  /// connections, and a line that has begun must end within the service's line timeout.
  @Test func theAppUserOutsideAnyAppHoldsNoConnectionAndATrickledLineIsCutOff() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let f = SessionServiceFixture(existing: d.t)
    try f.startInProcess(lineTimeout: 1)
    defer { f.stop() }
    let holder = try attacker.start(as: Attacker.appUser, "hold.py", [f.socketName, "100"])
    defer { holder.stop() }
    let report = await holder.read(until: "open ")
    #expect(report.contains("held 100") && report.contains("refused 100"), "\(report)")
    // The app opens its session while the holder runs.
    let session = "\(AppDevice.bundle).meanwhile"
    let running = try d.launch(
      [], ["/usr/bin/python3", attacker.directory + "/sequence.py", f.socketName, try Self.openLine(session)])
    defer { running.stop() }
    #expect(await running.line(containing: #""step": "done""#) != nil, "\(running.output)")
    #expect(!running.output.contains(#""error""#), "\(running.output)")
    #expect(try DownloadStore(path: d.t.device.downloadStorePath).serviceSessions().map(\.identifier) == [session])
    // A line trickled a byte every 0.1 s is let go a second after it began, whoever sends it.
    let trickled = try await Protfs.runProgram(
      "/usr/bin/python3", [attacker.directory + "/trickle.py", f.socketName, "60", "0.1"])
    let sent = trickled.stdout.split(separator: " ").last.flatMap {
      Int($0.trimmingCharacters(in: .whitespacesAndNewlines))
    }
    #expect(trickled.stdout.contains("closed after") && (sent ?? 60) < 40, "\(trickled)")
    #expect(f.servicePID == getpid())
  }

  // MARK: What an app may name

  /// The app's own file, of class complete, owned by the app user.
  private static func secret(in d: AppDevice, _ name: String, _ text: String) throws -> String {
    let path = d.t.containerPath(AppDevice.bundle, "Documents/" + name)
    try d.t.writeFile(path, text)
    chown(path, Attacker.appUser, Attacker.appUser)
    try d.t.device.setClass(.complete, of: try d.t.device.resolve(path))
    return path
  }

  /// An `openSession` line for session `identifier` of the app.
  private static func openLine(_ identifier: String) throws -> String {
    try line(.openSession(SessionConfiguration(identifier: identifier)))
  }

  @Test func resumeDataTheAppForgesOrRewritesIsRefusedAndAFileItSwapsInIsLeftAlone() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let f = SessionServiceFixture(existing: d.t)
    try f.startInProcess()
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"r1\"", mode: .gateAfter(bytes: 200_000))
    defer { server.stop() }
    let secret = try Self.secret(in: d, "secret.txt", "the app's own complete file")
    let lockState = d.t.device.stateDirectory + "/lock-state.json"
    let stateBefore = FileManager.default.contents(atPath: lockState)
    // Resume data as an app would forge it, in Apple's format: a temp file name the session never
    // made, of the right shape.
    let forged = AppleResumeData(
      url: server.url("forged.bin"), bytesReceived: 0, temporaryFileName: "CFNetworkDownload_forged.tmp"
    ).archived.base64EncodedString()
    let session = "\(AppDevice.bundle).resume"
    let template = SessionServiceRequest.createDownloadTask(
      session: session, SessionRequest(url: server.url("resumed.bin")), resumeData: nil)
    let downloads = d.t.containerPath(
      AppDevice.bundle, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(AppDevice.bundle)")
    let running = try d.launch(
      [],
      [
        "/usr/bin/python3", attacker.directory + "/resume.py", f.socketName, try Self.openLine(session),
        try Self.line(template), forged, secret, downloads,
      ])
    defer { running.stop() }
    #expect(await running.line(containing: #""step": "done""#) != nil, "\(running.output)")
    let steps = Dictionary(
      running.output.compactMap { line -> (String, [String: Any])? in
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
          let step = object["step"] as? String
        else { return nil }
        return (step, object)
      }, uniquingKeysWith: { first, _ in first })
    func error(_ step: String) -> String {
      ((steps[step]?["reply"] as? [String: Any])?["error"] as? [String: Any])?["message"] as? String ?? ""
    }
    for step in ["forged", "otherURL", "otherFile", "pastFile", "outside", "garbage", "bomb"] {
      #expect(error(step).hasPrefix("The resume data cannot be used"), "\(step): \(running.output)")
    }
    let swapped = try #require(
      ((steps["swapped"]?["reply"] as? [String: Any])?["snapshot"] as? [String: Any])?["id"] as? Int,
      "\(running.output)")
    let temporaryName = try #require(steps["swapped"]?["temporaryFileName"] as? String)

    // The real resume data still works, with a temp file of its own: the app's file is not touched.
    server.openGate()
    await f.waitUntil { (try? f.tasks())?.first { $0.id == Int64(swapped) }?.state == .completed }
    let task = try #require(try f.tasks().first { $0.id == Int64(swapped) })
    #expect(task.state == .completed && task.bytesReceived == Int64(body.count), "\(task)")
    let moved = downloads + "/" + temporaryName
    #expect(FileManager.default.contents(atPath: moved) == Data("the app's own complete file".utf8))
    #expect(d.t.rawClass(moved) == "NSFileProtectionComplete")
    var status = stat()
    #expect(lstat(moved, &status) == 0 && status.st_uid == Attacker.appUser && status.st_nlink == 1)
    #expect(FileManager.default.contents(atPath: lockState) == stateBefore)
  }

  /// The service runs as root: a `file:` URL it fetched for an app would read whatever root can
  /// (another app's files, the device's state, /etc/shadow) into the app's container. An app's
  /// session takes http and https only, as an iOS background session does; root's own
  /// `download --detach` still takes `file:`.
  @Test(arguments: ["file", "FILE", "ftp", "gopher"])
  func anAppsSessionFetchesNoURLButHttpAndHttps(scheme: String) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let f = SessionServiceFixture(existing: d.t)
    try f.startInProcess()
    defer { f.stop() }
    let secret = d.t.device.stateDirectory + "/root-only.txt"
    try "root's secret".write(toFile: secret, atomically: true, encoding: .utf8)
    chmod(secret, 0o600)
    let session = "\(AppDevice.bundle).files"
    let create = SessionServiceRequest.createDownloadTask(
      session: session, SessionRequest(url: try #require(URL(string: "\(scheme)://localhost\(secret)"))),
      resumeData: nil)
    let running = try d.launch(
      [],
      [
        "/usr/bin/python3", attacker.directory + "/sequence.py", f.socketName, try Self.openLine(session),
        try Self.line(create),
      ])
    defer { running.stop() }
    #expect(await running.line(containing: #""step": "done""#) != nil, "\(running.output)")
    let replies = running.output.filter { $0.contains(#""step": 1"#) }
    #expect(replies.count == 1 && replies[0].contains("only http and https"), "\(running.output)")
    #expect(try f.tasks().isEmpty)
    let downloads = d.t.containerPath(
      AppDevice.bundle, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(AppDevice.bundle)")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []).isEmpty)
  }

  @Test func anUploadOfAFileSwappedWithALockedOneNeverSnapshotsTheLockedBytes() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let f = SessionServiceFixture(existing: d.t)
    try f.startInProcess()
    defer { f.stop() }
    let secret = try Self.secret(in: d, "secret.txt", "LOCKED-BYTES")
    let decoy = d.t.containerPath(AppDevice.bundle, "Documents/decoy.txt")
    try d.t.writeFile(decoy, "decoy")
    chown(decoy, Attacker.appUser, Attacker.appUser)
    try d.t.device.setClass(.none, of: try d.t.device.resolve(decoy))
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let session = "\(AppDevice.bundle).swap"
    // The script names the file (`path`) of each request it makes from this one.
    let template = SessionServiceRequest.createUploadTask(
      session: session, SessionRequest(url: URL(string: "http://127.0.0.1:9/upload")!, method: "PUT"), path: "")
    let running = try d.launch(
      [],
      [
        "/usr/bin/python3", attacker.directory + "/swap.py", f.socketName, try Self.openLine(session),
        try Self.line(template), decoy, secret, "2000",
      ])
    defer { running.stop() }
    let report = try #require(await running.line(containing: #""made""#, timeout: 120)?.0, "\(running.output)")
    let counts = try JSONSerialization.jsonObject(with: Data(report.utf8)) as? [String: Int]
    #expect((counts?["swaps"] ?? 0) > 0 && (counts?["made"] ?? 0) + (counts?["refused"] ?? 0) == 2000, "\(report)")
    let uploads = d.t.containerPath(
      AppDevice.bundle, "Library/Caches/com.apple.nsurlsessiond/Uploads/\(AppDevice.bundle)")
    let snapshots = (try? FileManager.default.contentsOfDirectory(atPath: uploads)) ?? []
    #expect(snapshots.count == counts?["made"], "\(snapshots.count) snapshots for \(report)")
    let leaked = snapshots.filter { FileManager.default.contents(atPath: uploads + "/" + $0) != Data("decoy".utf8) }
    #expect(leaked.isEmpty, "snapshots of something else than the decoy: \(leaked)")
  }

  // MARK: Who the server is

  @Test func nobodyBindingTheServicesSocketFirstIsNotBelieved() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let squatter = try attacker.start(as: Attacker.nobody, "squat.py", [f.socketName])
    defer { squatter.stop() }
    let bound = await squatter.read(until: "\n")
    let pid = try #require(
      bound.split(separator: " ").last.flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) },
      "\(bound)")

    let listed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(listed.stdout.contains("\"serviceRunning\" : false"), "\(listed)")
    let started = try await Protfs.run(["--device", f.t.root, "sessions", "start"])
    #expect(started.status == 1, "\(started)")
    #expect(started.stderr.contains("held by process \(pid) of user 65534"), "\(started)")
    // A task recorded for the service is not said to be done by the impostor.
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", "http://127.0.0.1:9/never.bin",
    ])
    #expect(detached.status != 0, "\(detached)")
    let waited = try await Protfs.run(["--device", f.t.root, "tasks", "wait", "1"])
    #expect(waited.status != 0, "\(waited)")
  }

  /// Launches the app with `options` running a script that starts a child in a session (and
  /// process group) of its own, then waits; returns the launch and the child's pid once both run.
  /// The caller stops the launch and kills the child (`killIfStill`, named by "while :").
  private static func launchWithSetsidChild(_ d: AppDevice, _ options: [String]) async throws -> (RunningApp, pid_t) {
    let tmp = d.t.containerPath(AppDevice.bundle, "tmp")
    let script = try d.script(
      "escape.sh",
      "#!/bin/sh\nsetsid sh -c 'echo $$ > \(tmp)/child.pid; while :; do sleep 1; done' &\n"
        + "while [ ! -s \(tmp)/child.pid ]; do sleep 0.01; done\necho ready\nexec sleep 600\n")
    let running = try d.launch(options, [script])
    guard await running.line(containing: "ready") != nil,
      let child = (try? String(contentsOfFile: tmp + "/child.pid", encoding: .utf8)).flatMap({
        pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines))
      })
    else {
      running.stop()
      throw ProtFSError(.io, "The app with a setsid child did not start: \(running.output)")
    }
    return (running, child)
  }

  /// Whether process `pid` is gone within 10 s (an ended process is reaped by whoever adopted
  /// it a moment later).
  private static func isGone(_ pid: pid_t) async -> Bool {
    await offPool { () -> Bool in
      let deadline = Date() + 10
      while kill(pid, 0) == 0, Date() < deadline { usleep(10_000) }
      return kill(pid, 0) != 0
    }
  }

  /// Anyone may bind an abstract socket name first. The supervisor's name was the app's key on
  /// the device, known in advance, so a process of any user could bind it before a launch and
  /// every launch (the system's relaunches and fetches too) was refused. It now ends in 128
  /// random bits chosen at each launch, and the system's commands read it from the app's record.
  @Test func nobodyBindingTheAppsSocketNameFirstCannotStopItsLaunch() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let key = AppEnvironment.key(device: d.t.device, bundleID: try BundleID(AppDevice.bundle))
    let squatter = try attacker.start(as: Attacker.nobody, "squat.py", ["protfs-app." + key])
    defer { squatter.stop() }
    #expect(await squatter.read(until: "\n").contains("bound"))
    let script = try d.script("idle.sh", "#!/bin/sh\necho running\nexec sleep 60\n")
    let running = try d.launch([], [script])
    defer { running.stop() }
    #expect(await running.line(containing: "running") != nil, "\(running.output)")
    let socket = try #require(d.record()["supervisorSocket"] as? String, "\(d.record())")
    #expect(socket.hasPrefix("protfs-app.\(key).") && socket.count == "protfs-app.\(key).".count + 32, "\(socket)")
    // The system's commands reach the supervisor through the record.
    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("background") || d.record()["state"] as? String == "suspended")
    let again = try await d.protfs(["app", "launch", AppDevice.bundle, "--", script])
    #expect(again.status == 1 && again.stderr.contains("is already running"), "\(again)")
  }

  /// `protfs app launch` killed with SIGKILL left the app's `setsid` and double-forked children
  /// running as the app user in its cgroup, unsupervised, while `app status` said not running and
  /// `app terminate` that it was not running. Both now end what was left.
  @Test(arguments: ["status", "terminate"])
  func aSupervisorKilledWithSIGKILLLeavesNothingOfTheAppRunning(command: String) async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let (running, child) = try await Self.launchWithSetsidChild(d, [])
    defer { running.stop() }
    defer { killIfStill(child, namedBy: "while :") }
    let cgroup = try #require(d.record()["cgroup"] as? String, "\(d.record())")
    kill(running.process.processIdentifier, SIGKILL)
    _ = await running.exit()
    #expect(kill(child, 0) == 0, "the child should have outlived its supervisor until now")

    let asked = try await d.protfs(["app", command, AppDevice.bundle])
    #expect(asked.status == 0, "\(asked)")
    #expect((asked.stdout + asked.stderr).contains("that its killed supervisor left running"), "\(asked)")
    if command == "status" { #expect(asked.stdout.contains("notRunning"), "\(asked)") }
    #expect(await Self.isGone(child), "the setsid child \(child) still runs")
    #expect(!FileManager.default.fileExists(atPath: cgroup), "the app's cgroup is left behind")
    #expect(d.record()["cgroup"] == nil && d.record()["supervisorSocket"] == nil, "\(d.record())")
    // The app launches again as usual.
    let again = try await d.protfs(["app", "launch", AppDevice.bundle, "--", "/bin/true"])
    #expect(again.status == 0, "\(again)")
  }

  // MARK: Who the app is

  @Test func aRecordWhoseSupervisorIsGoneOrWhosePidWasReusedNamesNobody() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let f = SessionServiceFixture(existing: d.t)
    try f.startInProcess()
    defer { f.stop() }
    let request = try Self.line(.openSession(SessionConfiguration(identifier: "\(AppDevice.bundle).stolen")))
    for stale in ["dead supervisor", "reused supervisor pid"] {
      // A uid-501 process outside any app, whose pid the stale record names as the app's.
      let thief = try attacker.start(as: Attacker.appUser, "client.py", [f.socketName, request, "--wait"])
      defer { thief.stop() }
      _ = await thief.read(until: "waiting")
      var record = AppRecord(bundleID: AppDevice.bundle, backgroundTime: 30)
      record.state = .background
      record.pid = thief.process.processIdentifier
      // The supervisor died (its pid taken by no one now), or its pid was given to the thief's
      // parent since, which started at another time than the record says.
      record.supervisor =
        stale == "dead supervisor"
        ? ProcessIdentity(pid: 4_194_000, startTime: 1) : ProcessIdentity(pid: getpid(), startTime: 1)
      try AppStore(device: d.t.device).write(record)
      thief.proceed()
      let reply = await thief.read(until: "reply: ")
      // Turned away when it connects, before its request is read.
      #expect(reply.contains("is not running as an app"), "\(stale): \(reply)")
    }
  }

  @Test func aProcessOfTheAppUserOutsideTheAppCannotSpeakForIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let script = try d.script("idle.sh", "#!/bin/sh\necho running\nexec sleep 60\n")
    let running = try d.launch([], [script])
    defer { running.stop() }
    #expect(await running.line(containing: "running") != nil)
    let socket = try #require(d.record()["supervisorSocket"] as? String, "\(d.record())")
    let asked = try await attacker.run(
      as: Attacker.appUser, "client.py", [socket, #"{"kind":"beginTask","argument":"stolen"}"#])
    #expect(asked.stdout.contains("is not one of the app"), "\(asked) \(asked.stderr)")
    #expect((d.record()["tasks"] as? [Any])?.isEmpty == true, "\(d.record())")
    let fromNobody = try await attacker.run(as: Attacker.nobody, "client.py", [socket, #"{"kind":"background"}"#])
    #expect(fromNobody.stdout.contains("may not control the app"), "\(fromNobody)")
  }

  @Test func aSetsidChildOfTheAppIsSuspendedAndEndedWithItAndNoSignalResumesIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    let (running, child) = try await Self.launchWithSetsidChild(d, ["--suspend-after", "100ms"])
    defer { running.stop() }
    defer { killIfStill(child, namedBy: "while :") }
    let leader = try #require(await d.recordedPID(), "\(d.record())")
    #expect(getsid(child) != getsid(pid_t(leader)), "the child did not leave the app's session")
    let cgroup = try #require(d.record()["cgroup"] as? String, "\(d.record())")
    let members = (try? String(contentsOfFile: cgroup + "/cgroup.procs", encoding: .utf8)) ?? ""
    #expect(members.split(separator: "\n").contains(Substring(String(child))), "\(members)")

    #expect(try await d.protfs(["app", "background", AppDevice.bundle]).status == 0)
    #expect(await d.waitForState("suspended"))
    #expect(await d.waitUntilFrozen())
    // The app user's own process outside the app sends SIGCONT to both: nothing runs again.
    let sent = try await Protfs.runProgram(
      "/usr/bin/setpriv",
      ["--reuid=501", "--regid=501", "--clear-groups", "/bin/kill", "-CONT", String(leader), String(child)])
    #expect(sent.status == 0, "\(sent)")
    let events = (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? ""
    #expect(events.contains("frozen 1"), "\(events)")

    let terminated = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(terminated.status == 0, "\(terminated)")
    _ = await running.exit()
    #expect(await Self.isGone(child), "the setsid child \(child) outlived its app")
    #expect(!FileManager.default.fileExists(atPath: cgroup), "the app's cgroup is left behind")
  }

  @Test func anAppFloodingItsSupervisorCannotStopItsSystemFromSuspendingAndEndingIt() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    defer { d.endApp() }
    let attacker = try Attacker()
    defer { attacker.remove() }
    // The app itself opens a thousand connections to its supervisor and holds them.
    let script = try d.script(
      "flood.sh", "#!/bin/sh\nexec /usr/bin/python3 \(attacker.directory)/hold.py \"$PROTFS_APP_SOCKET\" 1000\n")
    let running = try d.launch(["--suspend-after", "10s"], [script])
    defer { running.stop() }
    let held = await running.line(containing: "open ")
    #expect(held != nil, "\(running.output)")
    // Beyond the supervisor's 32 connections for the app user, each is answered and let go at once.
    #expect(running.output.contains("refused 968") && running.output.contains("open 32"), "\(running.output)")
    let background = try await d.protfs(["app", "background", AppDevice.bundle])
    #expect(background.status == 0, "\(background)")
    let terminate = try await d.protfs(["app", "terminate", AppDevice.bundle])
    #expect(terminate.status == 0, "\(terminate)")
    #expect(await running.exit().0 != 0)
  }
}
