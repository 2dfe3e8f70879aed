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

  @Test func aForgedRequestIsRefusedAndAnotherLaunchsPlanIsDeclined() throws {
    let t = try TestDevice(containers: ["com.example.held"])
    let bundleID = try BundleID("com.example.held")
    var plan = LaunchPlan(bundleID: bundleID, command: ["/bin/true"])
    plan.servesMount = false
    plan.prewarm = true
    let (read, write) = try FileDescriptor.pipe().get()
    let spawner = HeldSpawner()
    spawner.input = read.rawValue
    var launcher = AppLauncher(device: t.device, spawner: spawner)
    let held = DispatchSemaphore(value: 0)
    launcher.onPrewarmHeld = { held.signal() }
    let asked = Mutex<[[String]]>([])
    // Every request asks for a launch the held app is not: another command.
    var other = plan
    other.prewarm = false
    other.command = ["/bin/false"]
    launcher.planOfRequest = { [other] request in
      asked.withLock { $0.append(request.words) }
      return other
    }
    let status = Mutex<Int32?>(nil)
    let ended = DispatchSemaphore(value: 0)
    Thread { [launcher, plan] in
      // The launch's own errors would show as a missing status below.
      status.withLock { $0 = try? launcher.run(plan) }
      ended.signal()
    }.start()
    #expect(held.wait(timeout: .now() + 60) == .success)
    let socket = try #require(AppStore(device: t.device).prewarmSocket(bundleID))
    // Garbage without the launch's streams: refused, and the app stays held.
    let forged = try ControlSocket.connect(socket, servers: [0, getuid()])
    #expect(ControlSocket.writeLine(forged, "launch 5"))
    #expect(ControlSocket.readLine(forged) == "refused: not a launch")
    #expect(asked.withLock { $0.isEmpty })
    // A well-formed request whose plan is another launch's: declined, and the held app ended.
    let connection = try ControlSocket.connect(socket, servers: [0, getuid()])
    let request = LaunchRequest(
      words: ["app", "launch", "other"], surroundings: .init(directory: "/", umask: "0022", environment: []))
    try DescriptorPassing.send(
      Array("launch \(request.encoded.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
      on: connection)
    #expect(ControlSocket.writeAll(request.encoded, on: connection))
    #expect(ControlSocket.readLine(connection) == "declined")
    #expect(asked.withLock { $0 } == [["app", "launch", "other"]])
    // The stand-in app is no cgroup member the discard could kill: its input ends it.
    write.close()
    #expect(ended.wait(timeout: .now() + 60) == .success)
    #expect(status.withLock { $0 } == 7)
  }

  @Test func aLaunchWhosePlanIsTheHeldOnesTakesTheAppAndLearnsItsStatus() throws {
    let t = try TestDevice(containers: ["com.example.held"])
    let bundleID = try BundleID("com.example.held")
    var plan = LaunchPlan(bundleID: bundleID, command: ["/bin/true"])
    plan.servesMount = false
    plan.prewarm = true
    let (read, write) = try FileDescriptor.pipe().get()
    let spawner = HeldSpawner()
    spawner.input = read.rawValue
    var launcher = AppLauncher(device: t.device, spawner: spawner)
    let held = DispatchSemaphore(value: 0)
    launcher.onPrewarmHeld = { held.signal() }
    // Every request asks for the user's launch of the held app: the same plan but for the prewarm.
    var same = plan
    same.prewarm = false
    launcher.planOfRequest = { [same] _ in same }
    let status = Mutex<Int32?>(nil)
    let ended = DispatchSemaphore(value: 0)
    Thread { [launcher, plan] in
      // The launch's own errors would show as a missing status below.
      status.withLock { $0 = try? launcher.run(plan) }
      ended.signal()
    }.start()
    #expect(held.wait(timeout: .now() + 60) == .success)
    let socket = try #require(AppStore(device: t.device).prewarmSocket(bundleID))
    let connection = try ControlSocket.connect(socket, servers: [0, getuid()])
    let request = LaunchRequest(
      words: ["app", "launch", "com.example.held"], surroundings: .init(directory: "/", umask: "0022", environment: []))
    try DescriptorPassing.send(
      Array("launch \(request.encoded.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
      on: connection)
    #expect(ControlSocket.writeAll(request.encoded, on: connection))
    #expect(ControlSocket.readLine(connection) == "launched")
    // Taken: the record names no launch socket any more, so no second launch can take it.
    #expect(try AppStore(device: t.device).prewarmSocket(bundleID) == nil)
    // The app ends when its input closes; the launch that took it learns its status.
    write.close()
    #expect(ControlSocket.readLine(connection) == "exit 7")
    #expect(ended.wait(timeout: .now() + 60) == .success)
    #expect(status.withLock { $0 } == 7)
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
    let t = try TestDevice(containers: ["com.example.held"])
    let bundleID = try BundleID("com.example.held")
    var plan = LaunchPlan(bundleID: bundleID, command: ["/bin/true"])
    plan.servesMount = false
    plan.prewarm = true
    let (read, write) = try FileDescriptor.pipe().get()
    let spawner = HeldSpawner()
    spawner.input = read.rawValue
    var launcher = AppLauncher(device: t.device, spawner: spawner)
    let held = DispatchSemaphore(value: 0)
    launcher.onPrewarmHeld = { held.signal() }
    // Every request that gets as far as its plan asks for another launch, and is declined (a launch
    // that took the app would outlive this test's checks).
    var other = plan
    other.prewarm = false
    other.command = ["/bin/false"]
    let asked = Mutex<[[String]]>([])
    launcher.planOfRequest = { [other] request in
      asked.withLock { $0.append(request.words) }
      return other
    }
    let status = Mutex<Int32?>(nil)
    let ended = DispatchSemaphore(value: 0)
    Thread { [launcher, plan] in
      // The launch's own errors would show as a missing status below.
      status.withLock { $0 = try? launcher.run(plan) }
      ended.signal()
    }.start()
    #expect(held.wait(timeout: .now() + 60) == .success)
    let socket = try #require(AppStore(device: t.device).prewarmSocket(bundleID))
    let request = LaunchRequest(
      words: ["app", "launch", "com.example.held"], surroundings: .init(directory: "/", umask: "0022", environment: []))
    let reply = try Self.launch(request, on: socket, asUser: AppUser.standard.uid)
    #expect(reply == "refused: user \(AppUser.standard.uid) may not launch the app com.example.held\n", "\(reply)")
    #expect(asked.withLock { $0.isEmpty })
    #expect(try AppStore(device: t.device).prewarmSocket(bundleID) == socket)
    // Still held: root's launch of it is heard, and its plan judged (within a bounded wait: a
    // server that had let the app user take the app answers nobody here).
    let connection = try ControlSocket.connect(socket, servers: [0, getuid()])
    ControlSocket.limitWaits(connection)
    try DescriptorPassing.send(
      Array("launch \(request.encoded.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
      on: connection)
    #expect(ControlSocket.writeAll(request.encoded, on: connection))
    #expect(ControlSocket.readLine(connection) == "declined")
    #expect(asked.withLock { $0 } == [["app", "launch", "com.example.held"]])
    // The stand-in app is no cgroup member the discard could kill: its input ends it.
    write.close()
    #expect(ended.wait(timeout: .now() + 60) == .success)
    #expect(status.withLock { $0 } == 7)
  }
}
