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
  init(device: TestDevice? = nil) async throws {
    t = try device ?? TestDevice()
    try #require(try await Protfs.run(["--device", t.root, "init", Self.app]).status == 0)
  }

  /// A fixture on `device`, whose container of `app` exists already.
  init(existing device: TestDevice) {
    t = device
  }

  var socketName: String { SessionServiceClient.socketName(device: t.device) }

  /// The pid of the running service, if one answers.
  var servicePID: Int32? { SessionServiceClient.ping(socketName: socketName) }

  /// Starts a service in this process with `launcher`.
  func startInProcess(
    launcher: (any SessionAppLauncher)? = nil, idleExit: Double = 600, lineTimeout: Double = ControlSocket.lineTimeout
  ) throws {
    let service = try SessionService(device: t.device, launcher: launcher, idleExit: idleExit, lineTimeout: lineTimeout)
    self.service = service
    let ready = DispatchSemaphore(value: 0)
    let ended = self.ended
    // A service that cannot listen (another holds the socket) says so here, not by not answering.
    let failure = Mutex<ProtFSError?>(nil)
    let thread = Thread {
      do throws(ProtFSError) {
        try service.run { ready.signal() }
      } catch {
        failure.withLock { $0 = error }
        ready.signal()
      }
      ended.signal()
    }
    thread.start()
    ready.wait()
    if let error = failure.withLock({ $0 }) {
      ended.wait()
      self.service = nil
      throw error
    }
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
    _ = try? Protfs.runBlocking(["--device", t.root, "sessions", "stop"])
    waitUntilBlocking(timeout: 10) { !isProcess(pid, namedBy: t.root) }
    killIfStill(pid, namedBy: t.root)
    #expect(!isProcess(pid, namedBy: t.root), "the session service \(pid) is still running")
  }

  /// A client of the service's background session `<app>.bg`.
  func openClient(launchEvents: Bool = true) throws -> SessionServiceClient {
    var configuration = SessionConfiguration(identifier: "\(Self.app).bg", bundleID: Self.app)
    configuration.socketName = socketName
    configuration.sendsLaunchEvents = launchEvents
    return try SessionServiceClient.open(configuration)
  }

  /// Waits until a temp file in the container's nsurlsessiond Downloads directory holds at least
  /// `bytes`.
  func waitForTemporaryFile(bytes: Int) async {
    let downloads = downloads
    await waitUntil {
      let names = (try? FileManager.default.contentsOfDirectory(atPath: downloads)) ?? []
      return names.contains {
        ((try? FileManager.default.attributesOfItem(atPath: downloads + "/" + $0)[.size] as? Int) ?? 0) >= bytes
      }
    }
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

extension AppDevice {
  /// Puts the built example `name` in the device's scratch directory, where the app user reaches it
  /// (not .build under root's tree): a hard link, or a copy across file systems; returns its path.
  func installExample(_ name: String) throws -> String {
    let built = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().appendingPathComponent(name).path
    let example = scripts + "/" + name
    if link(built, example) != 0 { try FileManager.default.copyItem(atPath: built, toPath: example) }
    chmod(example, 0o755)
    return example
  }

  /// Ends the app (its process group), its supervisor and the device's session service, whatever
  /// state a test left them in; checks the service is gone.
  func endAppAndSessionService() {
    endApp()
    if let pid = SessionServiceClient.ping(socketName: SessionServiceClient.socketName(device: t.device)) {
      _ = try? Protfs.runBlocking(["--device", root, "sessions", "stop"])
      #expect(!isProcess(pid, namedBy: root), "the session service \(pid) is still running")
    }
  }
}
