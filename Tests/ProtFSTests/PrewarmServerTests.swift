import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// The prewarm server, unit-tested: a held app (a shell that says "held" on its events socket, in
/// place of a Swift app) and launches that talk to the server's socket, forged or not.
@Suite struct PrewarmServerTests {
  /// A launcher whose app says it is held at once and then waits for its input to close.
  final class HeldSpawner: AppSpawner, @unchecked Sendable {
    // `@unchecked Sendable`: `input` is set before the launch and only read after.
    var input: Int32 = STDIN_FILENO

    func spawn(_ command: [String], device: Device, options: ConfinedSpawn.Options) throws -> pid_t {
      var launch = PlainLaunch(
        path: "/bin/sh", arguments: ["sh", "-c", "echo held; read line; exit 7"], environment: [])
      launch.input = input
      launch.output = try #require(options.descriptor).from
      return try launch.start().get()
    }
  }

  /// A prewarmed stand-in app held on a fresh device by a launcher that runs on a thread of its
  /// own; the launch requests its server hears are answered with the plan `answer` makes of the
  /// held one, and their words kept in `asked`.
  final class HeldApp: @unchecked Sendable {
    // `@unchecked Sendable`: every value is set in `init` and only read after, or kept behind a lock.
    static let name = "com.example.held"
    let t: TestDevice
    let bundleID: BundleID
    /// The server's launch socket, once the app is held.
    let socket: String
    /// The words of every launch request whose plan was asked for.
    var asked: [[String]] { shared.asked.withLock { $0 } }
    private let input: FileDescriptor
    private let shared = Shared()

    /// What the launcher's thread and the test share.
    private final class Shared: Sendable {
      let asked = Mutex<[[String]]>([])
      let status = Mutex<Int32?>(nil)
      let ended = DispatchSemaphore(value: 0)
    }

    init(answer: (LaunchPlan) -> LaunchPlan) throws {
      t = try TestDevice(containers: [Self.name])
      bundleID = try BundleID(Self.name)
      var plan = LaunchPlan(bundleID: bundleID, command: ["/bin/true"])
      plan.servesMount = false
      plan.prewarm = true
      let (read, write) = try FileDescriptor.pipe().get()
      input = write
      let spawner = HeldSpawner()
      spawner.input = read.rawValue
      var launcher = AppLauncher(device: t.device, spawner: spawner)
      let held = DispatchSemaphore(value: 0)
      launcher.onPrewarmHeld = { held.signal() }
      let (planned, shared) = (answer(plan), shared)
      launcher.planOfRequest = { request in
        shared.asked.withLock { $0.append(request.words) }
        return planned
      }
      Thread { [launcher, plan] in
        // The launch's own errors would show as a missing status.
        shared.status.withLock { $0 = try? launcher.run(plan) }
        shared.ended.signal()
      }.start()
      #expect(held.wait(timeout: .now() + 60) == .success)
      socket = try #require(AppStore(device: t.device).prewarmSocket(bundleID))
    }

    /// A launch of the held app as `app launch` asks for it.
    var request: LaunchRequest {
      LaunchRequest(
        words: ["app", "launch", Self.name], surroundings: .init(directory: "/", umask: "0022", environment: []))
    }

    /// Connects to the launch socket as root and sends `request` with this process's three
    /// standard streams; the connection, for the reply.
    func send(_ request: LaunchRequest) throws -> FileDescriptor {
      let connection = try ControlSocket.connect(socket, servers: [0, getuid()])
      ControlSocket.limitWaits(connection)
      try DescriptorPassing.send(
        Array("launch \(request.encoded.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
        on: connection)
      #expect(ControlSocket.writeAll(request.encoded, on: connection))
      return connection
    }

    /// The status the launcher returned once the app ended (its input closed), at most 60 s on.
    func end() -> Int32? {
      _ = input.close()
      #expect(shared.ended.wait(timeout: .now() + 60) == .success)
      return shared.status.withLock { $0 }
    }
  }

  @Test func aForgedRequestIsRefusedAndAnotherLaunchsPlanIsDeclined() throws {
    // Every request asks for a launch the held app is not: another command.
    let app = try HeldApp { plan in
      var other = plan
      other.prewarm = false
      other.command = ["/bin/false"]
      return other
    }
    // Garbage without the launch's streams: refused, and the app stays held.
    let forged = try ControlSocket.connect(app.socket, servers: [0, getuid()])
    #expect(ControlSocket.writeLine(forged, "launch 5"))
    #expect(ControlSocket.readLine(forged) == "refused: not a launch")
    #expect(app.asked.isEmpty)
    // A well-formed request whose plan is another launch's: declined, and the held app ended.
    let other = LaunchRequest(
      words: ["app", "launch", "other"], surroundings: .init(directory: "/", umask: "0022", environment: []))
    let connection = try app.send(other)
    #expect(ControlSocket.readLine(connection) == "declined")
    #expect(app.asked == [["app", "launch", "other"]])
    // The stand-in app is no cgroup member the discard could kill: its input ends it.
    #expect(app.end() == 7)
  }

  @Test func aLaunchWhosePlanIsTheHeldOnesTakesTheAppAndLearnsItsStatus() throws {
    // Every request asks for the user's launch of the held app: the same plan but for the prewarm.
    let app = try HeldApp { plan in
      var same = plan
      same.prewarm = false
      return same
    }
    let connection = try app.send(app.request)
    #expect(ControlSocket.readLine(connection) == "launched")
    // Taken: the record names no launch socket any more, so no second launch can take it.
    #expect(AppStore(device: app.t.device).prewarmSocket(app.bundleID) == nil)
    // The app ends when its input closes; the launch that took it learns its status.
    let status = app.end()
    #expect(ControlSocket.readLine(connection) == "exit 7")
    #expect(status == 7)
  }

  /// Sends a well-formed launch request, `request` with three standard streams (`/dev/null`, so that
  /// the reply's pipe ends with the child), to the launch socket `socket` from a child process
  /// running as `uid`; returns the reply's line (a refusal sent before the request was read is read
  /// all the same).
  static func launch(_ request: LaunchRequest, on socket: String, asUser uid: uid_t) throws -> String {
    let script = """
      import base64, os, socket, sys
      body = base64.b64decode(sys.argv[2])
      null = os.open("/dev/null", os.O_RDWR)
      s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
      s.settimeout(10)
      s.connect("\\0" + sys.argv[1])
      try:
          socket.send_fds(s, [b"launch %d\\n" % len(body)], [null, null, null])
          s.sendall(body)
      except OSError:
          pass  # a peer turned away is answered before its request is read: the send may fail
      print(s.makefile().readline(), end="")
      """
    let output = try FileDescriptor.pipe().get()
    var launch = PlainLaunch(
      path: "/usr/bin/setpriv",
      arguments: [
        "setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/python3", "-c", script, socket,
        Data(request.encoded).base64EncodedString(),
      ], environment: [])
    launch.output = output.write.rawValue
    let child = try launch.start().get()
    _ = output.write.close()
    let reply = FileHandle(fileDescriptor: output.read.rawValue, closeOnDealloc: false).readDataToEndOfFile()
    _ = output.read.close()
    _ = Kernel.waitForChildEnd(child)
    return String(decoding: reply, as: UTF8.self)
  }

  /// The launch socket hears root and the supervisor's own user only: a well-formed launch from
  /// another user (the app user, as an app would try to take another app's held process) is refused
  /// before anything of it is read, and the held app stays held for root's launch.
  @Test(.enabled(if: SupervisedApp.canSpeakAsAnotherUser), .timeLimit(.minutes(1)))
  func aLaunchFromAnotherUserIsRefusedAndTheAppStaysHeld() throws {
    // Every request that gets as far as its plan asks for another launch, and is declined (a launch
    // that took the app would outlive this test's checks).
    let app = try HeldApp { plan in
      var other = plan
      other.prewarm = false
      other.command = ["/bin/false"]
      return other
    }
    let reply = try Self.launch(app.request, on: app.socket, asUser: AppUser.standard.uid)
    #expect(reply == "refused: user \(AppUser.standard.uid) may not launch the app com.example.held\n", "\(reply)")
    #expect(app.asked.isEmpty)
    #expect(AppStore(device: app.t.device).prewarmSocket(app.bundleID) == app.socket)
    // Still held: root's launch of it is heard, and its plan judged (within a bounded wait: a
    // server that had let the app user take the app answers nobody here).
    let connection = try app.send(app.request)
    #expect(ControlSocket.readLine(connection) == "declined")
    #expect(app.asked == [["app", "launch", "com.example.held"]])
    // The stand-in app is no cgroup member the discard could kill: its input ends it.
    #expect(app.end() == 7)
  }
}
