import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The service through its client, as an app's URLSession uses it: handed-over files, their
/// acknowledgement, deliveries across a restart, relaunch and force-quit.
@Suite(.timeLimit(.minutes(2))) struct SessionServiceClientTests {
  let app = SessionServiceFixture.app

  @Test func handedOverFilesAreDeletedOnAcknowledgementUnlessMoved() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try NginxServer()
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let log = EventLog()
    try client.subscribe { log.add($0) }
    var tasks: [Int64] = []
    for name in ["a.bin", "b.bin"] {
      let url = try server.put(Data(DownloadFixture.bytes(100_000)), at: name)
      let task = try client.createDownloadTask(SessionRequest(url: url), resumeData: nil)
      try client.resume(task.id)
      tasks.append(task.id)
    }
    let created = tasks
    await f.waitUntil { Set(log.completed) == Set(created) }
    let kept = try #require(log.location(of: tasks[0]), "\(log.events.withLock { $0 })")
    let dropped = try #require(log.location(of: tasks[1]))
    let moved = f.t.containerPath(app, "Documents/a.bin")
    let label = f.t.rawClass(kept)
    #expect(rename(kept, moved) == 0)
    try client.acknowledge(tasks[0])
    try client.acknowledge(tasks[1])
    await f.waitUntil { !FileManager.default.fileExists(atPath: dropped) }
    #expect(!FileManager.default.fileExists(atPath: dropped))
    #expect(FileManager.default.fileExists(atPath: moved))
    #expect(label != nil && f.t.rawClass(moved) == label)
    client.detach()
  }

  /// An app's background download takes the server's answer whatever its status, as nsurlsessiond
  /// does: a 404's body is the file handed over, and the task completes without an error, its
  /// response carrying the status and the header fields, for the app to check.
  @Test func aBackgroundDownloadOfAnErrorPageHandsItOverWithItsStatus() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try FaultServer(body: Array("found".utf8), mode: .alwaysStatus(404))
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let log = EventLog()
    try client.subscribe { log.add($0) }
    let task = try client.createDownloadTask(SessionRequest(url: server.url("missing.json")), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { log.completed.contains(task.id) }
    let location = try #require(log.location(of: task.id), "\(log.events.withLock { $0 })")
    let page = try #require(FileManager.default.contents(atPath: location))
    #expect(String(decoding: page, as: UTF8.self).contains("404"), "\(String(decoding: page, as: UTF8.self))")
    let completion = log.events.withLock { $0 }.compactMap { event -> SessionTaskSnapshot? in
      if case .completed(let id, let snapshot, let error) = event, id == task.id, error == nil { return snapshot }
      return nil
    }.first
    let snapshot = try #require(completion, "\(log.events.withLock { $0 })")
    #expect(snapshot.statusCode == 404)
    #expect(snapshot.responseHeaders?.contains { $0.name.lowercased() == "content-type" } == true)
    // The response comes before the file, so that didFinishDownloadingTo can read its status.
    let kinds = log.events.withLock { $0 }.compactMap { event -> String? in
      switch event {
      case .receivedResponse(task.id, _, 404, _): "response"
      case .finishedDownloading(task.id, _): "file"
      case .completed(task.id, _, _): "completed"
      default: nil
      }
    }
    #expect(kinds == ["response", "file", "completed"], "\(log.events.withLock { $0 })")
    // A server's header fields are kept up to 16 KiB: a hostile one cannot swell the store.
    let padded = try FaultServer(body: Array("ok".utf8), mode: .hugeHeader(bytes: 60_000))
    defer { padded.stop() }
    let big = try client.createDownloadTask(SessionRequest(url: padded.url("padded.bin")), resumeData: nil)
    try client.resume(big.id)
    await f.waitUntil { log.completed.contains(big.id) }
    let kept = log.events.withLock { $0 }.compactMap { event -> [SessionHeader]? in
      if case .completed(big.id, let snapshot, nil) = event { return snapshot.responseHeaders }
      return nil
    }.first
    let fields = try #require(kept, "\(log.events.withLock { $0 })")
    #expect(!fields.isEmpty && !fields.contains { $0.name == "X-Padding" }, "\(fields.map(\.name))")
    #expect(fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count } <= 16384)
    client.detach()
  }

  /// An app that dies after its `didFinishDownloadingTo` returned (the file acknowledged) and
  /// before its `didCompleteWithError` did gets that completion, alone, from its next session:
  /// each task completes to the app exactly once, and the file is not offered again.
  @Test func anAppDyingBetweenTheFileAndTheCompletionGetsTheCompletionAloneNextTime() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try NginxServer()
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let log = EventLog()
    try client.subscribe { log.add($0) }
    let url = try server.put(Data(DownloadFixture.bytes(50_000)), at: "a.bin")
    let task = try client.createDownloadTask(SessionRequest(url: url), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { log.completed == [task.id] }
    let location = try #require(log.location(of: task.id))
    // didFinishDownloadingTo returned, leaving the file; then the app died.
    try client.acknowledgeFile(task.id)
    client.detach()
    await f.waitUntil { !FileManager.default.fileExists(atPath: location) }
    #expect(try f.tasks().first?.delivery == .fileDelivered)
    // The next run of the app: the completion, without the file.
    let again = try f.openClient(launchEvents: false)
    let next = EventLog()
    try again.subscribe { next.add($0) }
    await f.waitUntil { next.events.withLock { $0.contains(.queuedEventsDelivered) } }
    #expect(next.completed == [task.id], "\(next.events.withLock { $0 })")
    #expect(next.location(of: task.id) == nil, "the file was offered again")
    let events = try await Protfs.run(["--device", f.t.root, "tasks", "events", "--session", "\(app).bg", "--json"])
    #expect(events.status == 0, "\(events)")
    #expect(
      events.stdout.contains("didCompleteWithError") && !events.stdout.contains("didFinishDownloadingTo"), "\(events)")
    try again.acknowledge(task.id)
    await f.waitUntil { (try? f.tasks().first?.delivery) == .delivered }
    #expect(try store(f).pendingDeliveries(session: "\(app).bg").isEmpty)
    again.detach()
  }

  func store(_ f: SessionServiceFixture) throws -> DownloadStore {
    try DownloadStore(path: f.t.device.downloadStorePath)
  }

  @Test func deliveriesSurviveARestartAndOneBatchLaunchesTheAppOnce() async throws {
    let f = try await SessionServiceFixture()
    let launcher = CountingLauncher()
    try f.startInProcess(launcher: launcher)
    defer { f.stop() }
    let server = try NginxServer()
    defer { server.stop() }
    let client = try f.openClient()
    var tasks: [Int64] = []
    for index in 0..<3 {
      let url = try server.put(Data(DownloadFixture.bytes(20_000 + index)), at: "f\(index).bin")
      tasks.append(try client.createDownloadTask(SessionRequest(url: url), resumeData: nil).id)
    }
    for id in tasks { try client.resume(id) }
    await f.waitUntil {
      ((try? f.tasks())?.allSatisfy { $0.state == .completed } ?? false) && launcher.calls.withLock(\.count) > 0
    }
    let calls = launcher.calls.withLock { $0 }
    let records = try f.tasks()
    #expect(calls.count == 1, "\(records)")
    #expect(calls == ["\(app).bg"])
    f.stop()
    try f.startInProcess()
    let again = try f.openClient()
    let log = EventLog()
    try again.subscribe { log.add($0) }
    await f.waitUntil { log.events.withLock { $0.contains(.queuedEventsDelivered) } }
    #expect(Set(log.completed) == Set(tasks))
    #expect(tasks.allSatisfy { log.location(of: $0) != nil })
    again.detach()
  }

  /// `invalidateAndCancel` reaches the service through the client: its tasks, running or not yet
  /// resumed, are cancelled and the session is gone from the store with them; a later session of
  /// that identifier starts empty.
  @Test func anInvalidatedSessionIsCancelledAndForgotten() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try NginxServer()
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    try client.subscribe { _ in }
    let url = try server.put(Data(DownloadFixture.bytes(50_000)), at: "a.bin")
    let running = try client.createDownloadTask(SessionRequest(url: url), resumeData: nil)
    let waiting = try client.createDownloadTask(SessionRequest(url: url), resumeData: nil)
    try client.resume(running.id)
    client.invalidate(cancelling: true)
    #expect(try store(f).sessions().isEmpty)
    #expect(try f.tasks().isEmpty, "\((try? f.tasks()) ?? [])")
    let again = try f.openClient(launchEvents: false)
    defer { again.detach() }
    #expect(try again.tasks().isEmpty)
    #expect(try store(f).task(id: waiting.id) == nil)
  }

  @Test func forceQuitCancelsTransfersWithResumeDataAndDoesNotRelaunch() async throws {
    let f = try await SessionServiceFixture()
    let launcher = CountingLauncher()
    try f.startInProcess(launcher: launcher)
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .stallAfter(bytes: 300_000))
    defer { server.stop() }
    let client = try f.openClient()
    let task = try client.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { ((try? f.tasks())?.first?.bytesReceived ?? 0) >= 300_000 }
    try SessionServiceClient.forceQuit(bundleID: app, socketName: f.socketName)
    let record = try #require(try f.tasks().first)
    #expect(record.state == .failed)
    #expect(record.failure?.code == .cancelled)
    let temp = try #require(record.temporaryFileName)
    // The partial file waits in the app's tmp/, as iOS leaves it, not in the Downloads directory.
    #expect(FileManager.default.fileExists(atPath: f.t.containerPath(SessionServiceFixture.app, "tmp/" + temp)))
    #expect(!FileManager.default.fileExists(atPath: record.temporaryDirectory + "/" + temp))
    let calls = launcher.calls.withLock { $0 }
    #expect(calls.isEmpty)
  }

  @Test func aForceQuitAppOpeningItsSessionAgainGetsTheCancellationWithItsReasonAndResumeData() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess(launcher: CountingLauncher())
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let client = try f.openClient()
    let task = try client.createDownloadTask(
      SessionRequest(url: server.url("big.bin"), headers: [SessionHeader(name: "X-A", value: "1")]), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { ((try? f.tasks())?.first?.bytesReceived ?? 0) >= 300_000 }
    // The app is gone (its subscription with it), then the user force-quits it.
    client.detach()
    try SessionServiceClient.forceQuit(bundleID: app, socketName: f.socketName)
    server.openGate()
    // Launched again, it opens the session: the cancellation comes, typed, with resume data.
    let again = try f.openClient()
    let log = EventLog()
    try again.subscribe { log.add($0) }
    await f.waitUntil { log.events.withLock { $0.contains(.queuedEventsDelivered) } }
    let completion = log.events.withLock { list in
      list.lazy.compactMap { event -> (SessionTaskSnapshot, ProtFSError?)? in
        if case .completed(task.id, let snapshot, let error) = event { (snapshot, error) } else { nil }
      }.first
    }
    let (snapshot, error) = try #require(completion, "\(log.events.withLock { $0 })")
    #expect(error?.code == .cancelled)
    #expect(snapshot.cancelledReason == .userForceQuitApplication)
    let data = try #require(snapshot.resumeData)
    try again.acknowledge(task.id)
    // The download continues from the kept bytes (a Range request) and completes whole.
    let resumed = try again.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: data)
    try again.resume(resumed.id)
    await f.waitUntil { log.location(of: resumed.id) != nil && log.completed.contains(resumed.id) }
    let location = try #require(log.location(of: resumed.id))
    #expect(FileManager.default.contents(atPath: location) == Data(body))
    #expect(server.requests.last?.headers["range"]?.hasPrefix("bytes=") == true)
    // The resume data carries the task's request headers to the resumed request.
    #expect(server.requests.last?.headers["x-a"] == "1", "\(server.requests.map(\.headers))")
    let finished = log.events.withLock { list in
      list.lazy.compactMap { event -> SessionTaskSnapshot? in
        if case .completed(resumed.id, let snapshot, nil) = event { snapshot } else { nil }
      }.first
    }
    #expect(finished?.cancelledReason == nil)
    try again.acknowledge(resumed.id)
    again.detach()
  }

  /// A download that finished while its app was gone is listed to the relaunched app as running
  /// until its completion is delivered, as iOS lists it: a download manager that rebuilds its list
  /// from the running and suspended tasks (MZDownloadManager) then finds it when the file comes.
  @Test func aTaskWhoseCompletionIsStillToComeIsListedAsRunning() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess(launcher: CountingLauncher())
    defer { f.stop() }
    let server = try FaultServer(body: DownloadFixture.bytes(64 << 10), entityTag: "\"e1\"")
    defer { server.stop() }
    let client = try f.openClient()
    let task = try client.createDownloadTask(SessionRequest(url: server.url("small.bin")), resumeData: nil)
    client.detach()
    let first = try f.openClient()
    try first.resume(task.id)
    first.detach()
    await f.waitUntil { (try? f.tasks())?.first?.state == .completed }
    let again = try f.openClient()
    let listed = try #require(try again.tasks().first { $0.id == task.id })
    #expect(listed.state == "running" && listed.error == nil, "\(listed)")
    let log = EventLog()
    try again.subscribe { log.add($0) }
    await f.waitUntil { log.completed.contains(task.id) }
    try again.acknowledge(task.id)
    await f.waitUntil { (try? again.tasks())?.isEmpty == true }
    again.detach()
  }

  /// The partial file a force-quit left in the app's tmp/ goes back to be continued only when it is
  /// a private regular file: the app's hard link there to a file of the device's state is left
  /// alone, the file it links to untouched, and the download starts over.
  @Test func aHardLinkTheAppPutsInPlaceOfItsPartialFileIsNeverContinued() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess(launcher: CountingLauncher())
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"e1\"", mode: .gateAfter(bytes: 300_000))
    defer { server.stop() }
    let client = try f.openClient()
    let task = try client.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { ((try? f.tasks())?.first?.bytesReceived ?? 0) >= 300_000 }
    client.detach()
    try SessionServiceClient.forceQuit(bundleID: app, socketName: f.socketName)
    let record = try #require(try f.tasks().first)
    let parked = f.t.containerPath(SessionServiceFixture.app, "tmp/" + (record.temporaryFileName ?? ""))
    #expect(FileManager.default.fileExists(atPath: parked))
    // The app swaps its partial file for a hard link to a file of the device's state.
    let victim = f.t.device.stateDirectory + "/victim"
    let before = Data("root's own".utf8)
    #expect(FileManager.default.createFile(atPath: victim, contents: before))
    #expect(unlink(parked) == 0 && link(victim, parked) == 0)
    server.openGate()
    let again = try f.openClient()
    let log = EventLog()
    try again.subscribe { log.add($0) }
    await f.waitUntil { log.events.withLock { $0.contains(.queuedEventsDelivered) } }
    let data = try #require(
      log.events.withLock { list in
        list.lazy.compactMap { event -> Data? in
          if case .completed(task.id, let snapshot, _) = event { snapshot.resumeData } else { nil }
        }.first
      })
    try again.acknowledge(task.id)
    let resumed = try again.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: data)
    try again.resume(resumed.id)
    await f.waitUntil { log.location(of: resumed.id) != nil && log.completed.contains(resumed.id) }
    #expect(FileManager.default.contents(atPath: log.location(of: resumed.id) ?? "") == Data(body))
    #expect(FileManager.default.contents(atPath: victim) == before)
    var status = stat()
    #expect(lstat(parked, &status) == 0 && status.st_nlink == 2)
    // Nothing continued: the whole body came again, without a Range.
    #expect(server.requests.last?.headers["range"] == nil, "\(server.requests.map(\.headers))")
    again.detach()
  }

  /// A task resumed with an earliest begin date (`earliestBeginDate`) is not begun before it, also
  /// by a service started again meanwhile (the date is kept with the task), and completes after;
  /// `tasks --json` shows the date. A task that has begun keeps going when resumed with a date.
  @Test func aTaskWithAnEarliestBeginDateBeginsNoSoonerAlsoAfterARestart() async throws {
    let f = try await SessionServiceFixture()
    try f.startInProcess()
    defer { f.stop() }
    let server = try FaultServer(body: DownloadFixture.bytes(20_000))
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    let task = try client.createDownloadTask(SessionRequest(url: server.url()), resumeData: nil)
    let notBefore = Date().addingTimeInterval(2)
    try client.resume(task.id, notBefore: notBefore)
    #expect(try f.tasks().first?.earliestBegin == notBefore.timeIntervalSince1970)
    let listed = try await Protfs.run(["--device", f.t.root, "tasks", "--json"])
    #expect(listed.status == 0 && listed.stdout.contains("\"earliestBeginDate\""), "\(listed)")
    // A date no printed form can show is refused, and the task stays as it was.
    let other = try client.createDownloadTask(SessionRequest(url: server.url()), resumeData: nil)
    #expect(throws: ProtFSError.self) { try client.resume(other.id, notBefore: Date(timeIntervalSince1970: 1e300)) }
    #expect(try f.tasks().first { $0.id == other.id }?.state == .suspended)
    try client.cancel(other.id, producingResumeData: false)
    client.detach()
    // A service started again reads the date from the store.
    f.stop()
    try f.startInProcess()
    let again = try f.openClient(launchEvents: false)
    let log = EventLog()
    try again.subscribe { log.add($0) }
    await f.waitUntil { log.completed.contains(task.id) }
    #expect(log.completed.contains(task.id), "\(log.events.withLock { $0 })")
    #expect(try f.tasks().first { $0.id == task.id }?.state == .completed)
    let first = try #require(server.requests.first)
    #expect(first.receivedAt >= notBefore.addingTimeInterval(-0.05), "began \(first.receivedAt), date \(notBefore)")
    again.detach()
  }
}
