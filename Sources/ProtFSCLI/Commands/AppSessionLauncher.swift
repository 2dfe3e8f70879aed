import Foundation
import ProtFS
import ProtFSApp
import ProtFSSessions
import ProtFSSystem

/// How the session service reaches apps (docs/semantics.md §9): a running app's supervisor is sent
/// `sessionEvents`; an app not running is launched in the background with the command it was last
/// launched with, as `protfs app fetch` launches one, and gets the event after didEnterBackground.
package struct AppSessionLauncher: SessionAppLauncher {
  /// The device the apps run on.
  package let device: Device
  /// The protfs program that launches them (this process's own by default).
  package let program: String
  /// How long a launch may take to show its supervisor before it counts as failed, in seconds.
  package let launchTimeout: Double

  /// A launcher for the apps of `device`.
  package init(device: Device, program: String = "/proc/self/exe", launchTimeout: Double = 10) {
    self.device = device
    self.program = program
    self.launchTimeout = launchTimeout
  }

  /// Posts session `session`'s events to app `bundleID`: to its supervisor when it runs, else by
  /// launching it in the background with its last command; throws when it cannot.
  package func deliverEvents(of session: String, to bundleID: String) throws(ProtFSError) {
    let app = try BundleID(bundleID)
    let reply: AppReply?
    do throws(ProtFSError) {
      guard let socket = try AppStore(device: device).supervisorSocket(app) else {
        throw ProtFSError(.notFound, "The app \(bundleID) is not running.")
      }
      reply = try AppClient.send(AppRequest(.sessionEvents, session), to: socket)
    } catch  where error.code == .notFound {
      reply = nil
    }
    if let reply {
      if let refusal = reply.error { throw ProtFSError(.io, refusal) }
      return
    }
    guard let record = try AppStore(device: device).record(app), !record.lastLaunchCommand.isEmpty else {
      throw ProtFSError(
        .notFound,
        "The app \(bundleID) is not running and was never launched, so it cannot get the events of \(session).")
    }
    guard !record.forceQuit else {
      throw ProtFSError(
        .permissionDenied,
        "The app \(bundleID) is not running: the user force-quit it, so it is not launched for the events of \(session)."
      )
    }
    let command = record.lastLaunchCommand
    guard AppLaunchCommand.executablePath(command[0]) != nil else {
      throw ProtFSError(
        .notFound,
        "The app \(bundleID) cannot be launched for the events of \(session): '\(command[0])', the command it was last launched with, is not an executable file.",
        path: command[0])
    }
    let before = try? AppStore(device: device).record(app)
    let pid = try DetachedLaunch.start(
      program: program,
      [
        "--device", device.root, "app", "launch", bundleID, "--for-session", session, "--background-time",
        "\(Int((record.backgroundTime * 1000).rounded()))ms", "--",
      ] + command)
    try waitForSupervisor(pid, app: app, session: session, before: before ?? nil)
  }

  /// Whether the user force-quit app `bundleID` (its record says so).
  package func isForceQuit(_ bundleID: String) -> Bool {
    guard let app = try? BundleID(bundleID), let record = try? AppStore(device: device).record(app) else {
      return false
    }
    return record.forceQuit
  }

  /// Whether app `bundleID` is suspended by a supervisor that still runs (its record says so).
  package func isSuspended(_ bundleID: String) -> Bool {
    guard let app = try? BundleID(bundleID), let record = try? AppStore(device: device).record(app) else {
      return false
    }
    return record.state == .suspended && record.supervisor?.isAlive == true
  }

  /// Waits until the launched supervisor `pid` runs the app (its record names it) or ends; a launch
  /// that ends before the app ran (the record is still `before`) with a failure, or shows nothing
  /// within `launchTimeout`, is thrown. The launch is this process's child: it is reaped whatever
  /// happens.
  private func waitForSupervisor(_ pid: pid_t, app: BundleID, session: String, before: AppRecord?)
    throws(ProtFSError)
  {
    let deadline = DispatchTime.now() + launchTimeout
    let store = AppStore(device: device)
    var delay: useconds_t = 2_000
    while true {
      if case .success(let code?) = Kernel.reapChildIfEnded(pid) {
        // A launch that ran the app ended with the app's status, and its record changed.
        if code == 0 || (try? store.record(app)) ?? nil != before { return }
        throw ProtFSError(
          .io,
          "The launch of the app \(app) for the events of \(session) failed: `protfs app launch` ended with status \(code)."
        )
      }
      if let record = try? store.record(app), record.supervisorPID == pid, record.state != .notRunning {
        reap(pid)
        return
      }
      guard DispatchTime.now() < deadline else {
        reap(pid)
        throw ProtFSError(
          .io,
          "The launch of the app \(app) for the events of \(session) did not start its supervisor within \(Int(launchTimeout)) s."
        )
      }
      usleep(delay)
      delay = min(delay * 2, 50_000)
    }
  }

  /// Reaps the launch `pid` whenever it ends, on a thread of its own.
  private func reap(_ pid: pid_t) {
    Thread { _ = Kernel.waitForChild(pid) }.start()
  }
}

/// Starts protfs detached from the caller: the launches of `app fetch` and of session events, the
/// session service, and the process that ends a lock's grace.
package enum DetachedLaunch {
  /// Starts `program ARGS` (protfs) in a session of its own with /dev/null as its standard streams
  /// and no other descriptor: it outlives this command, and must hold none of the descriptors this
  /// process has (a caller waiting for this command's pipes or its exit socket would wait for it
  /// too; a supervisor's mount connection would stay alive with it). `purpose` words the error.
  /// `output`: a descriptor its standard output and error go to instead.
  package static func start(
    program: String = "/proc/self/exe", _ arguments: [String], purpose: String = "launch the app with",
    output: Int32? = nil
  ) throws(ProtFSError) -> pid_t {
    var argv: [UnsafeMutablePointer<CChar>?] = (["protfs"] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for fd in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] {
      if let output, fd != STDIN_FILENO {
        posix_spawn_file_actions_adddup2(&actions, output, fd)
      } else {
        posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0)
      }
    }
    _ = Kernel.spawnClosing(from: STDERR_FILENO + 1, &actions)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    posix_spawnattr_setflags(&attributes, Kernel.spawnNewSession)
    var pid: pid_t = 0
    let status = posix_spawn(&pid, program, &actions, &attributes, &argv, environ)
    guard status == 0 else { throw ProtFSError.system(purpose, path: program, errno: status) }
    return pid
  }
}
