import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// The supervisor's side of a prewarmed app (`PrewarmedLaunch` describes the exchange): it holds the
/// started app until a launch whose plan takes it (`LaunchPlan.takes(_:)`) asks for it, or it ends.
package struct PrewarmServer {
  /// How long the app may take to be held.
  package static let holdTimeout: Double = 10

  /// What holding the prewarmed app came to.
  package enum Held {
    /// The app ended (or was discarded) before a launch took it, with this status.
    case ended(Int32)
    /// A launch took it: tell it the app's status with `finish`.
    case launched(Launch)
  }

  /// The supervisor of the held app.
  let supervisor: AppSupervisor
  /// The device it runs on.
  let device: Device
  /// The plan the app was started with.
  let plan: LaunchPlan
  /// The plan a launch's request asks for, nil when its words ask for no launch of this device's
  /// app (the launcher's own syntax, which this server does not read).
  let planOf: (LaunchRequest) -> LaunchPlan?
  /// Called once the app is held and launches may connect (tests wait for it).
  var onHeld: @Sendable () -> Void = {}

  /// A server for the app `supervisor` started with `plan` on `device`.
  package init(
    supervisor: AppSupervisor, device: Device, plan: LaunchPlan, planOf: @escaping (LaunchRequest) -> LaunchPlan?
  ) {
    self.supervisor = supervisor
    self.device = device
    self.plan = plan
    self.planOf = planOf
  }

  /// Holds the started app (prewarmed, reading `events`) until a launch takes it, or it ends. The
  /// supervisor's own standard output and error become the launch's.
  package func hold(events: FileDescriptor) throws -> Held {
    // The app's end, as a byte on a pipe that a poll sees beside the sockets.
    let (ended, endedWriter) = try FileDescriptor.pipe().orThrow("create the pipe for", path: "the prewarmed app")
    let supervisor = supervisor
    Thread {
      _ = supervisor.waitForExit()
      var byte: UInt8 = 1
      // The pipe has room for the one byte; nothing else could be done about a failed write.
      _ = Kernel.write(endedWriter.rawValue, &byte, 1)
    }.start()
    guard awaitHeld(events, ended: ended) else { return end(discarding: true) }
    // Held as iOS holds a prewarmed process: suspended, whatever it started meanwhile.
    supervisor.freezeHeld()
    let name =
      "protfs-prewarm.\(AppEnvironment.key(device: device, bundleID: supervisor.bundleID)).\(UUID().uuidString)"
    let listener = try ControlSocket.listen(name)
    supervisor.held(launchSocket: name)
    onHeld()
    while true {
      guard Self.wait(for: listener, or: ended) else { return end(discarding: false) }
      guard let (connection, peer) = ControlSocket.accept(listener) else { continue }
      // Root and the supervisor's own user launch apps; nobody else may take one.
      guard peer.uid == 0 || peer.uid == Kernel.getuid() else {
        ControlSocket.refuse(
          connection, line: "refused: user \(peer.uid) may not launch the app \(supervisor.bundleID)")
        continue
      }
      guard let (request, streams) = Self.receive(on: connection) else {
        ControlSocket.refuse(connection, line: "refused: not a launch")
        continue
      }
      if let held = answer(request, streams: streams, on: connection, listener: listener) { return held }
    }
  }

  /// Whether the app said it is held on `events`, in time; one that does not is ended by the
  /// caller (it may run on without ever reaching UIApplicationMain, and ignore every signal).
  private func awaitHeld(_ events: FileDescriptor, ended: FileDescriptor) -> Bool {
    let deadline = DispatchTime.now() + Self.holdTimeout
    var said: [UInt8] = []
    while !said.contains(0x0A) {
      guard Self.wait(for: events, or: ended, until: deadline) else { return false }
      var chunk = [UInt8](repeating: 0, count: 64)
      guard case .success(let count) = Kernel.read(events.rawValue, &chunk, chunk.count) else {
        continue
      }
      if count == 0 { return false }
      said += chunk[..<count]
      if said.count > 64 { break }
    }
    return said.starts(with: Array("held\n".utf8))
  }

  /// The app's status once it has ended, ended first when `discarding`.
  private func end(discarding: Bool) -> Held {
    if discarding { supervisor.discard() }
    return .ended(supervisor.waitForExit() ?? 1)
  }

  /// Answers the launch `request` on `connection`: hands the app its streams when the request's
  /// plan takes it (`.launched`), else declines and ends the app (`.ended`).
  private func answer(
    _ request: LaunchRequest, streams: [FileDescriptor], on connection: FileDescriptor, listener: FileDescriptor
  ) -> Held? {
    guard let asked = planOf(request), plan.takes(asked) else {
      // Another launch of the app: it starts the app anew once this one is gone.
      _ = ControlSocket.writeLine(connection, "declined")
      return end(discarding: true)
    }
    do {
      try supervisor.activate(standardStreams: streams.map(\.rawValue))
    } catch {
      // Ended by `activate`: the launch starts the app anew once it is gone.
      _ = ControlSocket.writeLine(connection, "declined")
      return end(discarding: false)
    }
    // From here the launch's terminal is this supervisor's too: its warnings reach the user. A
    // stream that cannot be taken leaves the supervisor's own, which still works.
    for (number, stream) in streams.enumerated() where number > 0 {
      _ = Kernel.dup2(stream.rawValue, Int32(number))
    }
    listener.close()
    guard ControlSocket.writeLine(connection, "launched") else { return end(discarding: true) }
    relaySignals(from: connection)
    return .launched(Launch(connection))
  }

  /// A launch request and its three standard streams from `connection`, or nil when it sends
  /// anything else.
  private static func receive(on connection: FileDescriptor) -> (LaunchRequest, [FileDescriptor])? {
    ControlSocket.limitWaits(connection)
    // A peer that sends no descriptors or garbage is refused, whatever the reason.
    guard let (header, streams) = try? DescriptorPassing.receive(on: connection, limit: 64),
      let line = String(validating: header, as: UTF8.self), line.hasPrefix("launch "), line.hasSuffix("\n"),
      let length = Int(line.dropFirst(7).dropLast()), (1...LaunchRequest.limit).contains(length),
      streams.count == 3, let body = readExactly(length, from: connection),
      let request = LaunchRequest.decode(body)
    else { return nil }
    return (request, streams)
  }

  /// Sends on to the app the signals the launch forwards; when the launch goes away (killed), the
  /// app goes too, as it does when its own launch is killed.
  private func relaySignals(from connection: FileDescriptor) {
    // The launch speaks only when it forwards a signal.
    ControlSocket.limitWaits(connection, reads: false)
    let supervisor = supervisor
    Thread {
      while let line = ControlSocket.readLine(connection) {
        guard line.hasPrefix("signal "), let signal = Int32(line.dropFirst(7)),
          [SIGINT, SIGTERM, SIGHUP].contains(signal)
        else { continue }
        supervisor.signalApp(signal)
      }
      if supervisor.waitForExit(until: .now()) == nil { supervisor.discard() }
    }.start()
  }

  /// Waits until `descriptor` can be read; false when `ended` can be read first, or at `deadline`.
  static func wait(
    for descriptor: FileDescriptor, or ended: FileDescriptor, until deadline: DispatchTime = .distantFuture
  ) -> Bool {
    var polled = [
      pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0),
      pollfd(fd: ended.rawValue, events: Int16(POLLIN), revents: 0),
    ]
    while true {
      var timeout: Int32 = -1
      if deadline != .distantFuture {
        let now = DispatchTime.now().uptimeNanoseconds
        guard deadline.uptimeNanoseconds > now else { return false }
        timeout = Int32(min(Int64(Int32.max), Int64((deadline.uptimeNanoseconds - now) / 1_000_000) + 1))
      }
      guard case .success(let ready) = Kernel.poll(&polled, 2, timeout) else { return false }
      if ready == 0 { continue }
      if polled[1].revents != 0 { return false }
      if polled[0].revents != 0 { return true }
    }
  }

  /// Exactly `count` bytes from `connection`, or nil when it ends or stalls first.
  static func readExactly(_ count: Int, from connection: FileDescriptor) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
      let offset = filled
      let result = bytes.withUnsafeMutableBytes { buffer in
        Kernel.read(connection.rawValue, buffer.baseAddress! + offset, count - offset)
      }
      guard case .success(let read) = result, read > 0 else { return nil }
      filled += read
    }
    return bytes
  }
}

extension PrewarmServer {
  /// The launch that took a prewarmed app, on its connection.
  package final class Launch: Sendable {
    let connection: FileDescriptor

    init(_ connection: FileDescriptor) { self.connection = connection }

    /// Tells the launch how the app ended. The connection stays open until this process exits,
    /// which the launch waits for.
    package func finish(_ status: Int32) {
      // A launch that went away learns nothing; the app has ended either way.
      _ = ControlSocket.writeLine(connection, "exit \(status)")
      _ = connection.take()
    }
  }
}
