import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A fresh device with one container that the app user can reach, and scripts to run as apps.
struct AppDevice {
  static let bundle = "com.example.app"
  let t: TestDevice
  let scripts: String
  var root: String { t.root }

  /// The protfs binary as the app user reaches it (the helper commands an app runs): the build
  /// directory may be below one only root may enter (a clone in a 0700 `mktemp -d`), so the binary
  /// is linked (or copied) into the scripts directory.
  let protfsForApps: String

  /// The device, with the containers of `neighbours` (other apps) beside the app's.
  init(neighbours: [String] = []) throws {
    t = try TestDevice(containers: [Self.bundle] + neighbours)
    chmod(t.directory, 0o755)  // the app user must reach the device
    scripts = try TestDevice.makeTemporaryDirectory(prefix: "protfs-app-scripts")
    chmod(scripts, 0o755)
    protfsForApps = scripts + "/protfs"
    if link(Protfs.binary, protfsForApps) != 0 {
      try FileManager.default.copyItem(atPath: Protfs.binary, toPath: protfsForApps)
    }
    chmod(protfsForApps, 0o755)
  }

  /// Kills the app (its process group) and its supervisor, whatever state a test left them in, if
  /// the pids the app's record kept are still this device's processes.
  func endApp() {
    if let pid = record()["pid"] as? Int { killIfStill(pid_t(pid), namedBy: root, group: true) }
    if let pid = record()["supervisorPID"] as? Int { killIfStill(pid_t(pid), namedBy: root) }
  }

  /// Runs `protfs --device ROOT ARGS` and waits; an app it launches gets `environment` too.
  func protfs(_ arguments: [String], environment: [String: String] = [:]) async throws -> RunResult {
    try await Protfs.run(["--device", root] + arguments, environment: Self.passedToTheApp(environment))
  }

  /// `variables` for protfs, and each again as `PROTFS_CHILD_NAME`, so that an app protfs starts
  /// gets them: an app's environment is built for it, with only what its caller passes on purpose.
  static func passedToTheApp(_ variables: [String: String]) -> [String: String] {
    var both = variables
    for (name, value) in variables { both["PROTFS_CHILD_" + name] = value }
    return both
  }

  /// Writes an XML Info.plist of `keys` (`UIBackgroundModes: modes` among them) to the scripts
  /// directory; returns its path.
  func infoPlist(modes: [String], _ keys: [String: Any] = [:]) throws -> String {
    let path = scripts + "/Info.plist"
    var info = keys
    info["UIBackgroundModes"] = modes
    try PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)
      .write(to: URL(fileURLWithPath: path))
    return path
  }

  /// Writes an executable script; returns its path.
  func script(_ name: String, _ text: String) throws -> String {
    let path = scripts + "/" + name
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    chmod(path, 0o755)
    return path
  }

  /// The record of the app (or of `bundle`) as JSON.
  func record(_ bundle: String = Self.bundle) -> [String: Any] {
    let path = root + "/.protfs/apps/\(bundle).json"
    guard let data = FileManager.default.contents(atPath: path),
      let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    else { return [:] }
    return object
  }

  /// The crash reports, parsed.
  func crashReports() -> [[String: Any]] {
    let directory = root + "/.protfs/crash-reports"
    let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
    return names.sorted().compactMap { name in
      FileManager.default.contents(atPath: directory + "/" + name).flatMap {
        try? JSONSerialization.jsonObject(with: $0) as? [String: Any]
      }
    }
  }

  /// Starts `protfs app launch BUNDLE OPTIONS -- CMD` (BUNDLE the app's, or `bundle`), with
  /// `environment` added to this process's, in `directory` when given.
  func launch(
    _ options: [String], _ command: [String], environment: [String: String] = [:], bundle: String = Self.bundle,
    directory: String? = nil
  ) throws -> RunningApp {
    try RunningApp(
      device: self, arguments: ["--device", root, "app", "launch", bundle] + options + ["--"] + command,
      environment: environment, bundle: bundle, directory: directory)
  }

  /// Polls the app's record until its state is `state` (the record is the only place it shows), at
  /// most 20 s, off the cooperative pool.
  func waitForState(_ state: String) async -> Bool {
    await waitForRecord { $0["state"] as? String == state }
  }

  /// Polls the app's record until `matches` accepts it, at most 20 s, off the cooperative pool.
  func waitForRecord(_ matches: @escaping @Sendable ([String: Any]) -> Bool) async -> Bool {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        if matches(record()) { return true }
        usleep(20_000)
      }
      return false
    }
  }

  /// The app's pid once its record names it (polled, at most 20 s, off the cooperative pool), or
  /// nil. The supervisor writes it just after the app starts, so an app's first output can come
  /// before it: a test that saw that output still waits here.
  func recordedPID() async -> Int? {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        if let pid = record()["pid"] as? Int { return pid }
        usleep(5_000)
      }
      return nil
    }
  }

  /// The result of the app's last fetch once its record shows one (polled, at most 20 s, off the
  /// cooperative pool), or nil.
  func waitForFetchResult() async -> String? {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        if let fetch = record()["lastFetch"] as? [String: Any] { return fetch["result"] as? String }
        usleep(10_000)
      }
      return nil
    }
  }

  /// Whether every process of the app is stopped, waiting (at most 20 s) for the freezer to
  /// finish: its cgroup (the record names it) says frozen, or, without one, its first process is
  /// stopped (SIGSTOP).
  func waitUntilFrozen() async -> Bool {
    await offPool {
      let deadline = Date() + 20
      while Date() < deadline {
        if let cgroup = record()["cgroup"] as? String {
          let events = (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? ""
          if events.contains("frozen 1") { return true }
        } else if let pid = record()["pid"] as? Int {
          let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
          if stat.split(separator: ")").last?.split(separator: " ").first == "T" { return true }
        }
        usleep(10_000)
      }
      return false
    }
  }

  func remove() {
    TestDevice.removeTree(scripts)
  }
}

/// A running `protfs app launch`, whose standard output (the app's) is read line by line.
///
/// `@unchecked Sendable`: `lines` and `ended` are guarded by `condition`.
final class RunningApp: @unchecked Sendable {
  let process = TestProcess()
  let device: AppDevice
  private let condition = NSCondition()
  private var lines: [(String, Date)] = []
  private var ended = false

  /// The app it runs.
  let bundle: String

  init(
    device: AppDevice, arguments: [String], environment added: [String: String] = [:],
    bundle: String = AppDevice.bundle, directory: String? = nil
  ) throws {
    self.device = device
    self.bundle = bundle
    process.executableURL = URL(fileURLWithPath: Protfs.binary)
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.arguments = arguments
    var environment = ProcessInfo.processInfo.environment
    environment["PROTFS_DEVICE"] = nil
    environment.merge(AppDevice.passedToTheApp(["PROTFS": device.protfsForApps].merging(added) { $1 })) { $1 }
    process.environment = environment
    let output = Pipe()
    process.standardOutput = output
    process.standardInput = FileHandle.nullDevice
    try process.start()
    let reader = output.fileHandleForReading
    Thread { [self] in
      var buffer = Data()
      while true {
        let chunk = reader.availableData
        condition.lock()
        if chunk.isEmpty {
          ended = true
          condition.broadcast()
          condition.unlock()
          return
        }
        buffer += chunk
        while let newline = buffer.firstIndex(of: 0x0A) {
          lines.append((String(decoding: buffer[..<newline], as: UTF8.self), Date()))
          buffer = Data(buffer[(newline + 1)...])
        }
        condition.broadcast()
        condition.unlock()
      }
    }.start()
  }

  /// The first line containing `text` (after the first line containing `earlier`, when given) and
  /// when it was read, waiting up to `timeout` seconds.
  func line(containing text: String, after earlier: String? = nil, timeout: Double = 20) async -> (String, Date)? {
    await offPool { [self] in
      let deadline = Date() + timeout
      condition.lock()
      defer { condition.unlock() }
      while true {
        let start = earlier.map { earlier in lines.firstIndex { $0.0.contains(earlier) }.map { $0 + 1 } ?? lines.count }
        if let found = lines[(start ?? 0)...].first(where: { $0.0.contains(text) }) { return found }
        if ended || !condition.wait(until: deadline) { return nil }
      }
    }
  }

  /// Every line so far.
  var output: [String] {
    condition.lock()
    defer { condition.unlock() }
    return lines.map(\.0)
  }

  /// Waits for `protfs app launch` to end; returns its exit status and when it ended.
  func exit() async -> (Int32, Date) {
    await offPool { [self] in
      process.waitUntilExit()
      let status =
        process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
      return (status, Date())
    }
  }

  /// Ends the app and its supervisor if they still run (a failed test must leave nothing behind).
  func stop() {
    guard process.isRunning else { return }
    if let pid = device.record(bundle)["pid"] as? Int { killIfStill(pid_t(pid), namedBy: device.root, group: true) }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
  }
}

/// A point where a debug build of protfs waits (`DebugHold`, its environment variable naming this
/// FIFO) while the test holds the FIFO open: the test acts in that window, then lets it go on.
struct DebugHoldPoint {
  /// The FIFO, for the environment variable.
  let path: String
  private var writer: Int32 = -1

  /// A FIFO in `directory`.
  init(in directory: String) throws {
    path = directory + "/hold"
    guard mkfifo(path, 0o600) == 0 else {
      throw ProtFSError(.io, "Cannot make the FIFO '\(path)': \(String(cString: strerror(errno))).")
    }
  }

  /// Returns once protfs waits at the point (it opened the FIFO); false when it cannot be held.
  mutating func reached() async -> Bool {
    let path = path
    writer = await offPool { () -> Int32 in open(path, O_WRONLY | O_CLOEXEC) }
    return writer >= 0
  }

  /// Lets protfs go on.
  mutating func release() {
    if writer >= 0 { close(writer) }
    writer = -1
  }

  /// A shell program that says `started`, then runs until a SIGTERM, on which it says `got TERM`
  /// and exits with status 7.
  static let trappingProgram = "trap 'echo got TERM; exit 7' TERM; echo started; while :; do sleep 0.05; done"

  /// Sends protfs (`running`, which runs `trappingProgram`) a SIGTERM while it waits here, once
  /// the program has started, then lets protfs go on: the program must get the signal and end.
  mutating func expectSIGTERMWhileHeldReachesTheProgram(_ running: RunningApp) async throws {
    try #require(await reached(), "the hold")
    #expect(await running.line(containing: "started") != nil, "\(running.output)")
    #expect(kill(running.process.processIdentifier, SIGTERM) == 0)
    release()
    #expect(await running.line(containing: "got TERM") != nil, "\(running.output)")
    #expect(await running.exit().0 == 7, "\(running.output)")
  }
}
