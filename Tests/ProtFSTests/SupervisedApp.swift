import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem
import ProtFSTestSupport

/// An `AppSupervisor` in charge of a real process (`/bin/sleep`, standing for the app) on a fresh
/// device, with the app's end of its events pipe.
final class SupervisedApp {
  let device: TestDevice
  let supervisor: AppSupervisor
  /// The app's process.
  let pid: pid_t
  /// What the app reads its events from.
  let events: FileDescriptor

  init(
    _ bundle: String = "com.example.supervised", timings: AppTimings = AppTimings(), appUsers: Set<uid_t> = [501],
    prewarm: Bool = false
  ) throws {
    device = try TestDevice()
    supervisor = try AppSupervisor(
      device: device.device, bundleID: try BundleID(bundle), timings: timings, command: ["/bin/sleep", "60"],
      appUsers: appUsers)
    supervisor.onProblem = { _ in }
    supervisor.prewarm = prewarm
    try supervisor.prepare()
    let pipe = try FileDescriptor.pipe().get()
    pid = try PlainLaunch(path: "/bin/sleep", arguments: ["sleep", "60"], environment: []).start().get()
    try supervisor.start(pid: pid, events: pipe.write)
    events = pipe.read
  }

  /// Ends the app and waits for its supervisor to see it end; returns its exit status.
  @discardableResult
  func end() -> Int32? {
    kill(pid, SIGKILL)
    return supervisor.waitForExit(until: .now() + 10)
  }

  /// The record the supervisor wrote.
  func record() throws -> AppRecord? { try AppStore(device: device.device).record(supervisor.bundleID) }

  /// Sends `line` on the supervisor's socket from a child process running as `uid` (one of the
  /// app's processes, as it descends from this one); returns the reply's line (a refusal sent
  /// before the line was read is read all the same).
  func send(_ line: String, asUser uid: uid_t) throws -> String {
    let script = """
      import socket, sys
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.connect("\\0" + sys.argv[1])
      try:
          s.sendall(sys.argv[2].encode() + b"\\n")
      except OSError:
          pass  # a peer turned away is answered before its line is read: the send may fail
      print(s.makefile().readline(), end="")
      """
    let output = try FileDescriptor.pipe().get()
    var launch = PlainLaunch(
      path: "/usr/bin/setpriv",
      arguments: [
        "setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script,
        supervisor.socketName, line,
      ], environment: [])
    launch.output = output.write.rawValue
    let child = try launch.start().get()
    _ = output.write.close()
    let reply = FileHandle(fileDescriptor: output.read.rawValue, closeOnDealloc: false).readDataToEndOfFile()
    _ = Kernel.waitForChildEnd(child)
    return String(decoding: reply, as: UTF8.self)
  }

  /// Waits (up to 10 s) until the record says `state`; returns the record then.
  func record(becoming state: AppRecord.State) throws -> AppRecord? {
    let deadline = Date().addingTimeInterval(10)
    while true {
      let record = try record()
      if record?.state == state || Date() > deadline { return record }
      usleep(5_000)
    }
  }

  /// The event lines the app was sent so far.
  func eventLines() -> [String] {
    _ = Kernel.fcntl(events.rawValue, F_SETFL, O_NONBLOCK)
    var bytes = [UInt8](repeating: 0, count: 64 * 1024)
    guard case .success(let count) = Kernel.read(events.rawValue, &bytes, bytes.count) else { return [] }
    return String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").map(String.init)
  }

  /// Whether setpriv and python3 are there to speak as another user.
  static var canSpeakAsAnotherUser: Bool {
    getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
      && FileManager.default.isExecutableFile(atPath: "/usr/bin/python3")
  }
}
