import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// The session service through the CLI: `download --detach`, a crash, a service that cannot start,
/// peers it refuses, sessions it does not know.
@Suite(.timeLimit(.minutes(2))) struct SessionServiceCLITests {
  let app = SessionServiceFixture.app

  @Test func detachReturnsAtOnceAndTheServiceCompletesTheTask() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let payload = Data(DownloadFixture.bytes(2 << 20))
    // The server holds the rest of the body until the gate opens: the command returns while the
    // transfer cannot have finished, which is what "at once" means, without a clock.
    let server = try FaultServer(body: Array(payload), entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let url = server.url("big.bin")
    let result = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", url.absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout == "1\n")
    #expect((try? f.tasks())?.first?.state.isUnfinished == true)
    server.openGate()
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/big.bin")) == payload)
    let listed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(listed.stdout.contains("\"serviceRunning\" : true"), "\(listed)")
  }

  /// `download --detach` of `server`'s big.bin (stalling after 400,000 bytes), then `kill -9` of
  /// the service once the temp file holds those bytes: the task is left running in the store.
  private func detachBigFileAndKillTheServiceMidTransfer(_ f: SessionServiceFixture, _ server: FaultServer)
    async throws
  {
    let result = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("big.bin").absoluteString,
    ])
    #expect(result.status == 0, "\(result)")
    let pid = try #require(f.servicePID)
    await f.waitForTemporaryFile(bytes: 400_000)
    kill(pid, SIGKILL)
    await f.waitUntil(timeout: 10) { !isProcess(pid, namedBy: f.t.root) }
    #expect(try f.tasks().first?.state == .running)
  }

  @Test func aKilledServiceResumesItsTaskWithRangeWhenStartedAgain() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .stallAfter(bytes: 400_000))
    defer { server.stop() }
    try await detachBigFileAndKillTheServiceMidTransfer(f, server)
    server.setMode(.normal)
    let restarted = try await Protfs.run(["--device", f.t.root, "sessions", "start"])
    #expect(restarted.status == 0, "\(restarted)")
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/big.bin")) == Data(body))
    let last = try #require(server.requests.last)
    #expect(last.headers["range"]?.hasPrefix("bytes=") == true && last.headers["range"] != "bytes=0-")
    #expect(try f.tasks().count == 1)
  }

  @Test func aDetachAfterAKilledServiceHandsOverTheTaskThatServiceLeftRunning() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .stallAfter(bytes: 400_000))
    defer { server.stop() }
    try await detachBigFileAndKillTheServiceMidTransfer(f, server)
    server.setMode(.normal)
    // The next detach opens the session first (claiming the stranded task) and starts the service
    // after: the stranded task must go to the service running, not be left suspended.
    let second = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("other.bin").absoluteString,
    ])
    #expect(second.status == 0, "\(second)")
    await f.waitUntil {
      ((try? f.tasks()) ?? []).count == 2 && ((try? f.tasks()) ?? []).allSatisfy { $0.state == .completed }
    }
    let states = try f.tasks().map { "\($0.id): \($0.state)" }
    #expect(try f.tasks().allSatisfy { $0.state == .completed }, "\(states)")
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/big.bin")) == Data(body))
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/other.bin")) == Data(body))
  }

  @Test func aServiceWhoseNameIsStillHeldByAListenerGoingAwayStartsOnceItIsFree() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    // A listener that answers nothing holds the name, as a child being spawned holds a dup of a
    // stopped service's listener until its exec: the new service must wait for it, not give up.
    let holder = try ControlSocket.listen(f.socketName)
    let started = Task {
      // A service that gives up ends the wait for its probe too.
      defer { ControlSocket.shutDown(holder) }
      try await offPool { try f.startInProcess() }
    }
    // The service probes the name once its bind failed: then the holder goes, on the thread that
    // saw the probe. Waiting to be resumed on the cooperative pool first would let the service's
    // settling time run out while other tests hold the pool's threads.
    let probed = await offPool { () -> Bool in
      let probe = ControlSocket.accept(holder)
      probe?.0.close()
      holder.close()
      return probe != nil
    }
    #expect(probed, "the service gave up without probing the name")
    try await started.value
    #expect(f.servicePID == getpid())
  }

  @Test func detachWhenTheServiceCannotStartLeavesTheTasksResumable() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    // Something else holds the service's socket and answers nothing.
    let squatter = try ControlSocket.listen(f.socketName)
    let thread = Thread {
      while let (connection, _) = ControlSocket.accept(squatter) { connection.close() }
    }
    thread.start()
    defer {
      ControlSocket.shutDown(squatter)
      squatter.close()
    }
    let result = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", "http://127.0.0.1:9/file.bin",
    ])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("were not handed to the session service"), "\(result)")
    #expect(result.stderr.components(separatedBy: "Error:").count == 2, "\(result)")
    #expect(try f.tasks().map(\.state) == [.suspended])
  }

  /// `download --detach` killed after recording tasks and before the service took them: the tasks
  /// carry the resume request they were recorded with, so the next handover to the service (any
  /// later `download --detach` of the session) runs them instead of leaving them suspended.
  @Test func tasksOfADetachKilledBeforeItsHandoverRunAtTheNextOne() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let body = DownloadFixture.bytes(8192)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    try await killInHandover(
      f,
      [
        "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("a.bin").absoluteString,
        server.url("b.bin").absoluteString,
      ])
    let orphans = try f.tasks()
    #expect(orphans.map(\.state) == [.suspended, .suspended], "\(orphans)")
    try await startServiceAndDetach(f, server.url("c.bin"), waitingFor: orphans)
    for name in ["a.bin", "b.bin", "c.bin"] {
      #expect(
        FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/\(name)")) == Data(body), "\(name)")
    }
    #expect(try f.tasks().map(\.state) == [.completed, .completed, .completed])
  }

  /// Killed before its first handover reached any service: the session was marked as the
  /// service's before the first task was recorded, so a service that starts runs the tasks
  /// without another detach.
  @Test func aServiceStartingAfterADetachKilledBeforeAnyHandoverRunsItsTasks() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let body = DownloadFixture.bytes(8192)
    let server = try FaultServer(body: body)
    defer { server.stop() }
    try await killInHandover(
      f, ["--device", f.t.root, "download", "--bundle", app, "--detach", server.url("a.bin").absoluteString])
    let orphans = try f.tasks()
    #expect(orphans.map(\.state) == [.suspended], "\(orphans)")
    try await startService(f)
    let waited = try await Protfs.run(["--device", f.t.root, "tasks", "wait"] + orphans.map { String($0.id) })
    #expect(waited.status == 0, "\(waited)")
    #expect(FileManager.default.contents(atPath: f.t.containerPath(app, "Documents/a.bin")) == Data(body))
  }

  /// The same for `upload --detach`: its task is recorded with the resume request too.
  @Test func anUploadOfADetachKilledBeforeItsHandoverRunsAtTheNextOne() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let uploads = try UploadServer()
    defer { uploads.stop() }
    let downloads = try FaultServer(body: DownloadFixture.bytes(8192))
    defer { downloads.stop() }
    try Data(DownloadFixture.bytes(5000)).write(to: URL(fileURLWithPath: f.t.containerPath(app, "Documents/up.bin")))
    try await killInHandover(
      f,
      [
        "--device", f.t.root, "upload", "--bundle", app, "--detach", "--from", "Documents/up.bin",
        uploads.url("put").absoluteString,
      ])
    let orphans = try f.tasks()
    #expect(orphans.map(\.state) == [.suspended], "\(orphans)")
    try await startServiceAndDetach(f, downloads.url("d.bin"), waitingFor: orphans)
    #expect(uploads.requests.map(\.received) == [5000])
    #expect(try f.tasks().map(\.state) == [.completed, .completed])
  }

  /// Starts the real service, runs another `download --detach` of the session for `url`, and waits
  /// for its task and the `orphans` a killed command left: all complete.
  private func startServiceAndDetach(_ f: SessionServiceFixture, _ url: URL, waitingFor orphans: [DownloadTaskRecord])
    async throws
  {
    try await startService(f)
    let next = try await Protfs.run(["--device", f.t.root, "download", "--bundle", app, "--detach", url.absoluteString])
    #expect(next.status == 0, "\(next)")
    let ids = orphans.map { String($0.id) } + next.stdout.split(separator: "\n").map(String.init)
    let waited = try await Protfs.run(["--device", f.t.root, "tasks", "wait"] + ids)
    #expect(waited.status == 0, "\(waited)")
  }

  /// Starts the real service in this process, after stopping any other: on a loaded machine the
  /// killed command may have started one itself (its ping of the stand-in timed out), which would
  /// hold the socket and, started while the command lived, would not have taken its tasks.
  /// A process another test is starting may still hold a copy of the stand-in's socket for the
  /// moment between its fork and its exec: the name is retried for a few seconds.
  /// Blocking (a stop waits for the other service to end), so it runs off the cooperative pool.
  private func startService(_ f: SessionServiceFixture) async throws {
    let failure = await offPool { () -> (any Error)? in
      f.stop()
      let deadline = Date().addingTimeInterval(10)
      while true {
        do {
          try f.startInProcess()
          return nil
        } catch let error as ProtFSError where error.code == .alreadyExists && Date() < deadline {
          f.stop()
          usleep(50_000)
        } catch {
          return error
        }
      }
    }
    if let failure { throw failure }
  }

  /// Runs protfs with `arguments` against something that holds the service's socket: it answers
  /// the ping, takes the handover and never answers, so that the command is stopped (`kill -9`)
  /// inside it, its tasks recorded.
  private func killInHandover(_ f: SessionServiceFixture, _ arguments: [String]) async throws {
    let squatter = try ControlSocket.listen(f.socketName)
    let handoverArrived = DispatchSemaphore(value: 0)
    let held = Mutex<[FileDescriptor]>([])
    let loopEnded = DispatchSemaphore(value: 0)
    let thread = Thread {
      defer { loopEnded.signal() }
      while let (connection, _) = ControlSocket.accept(squatter) {
        guard let line = ControlSocket.readLine(connection) else { continue }
        if line.contains("\"ping\"") {
          _ = ControlSocket.writeLine(connection, "{\"pid\":\(getpid())}")
          connection.close()
        } else {
          held.withLock { $0.append(connection) }
          handoverArrived.signal()
        }
      }
    }
    thread.start()
    let command = TestProcess()
    command.executableURL = URL(fileURLWithPath: Protfs.binary)
    command.arguments = arguments
    command.standardOutput = FileHandle.nullDevice
    command.standardError = FileHandle.nullDevice
    try command.start()
    // Waited for off the cooperative pool the other tests share.
    let arrived = await offPool { handoverArrived.wait(timeout: .now() + 60) == .success }
    #expect(arrived, "the command never handed its tasks over")
    kill(command.processIdentifier, SIGKILL)
    await offPool { command.waitUntilExit() }
    // The socket's name is free for the real service only once the squatter's accept has returned.
    ControlSocket.shutDown(squatter)
    let ended = await offPool { loopEnded.wait(timeout: .now() + 60) == .success }
    #expect(ended, "the squatter never stopped accepting")
    squatter.close()
    for connection in held.withLock({ $0 }) { connection.close() }
  }

  @Test func eventsOfAnUnknownSessionFailClearly() async throws {
    let f = try await SessionServiceFixture()
    let result = try await Protfs.run(["--device", f.t.root, "tasks", "events", "--session", "nope", "--json"])
    #expect(result.status == 1)
    #expect(result.stderr.contains("no background session 'nope'"), "\(result)")
  }

  @Test func aNonRootPeerOutsideAnyAppIsRefused() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    var configuration = SessionConfiguration(identifier: "\(app).background", bundleID: app)
    configuration.socketName = f.socketName
    _ = try SessionServiceClient.open(configuration)
    let result = try await Protfs.runProgram(
      "/usr/bin/setpriv",
      [
        "--reuid", "501", "--regid", "501", "--clear-groups", Protfs.binary, "--device", f.t.root, "tasks",
        "events",
        "--session", "\(app).background",
      ],
      environment: [SessionServiceClient.socketEnvironment: f.socketName])
    #expect(result.status == 1, "\(result)")
    #expect(result.stderr.contains("only root or the app"), "\(result)")
  }
}

/// The service and the lock: a finished download whose destination is locked waits, and the
/// service places it when the device unlocks.
@Suite(.timeLimit(.minutes(2))) struct SessionServiceLockTests {
  @Test func theServicePlacesWaitingDownloadsOnUnlock() async throws {
    let t = try TestDevice()
    let app = SessionServiceFixture.app
    try #require(try await Protfs.run(["--device", t.root, "init", app, "--default-class", "complete"]).status == 0)
    try #require(try await Protfs.run(["--device", t.root, "init-cache", app]).status == 0)
    let socket = SessionServiceClient.socketName(device: t.device)
    defer {
      if let pid = SessionServiceClient.ping(socketName: socket) {
        _ = try? Protfs.runBlocking(["--device", t.root, "sessions", "stop"])
        #expect(!isProcess(pid, namedBy: t.root), "the session service \(pid) is still running")
      }
    }
    let server = try NginxServer()
    defer { server.stop() }
    let url = try server.put(Data("report".utf8), at: "report.pdf").absoluteString
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let detached = try await Protfs.run(["--device", t.root, "download", "--bundle", app, "--detach", url])
    #expect(detached.status == 0, "\(detached)")
    let store = try DownloadStore(path: t.device.downloadStorePath)
    let waitFor: @Sendable (DownloadState) async -> Void = { state in
      _ = await offPool { () -> Bool in
        let deadline = Date().addingTimeInterval(20)
        while (try? store.tasks())?.first?.state != state, Date() < deadline { usleep(10_000) }
        return true
      }
    }
    await waitFor(.waitingForUnlock)
    #expect(try store.tasks().first?.state == .waitingForUnlock)
    #expect(try await Protfs.run(["--device", t.root, "unlock"]).status == 0)
    await waitFor(.completed)
    #expect(try store.tasks().first?.state == .completed)
    #expect(FileManager.default.contents(atPath: t.containerPath(app, "Documents/report.pdf")) == Data("report".utf8))
  }
}

/// `protfs app terminate --user` while the app's session streams its events.
@Suite(.timeLimit(.minutes(2))) struct SessionServiceForceQuitTests {
  @Test func theForceQuitAppsSubscriptionEndsBeforeItsTasksAreCancelledAndTheNextOneGetsTheCancellation()
    async throws
  {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try FaultServer(
      body: DownloadFixture.bytes(1 << 20), entityTag: "\"q\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    defer { client.detach() }
    // The app's subscription, read as its process reads it, until the service ends it or a
    // completion comes.
    let connection = try ControlSocket.connect(f.socketName, servers: [0])
    let request = SessionServiceRequest.subscribe(session: "\(SessionServiceFixture.app).bg")
    let line = try JSONEncoder().encode(request) + Data("\n".utf8)
    #expect(line.withUnsafeBytes { send(connection.rawValue, $0.baseAddress, $0.count, 0) } == line.count)
    async let streamed = offPool { () -> [SessionEvent] in
      var events: [SessionEvent] = []
      while let text = ControlSocket.readLine(connection) {
        guard let event = try? JSONDecoder().decode(SessionEvent.self, from: Data(text.utf8)) else { continue }
        events.append(event)
        if case .completed = event { break }
      }
      return events
    }
    let task = try client.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: nil)
    try client.resume(task.id)
    await f.waitForTemporaryFile(bytes: 300_000)

    try SessionServiceClient.forceQuit(bundleID: SessionServiceFixture.app, socketName: f.socketName)
    let events = await streamed
    #expect(events.contains(.queuedEventsDelivered), "\(events)")
    #expect(!events.contains { if case .completed = $0 { true } else { false } }, "\(events)")
    await f.waitUntil { (try? f.tasks())?.first?.state == .failed }
    #expect(try f.tasks().first?.failure?.code == .cancelled)

    // Launched again, the app subscribes and gets the cancellation, with its reason.
    let log = EventLog()
    try client.subscribe { log.add($0) }
    await f.waitUntil { log.completed.contains(task.id) }
    let snapshot = log.events.withLock { list in
      list.lazy.compactMap { if case .completed(task.id, let snapshot, _) = $0 { snapshot } else { nil } }.first
    }
    #expect(snapshot?.cancelledReason == .userForceQuitApplication, "\(snapshot as Any)")
    server.openGate()
  }
}
