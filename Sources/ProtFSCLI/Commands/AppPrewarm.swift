import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// `protfs app prewarm BUNDLE-ID [-- CMD]`: starts a Swift app ahead of its launch and holds it
/// before `UIApplicationMain`, as iOS 15 prewarms apps (docs/semantics.md §8); the next
/// `protfs app launch` with the same command, options, environment and directory takes it.
package enum AppPrewarmCommand {
  package static let command = Command(
    name: "prewarm",
    abstract: "Start a Swift app ahead of its launch and hold it before UIApplicationMain, as iOS prewarms apps.",
    discussion: """
      The app is started as `protfs app launch` starts it (confined, in its sandbox, through its
      mount), with this shell's environment, directory and umask, and the launch options given
      here; it runs its program's start (the loader, the Swift runtime, its static initialisers
      and main.swift's code before UIApplicationMain) and is held there, before its delegate is
      made, as iOS 15 holds a prewarmed app. The command returns once it is held, printing
      BUNDLE-ID: PID; `protfs app list` shows it as prewarmed.

      The next `protfs app launch BUNDLE-ID` run in the foreground with the same command, launch
      options, environment, directory and umask takes it: it gets that launch's standard input,
      output and error, its launch options and schedule apply from then, and it runs as an app
      launched then (didFinishLaunchingWithOptions comes at the launch, not before). The launch
      forwards SIGINT, SIGTERM and SIGHUP to it and exits with its status, as it does for an app
      it starts. Any other launch of the app, by the user or the system (a fetch, a session's
      events), first ends the prewarmed process, as iOS discards one, and then starts the app
      anew. So does `protfs app terminate`, and so does a launch from a terminal: an app gets a
      pseudo-terminal of its own for that (see `protfs app launch`), and a held app would get the
      caller's own. A prewarmed app has no controlling terminal.

      Without CMD, the installed app's command (`protfs app install`) is used. Only a Swift
      program that runs UIApplicationMain (ProtFSKit) can be held; the command fails for any other
      (within 10 s) and ends it. Prewarming an app that is prewarmed already ends that one first.
      """,
    arguments: [AppCommand.bundleArgument],
    options: prewarmOptions,
    takesTrailingCommand: true,
    trailingCommandIsOptional: true,
    run: run
  )

  /// The launch options a prewarm takes: those of a user's launch in the foreground.
  static var prewarmOptions: [Option] {
    let excluded = AppLaunchCommand.systemLaunchOptions + [AppLaunchCommand.wait, AppLaunchCommand.prewarm]
    return AppLaunchCommand.command.options.filter { option in
      !excluded.contains(option) && !ExecCommand.passcode.options.contains(option)
    }
  }

  /// How long the app may take to be held.
  static let holdTimeout: Double = 10

  static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    let store = AppStore(device: device)
    var command = invocation.trailing
    if command.isEmpty {
      guard let installed = try store.record(bundleID)?.lastLaunchCommand, !installed.isEmpty else {
        throw ExitStatus(
          code: 1,
          message:
            "The app \(bundleID) is not installed: give its command (\(invocation.spelling.command("app prewarm \(bundleID) -- CMD"))) or install it (\(invocation.spelling.command("app install \(bundleID) -- CMD")))."
        )
      }
      command = installed
    }
    let absolute = try AppLaunchCommand.absoluteCommand(command)
    guard AppBundle.isSwiftProgram(absolute[0]) else {
      throw ExitStatus(
        code: 1,
        message:
          "Cannot prewarm \(bundleID): '\(absolute[0])' is not a Swift program. An app is held before UIApplicationMain, which only a Swift app (ProtFSKit) runs; launch it with \(invocation.spelling.command("app launch \(bundleID) -- CMD"))."
      )
    }
    if let record = try store.record(bundleID), record.isSupervised {
      guard record.state == .prewarmed else {
        throw ExitStatus(
          code: 1, message: "The app \(bundleID) is already running; terminate it first, or bring it to the foreground."
        )
      }
      try PrewarmedLaunch.discard(bundleID, device: device)
    }
    let forwarded = AppLaunchCommand.givenOptions(invocation, among: prewarmOptions)
    let held = try AppInstallCommand.startSupervisor(
      device, bundleID,
      ["app", "launch", "--" + AppLaunchCommand.prewarm.long, bundleID.rawValue] + forwarded + ["--"] + absolute,
      within: holdTimeout, purpose: "prewarm the app with", endedBefore: "it was held (its prewarm"
    ) { $0.state == .prewarmed && store.prewarmSocket(bundleID) != nil }
    if held { return 0 }
    let path = AppInstallCommand.logPath(device, bundleID)
    try PrewarmedLaunch.discard(bundleID, device: device)
    throw ExitStatus(
      code: 1,
      message:
        "The app \(bundleID) did not reach UIApplicationMain within \(Int(holdTimeout)) s, so it was ended: only a Swift app that runs UIApplicationMain (ProtFSKit) can be prewarmed. Its output is in \(path)."
    )
  }
}

/// How a prewarmed app is held by its supervisor, taken by a launch, or discarded.
///
/// The supervisor (`protfs app launch --prewarm`) listens on a socket of its own, named at random
/// and kept in `.protfs/apps/<bundle-id>.prewarm` once the app is held. A launch, as root or as the
/// supervisor's user, connects and sends `launch LENGTH` with its standard input, output and error
/// attached (`SCM_RIGHTS`), then LENGTH bytes: its `LaunchRequest` (its words, directory, umask and
/// environment). The supervisor parses the words as it parsed its own and answers `launched`, handing
/// the streams to the app, when the two launches are the same (`LaunchKey`); otherwise `declined`,
/// and it ends the app and itself. After `launched` the launch sends `signal N` for each signal it
/// forwards, and the supervisor ends with `exit STATUS`; a launch that goes away (its connection
/// ends) takes the app with it, as a killed `protfs app launch` does.
///
/// The protfs program makes the same request from a C constructor (`CProtFSLaunch`) before its
/// Swift part starts, for the usual form of the command; this is the way of every other form.
package enum PrewarmedLaunch {
  /// The most bytes a request may have.
  static let requestLimit = 1 << 20

  /// What a launch sends to take a prewarmed app: its words (the command line after the program),
  /// its working directory, its umask (as `/proc/self/status` shows it) and its environment, the
  /// passcodes' variables left out. Encoded as entries `LENGTH:BYTES\n`: the number of words, the
  /// words, the directory, the umask, then the environment's entries.
  struct LaunchRequest: Equatable {
    var words: [String]
    var directory: String
    var umask: String
    var environment: [String]

    /// This process's request, with `words`.
    static func current(words: [String]) -> LaunchRequest {
      LaunchRequest(
        words: words, directory: currentDirectory(), umask: currentUmask(),
        environment: ProcessEnvironment.entries().filter { entry in
          !Secrets.environmentKeys.contains { entry.hasPrefix($0 + "=") }
        })
    }

    /// The request as it is sent.
    var encoded: [UInt8] {
      var bytes: [UInt8] = []
      for entry in [String(words.count)] + words + [directory, umask] + environment {
        bytes += Array("\(entry.utf8.count):".utf8) + Array(entry.utf8) + [0x0A]
      }
      return bytes
    }

    /// The request `bytes` encode, or nil when they are not one.
    static func decode(_ bytes: [UInt8]) -> LaunchRequest? {
      var entries: [String] = []
      var index = 0
      while index < bytes.count {
        guard let colon = bytes[index...].firstIndex(of: UInt8(ascii: ":")), colon - index <= 8,
          let length = Int(String(decoding: bytes[index..<colon], as: UTF8.self)), length >= 0,
          colon + 1 + length < bytes.count, bytes[colon + 1 + length] == 0x0A,
          let entry = String(validating: bytes[(colon + 1)..<(colon + 1 + length)], as: UTF8.self)
        else { return nil }
        entries.append(entry)
        index = colon + 2 + length
      }
      guard let count = entries.first.flatMap({ Int($0) }), count >= 0, entries.count >= count + 3 else { return nil }
      return LaunchRequest(
        words: Array(entries[1...count]), directory: entries[count + 1], umask: entries[count + 2],
        environment: Array(entries[(count + 3)...]))
    }
  }

  /// The launch a request asks for, as a prewarmed app's supervisor compares it with its own: two
  /// launches with equal keys start the same app in the same way.
  struct LaunchKey: Equatable {
    var device: String
    var bundleID: String
    /// The launch options given (but `--prewarm`), as arguments.
    var options: [String]
    /// The command, its program made absolute (the installed app's for `--wait` without one).
    var command: [String]
    var directory: String
    var umask: String
    /// The environment's entries but the shell's bookkeeping (`shellNotes`), sorted.
    var environment: [String]
  }

  /// The key of `request`: nil when its words are not an `app launch` of a user (a `--for` launch,
  /// a passcode) or do not parse.
  static func key(of request: LaunchRequest) -> LaunchKey? {
    let variables = ProcessEnvironment.variables(request.environment)
    guard
      case .run(let command, let invocation)? = try? Parser(root: Commands.root, environment: variables)
        .parse(request.words),
      command.name == AppLaunchCommand.command.name, invocation.commandPath.suffix(2) == ["app", "launch"],
      let bundleID = try? invocation.bundleID(invocation.required(AppCommand.bundleArgument))
    else { return nil }
    guard !(AppLaunchCommand.systemLaunchOptions + ExecCommand.passcode.options).contains(where: invocation.isGiven)
    else { return nil }
    let device = invocation.device
    var words = invocation.trailing
    if words.isEmpty {
      guard invocation.flag(AppLaunchCommand.wait),
        let installed = (try? AppStore(device: device).record(bundleID))??.lastLaunchCommand, !installed.isEmpty
      else { return nil }
      words = installed
    }
    guard let absolute = try? AppLaunchCommand.absoluteCommand(words) else { return nil }
    return LaunchKey(
      device: device.canonicalRoot, bundleID: bundleID.rawValue,
      options: AppLaunchCommand.givenOptions(invocation, among: AppPrewarmCommand.prewarmOptions), command: absolute,
      directory: request.directory, umask: request.umask,
      environment: request.environment.filter { entry in !shellNotes.contains { entry.hasPrefix($0) } }.sorted())
  }

  /// The variables a shell keeps for itself and changes from one command to the next, which do not
  /// make two launches different: `_` (the command it ran last: this protfs's path, or a wrapper's),
  /// `SHLVL` (one more in a script) and `OLDPWD`.
  static let shellNotes = ["_=", "SHLVL=", "OLDPWD="]

  /// The working directory (`getcwd`), or an empty string when it cannot be named.
  private static func currentDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard getcwd(&buffer, buffer.count) != nil else { return "" }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// The process's umask as `/proc/self/status` shows it (reading it with `umask(2)` would change it
  /// for a moment, under the feet of other threads).
  private static func currentUmask() -> String {
    guard let status = Kernel.readKernelFile("/proc/self/status", limit: 1 << 16) else { return "" }
    for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Umask:") {
      return String(line.dropFirst(6).drop { $0 == "\t" || $0 == " " })
    }
    return ""
  }

  // MARK: - The launch's side

  /// What a launch found of a prewarmed app.
  enum Outcome {
    /// None is prewarmed (or it ended meanwhile), or it was discarded: start the app anew.
    case none
    /// The prewarmed app ran as this launch, and ended with this status.
    case ran(Int32)
  }

  /// Takes app `bundleID`'s prewarmed process for this launch, when `mayTake` (a user's launch in
  /// the foreground without a passcode; any other discards it). Returns `.none` when there is none,
  /// or when it was declined or discarded and has ended.
  static func take(_ bundleID: BundleID, device: Device, mayTake: Bool) throws -> Outcome {
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
    let request = LaunchRequest.current(words: Array(CommandLine.arguments.dropFirst())).encoded
    try DescriptorPassing.send(
      Array("launch \(request.count)\n".utf8), descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO],
      on: connection)
    let answer = ControlSocket.writeAll(request, on: connection) ? ControlSocket.readLine(connection) : nil
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
    ControlSocket.limitWaits(connection, reads: false)
    try SignalForwarding.forward([SIGINT, SIGTERM, SIGHUP]) { signal in
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
    throw ExitStatus(
      code: 1, message: "The supervisor of the app \(bundleID) ended without telling how the app ended.")
  }

  /// A connection to the supervisor at `@socket`, nil when nobody listens there any more.
  private static func connect(_ socket: String) throws(ProtFSError) -> FileDescriptor? {
    do {
      return try ControlSocket.connect(socket, servers: [0, getuid()])
    } catch {
      if error.code == .notFound { return nil }
      throw error
    }
  }

  /// Ends app `bundleID`'s prewarmed process, and waits until its supervisor is gone (its claim
  /// free for the next launch).
  static func discard(_ bundleID: BundleID, device: Device) throws {
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
    _ = try AppCommand.awaitSupervisorEnd(supervisor, of: bundleID, device: device, seconds: 10) { waited in
      "The prewarmed app \(bundleID)'s supervisor (process \(supervisor.pid)) did not end within \(waited) s, even killed; end it with kill -9 \(supervisor.pid), then launch again."
    }
  }

  // MARK: - The supervisor's side

  /// What holding the prewarmed app came to.
  enum Held {
    /// The app ended (or was discarded) before a launch took it, with this status.
    case ended(Int32)
    /// A launch took it: tell it the app's status with `finish`.
    case launched(Launcher)
  }

  /// The launch that took the app, on its connection.
  final class Launcher: Sendable {
    let connection: FileDescriptor

    init(_ connection: FileDescriptor) { self.connection = connection }

    /// Tells the launch how the app ended. The connection stays open until this process exits,
    /// which the launch waits for.
    func finish(_ status: Int32) {
      _ = ControlSocket.writeLine(connection, "exit \(status)")
      _ = connection.take()
    }
  }

  /// Holds the started app (prewarmed, reading `events`) until a launch whose key is `key` takes
  /// it, or it ends. The supervisor's own standard output and error become the launch's.
  static func hold(_ supervisor: AppSupervisor, device: Device, events: FileDescriptor, key: LaunchKey) throws -> Held {
    // The app's end, as a byte on a pipe that a poll sees beside the sockets.
    let (ended, endedWriter) = try FileDescriptor.pipe().orThrow("create the pipe for", path: "the prewarmed app")
    Thread {
      _ = supervisor.waitForExit()
      var byte: UInt8 = 1
      _ = valueOrErrno(.write) { write(endedWriter.rawValue, &byte, 1) }
    }.start()
    // Held: the app says so on its events socket, in time; one that does not is ended (it may run
    // on without ever reaching UIApplicationMain, and ignore every signal).
    let holdDeadline = DispatchTime.now() + AppPrewarmCommand.holdTimeout
    var said: [UInt8] = []
    while !said.contains(0x0A) {
      guard wait(for: events, or: ended, until: holdDeadline) else {
        supervisor.discard()
        return .ended(supervisor.waitForExit() ?? 1)
      }
      var chunk = [UInt8](repeating: 0, count: 64)
      guard case .success(let count) = valueOrErrno(.read, { read(events.rawValue, &chunk, chunk.count) }) else {
        continue
      }
      if count == 0 {
        supervisor.discard()
        return .ended(supervisor.waitForExit() ?? 1)
      }
      said += chunk[..<count]
      if said.count > 64 { break }
    }
    guard said.starts(with: Array("held\n".utf8)) else {
      supervisor.discard()
      return .ended(supervisor.waitForExit() ?? 1)
    }
    // Held as iOS holds a prewarmed process: suspended, whatever it started meanwhile.
    supervisor.freezeHeld()
    let name =
      "protfs-prewarm.\(AppEnvironment.key(device: device, bundleID: supervisor.bundleID)).\(UUID().uuidString)"
    let listener = try ControlSocket.listen(name)
    supervisor.held(launchSocket: name)
    while true {
      guard wait(for: listener, or: ended) else { return .ended(supervisor.waitForExit() ?? 1) }
      guard let (connection, peer) = ControlSocket.accept(listener) else { continue }
      // Root and the supervisor's own user launch apps; nobody else may take one.
      guard peer.uid == 0 || peer.uid == getuid() else {
        ControlSocket.refuse(
          connection, line: "refused: user \(peer.uid) may not launch the app \(supervisor.bundleID)")
        continue
      }
      ControlSocket.limitWaits(connection)
      guard let (header, streams) = try? DescriptorPassing.receive(on: connection, limit: 64),
        let line = String(validating: header, as: UTF8.self), line.hasPrefix("launch "), line.hasSuffix("\n"),
        let length = Int(line.dropFirst(7).dropLast()), (1...requestLimit).contains(length), streams.count == 3,
        let body = readExactly(length, from: connection), let request = LaunchRequest.decode(body)
      else {
        ControlSocket.refuse(connection, line: "refused: not a launch")
        continue
      }
      guard Self.key(of: request) == key else {
        // Another launch of the app: it starts the app anew once this one is gone.
        _ = ControlSocket.writeLine(connection, "declined")
        supervisor.discard()
        return .ended(supervisor.waitForExit() ?? 1)
      }
      do {
        try supervisor.activate(standardStreams: streams.map(\.rawValue))
      } catch {
        // Ended by `activate`: the launch starts the app anew once it is gone.
        _ = ControlSocket.writeLine(connection, "declined")
        return .ended(supervisor.waitForExit() ?? 1)
      }
      // From here the launch's terminal is this supervisor's too: its warnings reach the user.
      for (number, stream) in streams.enumerated() where number > 0 {
        _ = valueOrErrno(.dup) { dup2(stream.rawValue, Int32(number)) }
      }
      listener.close()
      guard ControlSocket.writeLine(connection, "launched") else {
        supervisor.discard()
        return .ended(supervisor.waitForExit() ?? 1)
      }
      relaySignals(from: connection, to: supervisor)
      return .launched(Launcher(connection))
    }
  }

  /// Sends on to the app the signals the launch forwards; when the launch goes away (killed), the
  /// app goes too, as it does when its own `protfs app launch` is killed.
  private static func relaySignals(from connection: FileDescriptor, to supervisor: AppSupervisor) {
    // The launch speaks only when it forwards a signal.
    ControlSocket.limitWaits(connection, reads: false)
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
  private static func wait(
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
      guard case .success(let ready) = valueOrErrno(.poll, { poll(&polled, 2, timeout) }) else { return false }
      if ready == 0 { continue }
      if polled[1].revents != 0 { return false }
      if polled[0].revents != 0 { return true }
    }
  }

  /// Exactly `count` bytes from `connection`, or nil when it ends or stalls first.
  private static func readExactly(_ count: Int, from connection: FileDescriptor) -> [UInt8]? {
    var bytes = [UInt8](repeating: 0, count: count)
    var filled = 0
    while filled < count {
      let offset = filled
      let result = bytes.withUnsafeMutableBytes { buffer in
        valueOrErrno(.read) { read(connection.rawValue, buffer.baseAddress! + offset, count - offset) }
      }
      guard case .success(let read) = result, read > 0 else { return nil }
      filled += read
    }
    return bytes
  }
}
