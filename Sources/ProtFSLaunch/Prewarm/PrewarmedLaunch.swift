import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// A launch's side of a prewarmed app (docs/semantics.md §8): take it, or end it.
///
/// The supervisor of a prewarmed app (`PrewarmServer`) listens on a socket of its own, named at
/// random and kept in `.protfs/apps/<bundle-id>.prewarm` once the app is held. A launch, as root or
/// as the supervisor's user, connects and sends `launch LENGTH` with its standard input, output and
/// error attached (`SCM_RIGHTS`), then LENGTH bytes: its `LaunchRequest`. The supervisor answers
/// `launched`, handing the streams to the app, when the request's plan takes the app; otherwise
/// `declined`, and it ends the app and itself. After `launched` the launch sends `signal N` for each
/// signal it forwards, and the supervisor ends with `exit STATUS`; a launch that goes away (its
/// connection ends) takes the app with it, as a killed launch does.
public enum PrewarmedLaunch {
  /// What a launch found of a prewarmed app.
  public enum Outcome: Sendable, Equatable {
    /// None is prewarmed (or it ended meanwhile), or it was discarded: start the app anew.
    case none
    /// The prewarmed app ran as this launch, and ended with this status.
    case ran(Int32)
  }

  /// Takes app `bundleID`'s prewarmed process for the launch `request` asks for, when `mayTake`
  /// (a user's launch in the foreground without a passcode; any other discards it). Returns
  /// `.none` when there is none, or when it was declined or discarded and has ended.
  public static func take(_ bundleID: BundleID, device: Device, request: LaunchRequest, mayTake: Bool) throws
    -> Outcome
  {
    // The usual case, no prewarmed app, costs one failed open.
    guard let socket = AppStore(device: device).prewarmSocket(bundleID) else { return .none }
    guard mayTake else {
      try discard(bundleID, device: device)
      return .none
    }
    // Gone meanwhile (or killed, its file left): the launch starts the app anew.
    guard let connection = try connect(socket), let server = PeerCredentials(of: connection),
      let supervisor = ProcessIdentity(pid: server.pid)
    else { return .none }
    // The answer comes at once (`peerTimeout` bounds the wait); the app's end, later, may take as
    // long as the app runs.
    ControlSocket.limitWaits(connection)
    let bytes = request.encoded
    try DescriptorPassing.send(
      Array("launch \(bytes.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
      on: connection)
    let answer = ControlSocket.writeAll(bytes, on: connection) ? ControlSocket.readLine(connection) : nil
    guard answer == "launched" else {
      // Declined (another command or surroundings): once it has ended, the launch starts the app
      // anew. Gone without an answer (it ended, or another launch took it first): the launch goes
      // on as if there had been none, and finds the app running if it was taken. Silent while
      // still connected: a supervisor that does not answer is ended, as one that declines.
      if answer == "declined" {
        try waitForEnd(of: supervisor, bundleID, device: device)
      } else if answer == nil, !ControlSocket.hasHungUp(connection) {
        try discard(bundleID, device: device)
      }
      return .none
    }
    return try follow(connection, bundleID)
  }

  /// Forwards this process's signals to the app that `connection`'s supervisor runs for this
  /// launch, until it says how the app ended.
  private static func follow(_ connection: FileDescriptor, _ bundleID: BundleID) throws -> Outcome {
    ControlSocket.limitWaits(connection, reads: false)
    try SignalForwarding.forward([SIGINT, SIGTERM, SIGHUP]) { signal in
      // A signal not passed on is one the app misses; the launch has nobody else to tell.
      _ = ControlSocket.writeLine(connection, "signal \(signal)")
    }
    while let line = ControlSocket.readLine(connection) {
      guard line.hasPrefix("exit "), let status = Int32(line.dropFirst(5)) else { continue }
      // Returns once the supervisor is gone, its mount and claim with it, as a launch that
      // supervised the app itself does: the next finds them free.
      ControlSocket.limitWaits(connection)
      while ControlSocket.readLine(connection) != nil {}
      return .ran(status)
    }
    throw ProtFSError(.io, "The supervisor of the app \(bundleID) ended without telling how the app ended.")
  }

  /// A connection to the supervisor at `@socket`, nil when nobody listens there any more.
  private static func connect(_ socket: String) throws(ProtFSError) -> FileDescriptor? {
    do {
      return try ControlSocket.connect(socket, servers: [0, Kernel.getuid()])
    } catch {
      if error.code == .notFound { return nil }
      throw error
    }
  }

  /// Ends app `bundleID`'s prewarmed process, and waits until its supervisor is gone (its claim
  /// free for the next launch). Nothing when the app is not prewarmed.
  public static func discard(_ bundleID: BundleID, device: Device) throws {
    guard let record = try AppStore(device: device).record(bundleID), record.isSupervised,
      record.state == .prewarmed, let supervisor = record.supervisor
    else { return }
    // SIGTERM: the supervisor ends the held app through its cgroup (no signal the app could
    // ignore), then itself.
    supervisor.send(SIGTERM)
    try waitForEnd(of: supervisor, bundleID, device: device)
  }

  /// Waits until `supervisor` is gone. One that does not end in time (stopped, or stuck) is
  /// killed, and the processes of the app it leaves are ended as a killed supervisor's are.
  private static func waitForEnd(of supervisor: ProcessIdentity, _ bundleID: BundleID, device: Device) throws {
    _ = try SupervisorEnd.await(supervisor, of: bundleID, device: device, seconds: 10) { waited in
      "The prewarmed app \(bundleID)'s supervisor (process \(supervisor.pid)) did not end within \(waited) s, even killed; end it with kill -9 \(supervisor.pid), then launch again."
    }
  }
}

/// The end of an app's supervisor, awaited.
public enum SupervisorEnd {
  /// Waits, at most `seconds`, until app `bundleID`'s `supervisor` is gone. One still there
  /// (stopped, or stuck) is killed, and the processes of the app it left are ended as a killed
  /// supervisor's are (`AppStore.endAbandoned`): returns how many, or nil when it ended by itself.
  /// When even killed it has not ended 5 s later, throws `stuck`'s message, given the seconds
  /// waited in all.
  public static func await(
    _ supervisor: ProcessIdentity, of bundleID: BundleID, device: Device, seconds: Double,
    stuck: (Int) -> String
  ) throws -> Int? {
    if supervisor.waitUntilGone(seconds: seconds) { return nil }
    supervisor.send(SIGKILL)
    guard supervisor.waitUntilGone(seconds: 5) else { throw ProtFSError(.io, stuck(Int(seconds) + 5)) }
    return try AppStore(device: device).endAbandoned(bundleID)
  }
}
