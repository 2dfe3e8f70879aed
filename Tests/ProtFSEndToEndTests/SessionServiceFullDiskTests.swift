import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The session service on a full disk: a device on a 2 MiB tmpfs.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SessionServiceFullDiskTests {
  let app = SessionServiceFixture.app

  @Test func aDownloadLargerThanTheDiskFailsClearlyAndTheServiceGoesOn() async throws {
    let mountPoint = try await Self.mountSmallDisk()
    defer { Self.unmount(mountPoint) }
    let f = try await SessionServiceFixture(device: TestDevice(directory: mountPoint, containers: []))
    defer { f.stop() }
    let big = DownloadFixture.bytes(4 << 20)
    let server = try FaultServer(body: big, entityTag: "\"b1\"", mode: .normal)
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("big.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    await f.waitUntil { (try? f.tasks())?.first.map { !$0.state.isUnfinished } == true }
    let failed = try #require(try f.tasks().first)
    #expect(failed.state == .failed, "\(failed)")
    #expect(failed.errorNumber == ENOSPC, "\(failed)")
    let message = failed.errorMessage ?? ""
    #expect(message.lowercased().contains("no space"), "\(message)")

    // The service answers; the destination holds nothing, not even part of the file.
    let listed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(listed.status == 0, "\(listed)")
    #expect(listed.stdout.contains("\"serviceRunning\" : true"), "\(listed)")
    let documents = f.t.containerPath(app, "Documents")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: documents)) ?? []).isEmpty)
    let tasks = try await Protfs.run(["--device", f.t.root, "tasks"])
    #expect(tasks.status == 0 && tasks.stderr.contains("No space left on device"), "\(tasks)")
    // The failed task's temp file does not keep the disk full.
    let temps = (try? FileManager.default.contentsOfDirectory(atPath: f.downloads)) ?? []
    #expect(temps.isEmpty, "\(temps)")

    // A file that fits goes through the same service.
    let small = DownloadFixture.bytes(256 << 10)
    server.setContent(small, entityTag: "\"s1\"")
    let next = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("small.bin").absoluteString,
    ])
    #expect(next.status == 0, "\(next)")
    await f.waitUntil { (try? f.tasks())?.last.map { !$0.state.isUnfinished } == true }
    let done = try f.tasks()
    #expect(done.count == 2 && done.last?.state == .completed, "\(done)")
    #expect(FileManager.default.contents(atPath: documents + "/small.bin") == Data(small))
    #expect(!FileManager.default.fileExists(atPath: documents + "/big.bin"))
  }

  @Test func aDiskThatFillsUpMidTransferFailsTheTaskAndTheServiceGoesOn() async throws {
    let mountPoint = try await Self.mountSmallDisk()
    defer { Self.unmount(mountPoint) }
    let f = try await SessionServiceFixture(device: TestDevice(directory: mountPoint, containers: []))
    defer { f.stop() }
    let body = DownloadFixture.bytes(1 << 20)
    let server = try FaultServer(body: body, entityTag: "\"m1\"", mode: .gateAfter(bytes: 100_000))
    defer { server.stop() }
    let detached = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("mid.bin").absoluteString,
    ])
    #expect(detached.status == 0, "\(detached)")
    await f.waitUntil { ((try? f.tasks())?.first?.bytesReceived ?? 0) > 0 }
    // Another writer takes every free byte while the transfer waits at the gate: the store cannot
    // grow either.
    let filler = mountPoint + "/filler"
    let filled = try await Protfs.runProgram("/bin/dd", ["if=/dev/zero", "of=" + filler, "bs=4096"])
    #expect(filled.stderr.contains("No space left on device"), "\(filled)")
    server.openGate()
    await f.waitUntil { (try? f.tasks())?.first.map { !$0.state.isUnfinished } == true }
    let failed = try #require(try f.tasks().first)
    #expect(failed.state == .failed && failed.errorNumber == ENOSPC, "\(failed)")
    let listed = try await Protfs.run(["--device", f.t.root, "sessions", "--json"])
    #expect(listed.status == 0 && listed.stdout.contains("\"serviceRunning\" : true"), "\(listed)")
    let documents = f.t.containerPath(app, "Documents")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: documents)) ?? []).isEmpty)

    // Space freed, the same download goes through.
    unlink(filler)
    server.setMode(.normal)
    let again = try await Protfs.run([
      "--device", f.t.root, "download", "--bundle", app, "--detach", server.url("mid.bin").absoluteString,
    ])
    #expect(again.status == 0, "\(again)")
    await f.waitUntil { (try? f.tasks())?.last.map { !$0.state.isUnfinished } == true }
    #expect(try f.tasks().last?.state == .completed)
    #expect(FileManager.default.contents(atPath: documents + "/mid.bin") == Data(body))
  }

  @Test func anAppsHandedOverTaskOnAFullDiskCompletesWithTheErrorAndTheServiceGoesOn() async throws {
    let mountPoint = try await Self.mountSmallDisk()
    defer { Self.unmount(mountPoint) }
    let f = try await SessionServiceFixture(device: TestDevice(directory: mountPoint, containers: []))
    try f.startInProcess()
    defer { f.stop() }
    let body = DownloadFixture.bytes(3 << 20)
    let server = try FaultServer(body: body, entityTag: "\"h1\"", mode: .normal)
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    defer { client.detach() }
    let log = EventLog()
    try client.subscribe { log.add($0) }
    let task = try client.createDownloadTask(SessionRequest(url: server.url("big.bin")), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { log.completed.contains(task.id) }
    let error = log.events.withLock { list in
      list.lazy.compactMap { if case .completed(task.id, _, let error) = $0 { error } else { nil } }.first
    }
    #expect(error?.errno == ENOSPC && error?.message.contains("No space left on device") == true, "\(error as Any)")
    #expect(log.location(of: task.id) == nil, "a failed task handed a file over")
    #expect(((try? FileManager.default.contentsOfDirectory(atPath: f.downloads)) ?? []).isEmpty)

    // With not a byte free, a new task is refused with the reason; the service answers on.
    let filler = mountPoint + "/filler"
    _ = try await Protfs.runProgram("/bin/dd", ["if=/dev/zero", "of=" + filler, "bs=4096"])
    let small = DownloadFixture.bytes(64 << 10)
    server.setContent(small, entityTag: "\"h2\"")
    do {
      let refused = try client.createDownloadTask(SessionRequest(url: server.url("small.bin")), resumeData: nil)
      try client.resume(refused.id)
      await f.waitUntil { log.completed.contains(refused.id) }
      #expect(log.location(of: refused.id) == nil)
      let failure = log.events.withLock { list in
        list.lazy.compactMap { if case .completed(refused.id, _, let error) = $0 { error } else { nil } }.first
      }
      #expect(failure?.message.contains("No space left on device") == true, "\(failure as Any)")
    } catch {
      #expect(error.message.contains("full") || error.message.contains("No space"), "\(error)")
    }
    #expect(f.servicePID == getpid())

    // Space freed, a task completes and its file is handed over.
    unlink(filler)
    let next = try client.createDownloadTask(SessionRequest(url: server.url("small.bin")), resumeData: nil)
    try client.resume(next.id)
    await f.waitUntil { log.completed.contains(next.id) }
    let location = try #require(log.location(of: next.id), "\(log.events.withLock { $0 })")
    #expect(FileManager.default.contents(atPath: location) == Data(small))
    try client.acknowledge(next.id)
  }

  /// The store is full when the transfer ends (its own 1 MiB tmpfs at `.protfs`, the container on
  /// the test's disk, and the log checkpointed away before the disk fills, so no write of the store
  /// finds room): the app still hears how its task ended, and the store records it once there is
  /// space again.
  @Test func aTaskWhoseEndTheFullStoreCannotRecordIsDeliveredAndRecordedOnceThereIsSpace() async throws {
    let f = try await SessionServiceFixture()
    // The device's state (the store among it) moves onto a 1 MiB tmpfs of its own.
    let state = f.t.path(".protfs")
    let small = try await Self.mountSmallDisk(size: "1m")
    defer { Self.unmount(small) }
    let copied = try await Protfs.runProgram("/bin/cp", ["-a", state + "/.", small])
    try #require(copied.status == 0, "\(copied)")
    let moved = try await Protfs.runProgram("/bin/mount", ["--move", small, state])
    try #require(moved.status == 0, "\(moved)")
    defer { Self.unmount(state) }
    try f.startInProcess()
    defer { f.stop() }
    let body = DownloadFixture.bytes(256 << 10)
    let server = try FaultServer(body: body, entityTag: "\"s1\"", mode: .gateAfter(bytes: 64 << 10))
    defer { server.stop() }
    let client = try f.openClient(launchEvents: false)
    defer { client.detach() }
    let log = EventLog()
    try client.subscribe { log.add($0) }
    let task = try client.createDownloadTask(SessionRequest(url: server.url("kept.bin")), resumeData: nil)
    try client.resume(task.id)
    await f.waitUntil { ((try? f.tasks())?.first?.bytesReceived ?? 0) > 0 }

    // The log is folded into the database, so that every later write of the store needs new space.
    let checkpoint = try await Protfs.runProgram(
      "/usr/bin/sqlite3", ["-cmd", ".timeout 10000", f.t.device.downloadStorePath, "PRAGMA wal_checkpoint(TRUNCATE);"])
    #expect(checkpoint.stdout == "0|0|0\n", "\(checkpoint)")
    let filler = state + "/filler"
    let filled = try await Protfs.runProgram("/bin/dd", ["if=/dev/zero", "of=" + filler, "bs=4096"])
    #expect(filled.stderr.contains("No space left on device"), "\(filled)")
    server.openGate()

    // The transfer ended well: the app hears so, and gets the file, while the store cannot say it.
    await f.waitUntil { log.completed.contains(task.id) }
    let location = try #require(log.location(of: task.id), "\(log.events.withLock { $0 })")
    #expect(FileManager.default.contents(atPath: location) == Data(body))
    let error = log.events.withLock { list in
      list.lazy.compactMap { if case .completed(task.id, _, let error) = $0 { error } else { nil } }.first
    }
    #expect(error == nil, "\(error as Any)")
    #expect(try f.tasks().first?.state == .running, "the store had room for the task's end")
    // The app's acknowledgement is taken too, and recorded later.
    try client.acknowledge(task.id)

    unlink(filler)
    await f.waitUntil { (try? f.tasks())?.first?.delivery == .delivered }
    let recorded = try #require(try f.tasks().first)
    #expect(recorded.state == .completed && recorded.bytesReceived == Int64(body.count), "\(recorded)")
    #expect(recorded.delivery == .delivered, "\(recorded)")
    // Delivered once: a new subscription is sent nothing of it.
    let again = try f.openClient(launchEvents: false)
    defer { again.detach() }
    let later = EventLog()
    try again.subscribe { later.add($0) }
    await f.waitUntil {
      later.events.withLock { $0.contains { if case .queuedEventsDelivered = $0 { true } else { false } } }
    }
    #expect(later.completed.isEmpty, "\(later.events.withLock { $0 })")
    #expect(f.servicePID == getpid())
  }

  /// A fresh directory with a tmpfs of `size` (2 MiB by default) mounted on it.
  static func mountSmallDisk(size: String = "2m") async throws -> String {
    let mountPoint = try TestDevice.makeTemporaryDirectory(prefix: "protfs-full-disk")
    let mounted = try await Protfs.runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=" + size, "none", mountPoint])
    guard mounted.status == 0 else {
      rmdir(mountPoint)
      throw ProtFSError(.io, "Cannot mount a tmpfs on '\(mountPoint)': \(mounted.stderr)")
    }
    return mountPoint
  }

  /// Unmounts `mountSmallDisk()`'s tmpfs (lazily, should a file still be open) and removes the directory.
  static func unmount(_ mountPoint: String) {
    _ = try? Protfs.runProgramBlocking("/bin/umount", ["-l", mountPoint])
    rmdir(mountPoint)
  }
}
