import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// A device with one container whose session service, started by the CLI or in this process, is
/// always stopped by `stop()` (the tests check its pid is gone).
final class SessionServiceFixture: @unchecked Sendable {
  static let app = "com.example.app"
  let t: TestDevice
  var service: SessionService?
  private var serviceThread: Thread?
  private let ended = DispatchSemaphore(value: 0)

  /// A fixture on `device` (a fresh one by default).
  init(device: TestDevice? = nil) throws {
    t = try device ?? TestDevice()
    try #require(try Protfs.run(["--device", t.root, "init", Self.app]).status == 0)
  }

  var socketName: String { SessionServiceClient.socketName(device: t.device) }

  /// The pid of the running service, if one answers.
  var servicePID: Int32? { SessionServiceClient.ping(socketName: socketName) }

  /// Starts a service in this process with `launcher`.
  func startInProcess(launcher: (any SessionAppLauncher)? = nil, idleExit: Double = 600) throws {
    let service = try SessionService(device: t.device, launcher: launcher, idleExit: idleExit)
    self.service = service
    let ready = DispatchSemaphore(value: 0)
    let ended = self.ended
    let thread = Thread {
      do { try service.run { ready.signal() } } catch { ready.signal() }
      ended.signal()
    }
    thread.start()
    ready.wait()
  }

  /// Stops whichever service runs and waits until it is gone.
  func stop() {
    if let service {
      service.stop()
      ended.wait()
      self.service = nil
      return
    }
    guard let pid = servicePID else { return }
    _ = try? Protfs.run(["--device", t.root, "sessions", "stop"])
    waitUntilBlocking(timeout: 10) { !DownloadStore.processIsAlive(pid) }
    if DownloadStore.processIsAlive(pid) { kill(pid, SIGKILL) }
    #expect(!DownloadStore.processIsAlive(pid), "the session service \(pid) is still running")
  }

  /// The task store's records.
  func tasks() throws -> [DownloadTaskRecord] { try DownloadStore(path: t.device.downloadStorePath).tasks() }

  /// Waits (polling the condition off the cooperative pool, at most `timeout` seconds) until
  /// `condition` holds.
  func waitUntil(timeout: Double = 30, _ condition: @escaping @Sendable () -> Bool) async {
    _ = await offPool { () -> Bool in
      let deadline = Date().addingTimeInterval(timeout)
      while !condition(), Date() < deadline { usleep(10_000) }
      return true
    }
  }

  /// Polls `condition` on this thread (for a `defer`, which cannot wait asynchronously).
  func waitUntilBlocking(timeout: Double, _ condition: () -> Bool) {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition(), Date() < deadline { usleep(10_000) }
  }

  /// The container's nsurlsessiond Downloads directory.
  var downloads: String {
    t.containerPath(Self.app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(Self.app)")
  }
}

/// `protfs ARGS`, waited for off the cooperative pool (other tests' async work needs its threads).
func runProtfs(_ arguments: [String]) async throws -> RunResult {
  try await offPool { Result { try Protfs.run(arguments) } }.get()
}

/// A launcher that counts its calls.
final class CountingLauncher: SessionAppLauncher {
  let calls = Mutex<[String]>([])
  func deliverEvents(of session: String, to bundleID: String) throws(ProtFSError) {
    calls.withLock { $0.append(session) }
  }
  func isForceQuit(_ bundleID: String) -> Bool { false }
}

/// Collects a subscription's events.
final class EventLog: Sendable {
  let events = Mutex<[SessionEvent]>([])
  func add(_ event: SessionEvent) { events.withLock { $0.append(event) } }
  var completed: [Int64] {
    events.withLock { list in
      list.compactMap { if case .completed(let id, _, _) = $0 { id } else { nil } }
    }
  }
  func location(of task: Int64) -> String? {
    events.withLock { list in
      list.lazy.compactMap { if case .finishedDownloading(task, let path) = $0 { path } else { nil } }.first
    }
  }
}
