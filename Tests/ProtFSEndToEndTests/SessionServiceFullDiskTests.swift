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
    defer { client.invalidate(cancelling: false) }
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

  /// A fresh directory with a 2 MiB tmpfs mounted on it.
  static func mountSmallDisk() async throws -> String {
    let mountPoint = try TestDevice.makeTemporaryDirectory(prefix: "protfs-full-disk")
    let mounted = try await Protfs.runProgram("/bin/mount", ["-t", "tmpfs", "-o", "size=2m", "none", mountPoint])
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
