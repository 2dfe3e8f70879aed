import Foundation
import ProtFS
import ProtFSApp
import ProtFSMount
import ProtFSSessions
import ProtFSSystem

/// One run of a `LaunchPlan`: the app's supervisor claimed, its mount begun, its bundle and
/// environment made, its program spawned, then supervised until it ends.
final class AppLaunch {
  let plan: LaunchPlan
  let launcher: AppLauncher
  let supervisor: AppSupervisor
  /// The app's own mount, begun when the supervisor claimed the app; stopped when the run ends.
  private let mount: PendingMount

  /// Claims the app (its one supervisor) and begins its mount beside the rest of the launch.
  init(plan: LaunchPlan, launcher: AppLauncher) throws {
    self.plan = plan
    self.launcher = launcher
    let device = launcher.device
    let report = launcher.report
    // A sealed device's files are ciphertext outside a mount: an app without one reads noise.
    let sealed = device.isSealed
    if sealed, !plan.servesMount {
      throw ProtFSError(
        .invalidArgument,
        "The device '\(device.root)' is sealed: its files are plaintext only through a mount, so an app "
          + "cannot run without one.", path: device.root, remedy: .advice("leave out --no-mount"))
    }
    let mount = PendingMount(required: sealed)
    // The app's mount comes up while the rest is prepared: it takes longer than the rest, so it is
    // begun first, once this process is the app's one supervisor (its socket is bound).
    supervisor = try AppSupervisor(
      device: device, bundleID: plan.bundleID, timings: plan.timings, command: plan.command,
      userLaunch: !plan.kind.isSystemLaunch, appUsers: AppUser.canAssume ? [AppUser.standard.uid] : []
    ) { mount.begin(plan.servesMount ? device : nil, bundleID: plan.bundleID, report: report) }
    self.mount = mount
    supervisor.prewarm = plan.prewarm
  }

  deinit { mount.stop() }

  /// Runs the app until it ends; its exit status.
  func run() throws -> Int32 {
    let (pid, events, terminal) = try start()
    defer { terminal?.finish() }
    // An app is never stopped from the keyboard (iOS has no such thing): Ctrl-Z is a key it reads.
    terminal?.start(leader: pid, suspending: false)
    DebugHold.wait("PROTFS_DEBUG_HOLD_LAUNCH")
    try supervisor.start(pid: pid, events: events)
    var taken: PrewarmServer.Launch?
    if plan.prewarm {
      switch try holdPrewarmed(events: events) {
      case .ended(let status): return status
      case .launched(let launch): taken = launch
      }
    }
    let status = supervise()
    if let taken {
      // The launch that took the prewarmed app returns once this process is gone, its mount and
      // claim with it, as a launch that supervised the app itself does: the next finds them free.
      mount.stop()
      supervisor.releaseClaim()
      taken.finish(status)
    }
    return status
  }

  /// Prepares the app's bundle, record and terminal and spawns its program: its pid, the events
  /// socket's supervisor end, and the terminal relayed for it. A launch that fails on the way
  /// leaves the app as it found it (not running, its claim free).
  private func start() throws -> (pid_t, FileDescriptor, TerminalRelay?) {
    var prepared = false
    var terminal: TerminalRelay?
    do {
      let bundle = try AppBundle(bundleID: plan.bundleID, infoPlist: plan.infoPlist, device: launcher.device)
      configureSupervisor(bundle)
      // An app that closes its event descriptor must not kill its supervisor: the next event's
      // write fails with EPIPE (and is dropped) instead of raising SIGPIPE here.
      _ = Kernel.signal(SIGPIPE, SIG_IGN)
      // A socket: the events go to the app on it, and the other way a ProtFSKit app's crash
      // handler sends its crash record (and a held app that it is held, and the launch that takes
      // it its standard streams).
      let (writeEnd, readEnd) = try DescriptorPassing.socketPair()
      let command = try installBundle(bundle)
      try supervisor.prepare()
      prepared = true
      // The app leads a session of its own, on a pseudo-terminal of its own when this launch has
      // a terminal (a prewarmed app gets its launch's streams later, over the socket).
      terminal = plan.prewarm ? nil : try ConfinedSpawn.terminalForStandardStreams()
      let pid = try spawn(command, terminal: terminal, events: readEnd)
      return (pid, writeEnd, terminal)
    } catch {
      terminal?.finish()
      if prepared { supervisor.abandon() } else { supervisor.withdraw() }
      throw error
    }
  }

  /// The supervisor told what the app's Info.plist declares, and how to reach the session service.
  private func configureSupervisor(_ bundle: AppBundle) {
    let device = launcher.device
    supervisor.backgroundModes = bundle.backgroundModes
    supervisor.permittedTaskIdentifiers = bundle.permittedTaskIdentifiers
    let sessionsSocket = SessionServiceClient.socketName(device: device)
    supervisor.onEventsHandled = { (session: String) throws(ProtFSError) in
      try SessionServiceClient.eventsHandled(session: session, socketName: sessionsSocket)
    }
    // The app's session asks for the service: started here, as root, detached.
    supervisor.onStartSessionService = { () throws(ProtFSError) in
      do {
        try SessionServiceStarter.ensureRunning(device)
      } catch let error as ProtFSError {
        throw error
      } catch {
        throw ProtFSError(.io, "The session service did not start: \(error).")
      }
    }
  }

  /// Installs the app's bundle; returns the command to run: a Swift program from the bundle (where
  /// Foundation finds it), anything else from its own path, which it may use to find what lies
  /// beside it (the Info.plist alone is installed then, for the launches that do not give one).
  private func installBundle(_ bundle: AppBundle) throws -> [String] {
    let program = plan.command[0]
    guard AppBundle.isSwiftProgram(program) else {
      _ = try bundle.install(nil, on: launcher.device)
      return plan.command
    }
    return [try bundle.install(program, on: launcher.device)] + plan.command.dropFirst()
  }

  /// Starts the app's program with the supervisor's environment, through the app's mount (or the
  /// device's), its events on `events`; the launch's signals go to the whole app from now on.
  private func spawn(_ command: [String], terminal: TerminalRelay?, events: FileDescriptor) throws -> pid_t {
    let device = launcher.device
    var environment = supervisor.environment
    environment[AppEnvironment.sessionsSocket] = SessionServiceClient.socketName(device: device)
    // The app's FileManager (ProtFSKit) and helper commands find the device it was launched on.
    environment["PROTFS_DEVICE"] = device.root
    // Signals to protfs go to the whole app. Forwarded from before the spawn: one that arrives
    // before the app runs is held for it. A window size change is passed on as its terminal's.
    let supervisor = supervisor
    try SignalForwarding.forward([SIGINT, SIGTERM, SIGHUP, SIGWINCH]) { signal in
      if signal == SIGWINCH {
        terminal?.resize()
      } else {
        supervisor.signalApp(signal)
      }
    }
    let hosted = try mount.serving(report: launcher.report)
    let options = ConfinedSpawn.Options(
      mountpoint: hosted?.mountpoint ?? MountRegistry(device: device).deviceMounts().first?.mountpoint,
      terminal: terminal, descriptor: (events.rawValue, AppEnvironment.eventsDescriptor),
      environment: environment, passed: plan.passedEnvironment.map { ($0.name, $0.value) }, closingOthers: true,
      descriptorLimit: hosted.map { _ in HostedMount.originalDescriptorLimit }, cgroup: supervisor.cgroup,
      endsWithParent: true, sandbox: plan.bundleID.rawValue)
    defer { events.close() }
    return try launcher.spawner.spawn(command, device: device, options: options)
  }

  /// Holds the prewarmed app until a launch takes it or it ends.
  private func holdPrewarmed(events: FileDescriptor) throws -> PrewarmServer.Held {
    // Without a way to read a request, no launch can take the app: it is held until discarded.
    let planOf = launcher.planOfRequest ?? { _ in nil }
    var server = PrewarmServer(supervisor: supervisor, device: launcher.device, plan: plan, planOf: planOf)
    server.onHeld = launcher.onPrewarmHeld
    return try server.hold(events: events)
  }
}

/// The app's own mount, begun while the launch is prepared, and stopped once.
///
/// `@unchecked Sendable`: `hosted` is set once, by the supervisor's claim on the launching thread,
/// before any other thread can see this object, and read and stopped after.
private final class PendingMount: @unchecked Sendable {
  private var hosted: HostedMount?
  /// Whether the app cannot run without the mount (a sealed device): its failure is the launch's.
  private let required: Bool
  /// Why the mount could not begin, when it is required.
  private var failure: ProtFSError?

  init(required: Bool) { self.required = required }

  /// Begins a mount of `device` for app `bundleID`: none without a device (the plan serves none),
  /// when the device's own mount is active (the app uses it), or, where this process cannot mount,
  /// none and a warning.
  func begin(_ device: Device?, bundleID: BundleID, report: (String) -> Void) {
    guard let device, MountRegistry(device: device).deviceMounts().isEmpty else { return }
    do throws(ProtFSError) {
      hosted = try HostedMount.begin(device: device, bundleID: bundleID.rawValue)
    } catch {
      if required { failure = error } else { Self.warnWithoutMount(error, report: report) }
    }
  }

  /// The mount once it serves, or nil (and a warning when it does not); when the mount is
  /// required, its failure.
  func serving(report: (String) -> Void) throws(ProtFSError) -> HostedMount? {
    if let failure { throw Self.sealedWithoutMount(failure) }
    do throws(ProtFSError) {
      try hosted?.waitUntilServing()
      return hosted
    } catch {
      if required { throw Self.sealedWithoutMount(error) }
      Self.warnWithoutMount(error, report: report)
      return nil
    }
  }

  private static func sealedWithoutMount(_ error: ProtFSError) -> ProtFSError {
    var error = error
    error.message += " The device is sealed: its files are plaintext only through a mount, so the app does not run."
    return error
  }

  /// Stops the mount, if there is one still.
  func stop() {
    hosted?.stop()
    hosted = nil
  }

  private static func warnWithoutMount(_ error: ProtFSError, report: (String) -> Void) {
    report(
      "warning: \(error.message) The app runs under permission modes alone: refusals are \"Permission denied\", not iOS's \"Operation not permitted\"."
    )
  }
}
