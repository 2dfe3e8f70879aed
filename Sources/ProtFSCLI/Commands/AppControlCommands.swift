import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
import ProtFSSessions
import ProtFSSystem

/// `protfs app background|foreground|fetch|terminate BUNDLE-ID`: drive a running app from any shell.
package enum AppControlCommands {
  package static let background = control(
    "background", "Send the app to the background (it is suspended when its time is up).", .background)
  package static let foreground = control(
    "foreground", "Bring the app to the foreground (resuming it when suspended).", .foreground)
  package static let fetch = Command(
    name: "fetch",
    abstract: "Wake the app for a background fetch, or launch it in the background for one.",
    discussion: """
      A running app (suspended or not) is sent performFetch and must call fetch-completed in time.
      An app that is not running is launched in the background with the command it was last
      launched with, detached from this shell (its output goes to /dev/null), and sent
      didEnterBackground, then performFetch; not an app the user force-quit.
      """,
    arguments: [AppCommand.bundleArgument],
    run: runFetch)
  package static let terminate = Command(
    name: "terminate",
    abstract: "Terminate the app: willTerminate, then a kill if it has not exited after a short grace.",
    discussion: """
      A suspended app is killed without notice. Returns once every process of the app (those it
      started in sessions of their own too) and its supervisor are gone, so that the next launch
      finds it free, as simctl's terminate does; --no-wait returns once the app has been asked.
      With --user, the termination is a force-quit from the app switcher, which the app's record
      keeps until its next launch: the session service stops its transfers (resumable) and does
      not launch it for its sessions' events. Of an app whose supervisor was killed with SIGKILL,
      the processes it left running are ended (as `app status` does).
      """,
    arguments: [AppCommand.bundleArgument],
    options: [user, noWait],
    run: runTerminate
  )

  package static let push = Command(
    name: "push",
    abstract: "Send the app a remote notification, as `xcrun simctl push` does (PAYLOAD: a file, or - for stdin).",
    discussion: """
      PAYLOAD is an APNs payload of at most 4096 bytes: a JSON object with an "aps" dictionary.
      A silent push ("content-available": 1) wakes a suspended or backgrounded app with 30 s of
      background time, or launches an app that is not running in the background with the command
      it was last launched with (not one the user force-quit), and delivers
      didReceiveRemoteNotification with the payload as userInfo; the app must call push-completed
      in time. A push without content-available reaches only an active app; otherwise iOS shows
      it and does not wake the app, and so does this, saying so.
      """,
    arguments: [AppCommand.bundleArgument, payload],
    run: runPush)

  /// `<payload>`.
  static let payload = Argument(name: "payload", help: "The payload's JSON file, or - for standard input.")

  /// `--user`.
  package static let user = Option.flag("user", help: "A force-quit by the user (remembered until the next launch).")

  /// `--no-wait`.
  package static let noWait = Option.flag(
    "no-wait", help: "Return once the app has been asked to terminate, without waiting until it is gone.")

  /// How long `terminate` waits for the app and its supervisor to be gone: the grace the app has
  /// after willTerminate, the kill of what it left (at most 5 s), and the supervisor's own end (its
  /// mount's unmount). A supervisor still there is killed, and the app's processes ended.
  static let terminateWait: Double = 20

  /// The payload named by the invocation, checked.
  static func readPayload(_ invocation: Invocation) throws -> RemoteNotification {
    let path = invocation.required(payload)
    let data: Data
    if path == "-" {
      data = FileHandle.standardInput.readData(ofLength: RemoteNotification.sizeLimit + 1)
    } else {
      // At most one byte past the limit, which the payload's check then refuses by its size: a
      // huge file is not read whole.
      switch Kernel.readNamedFile(path, limit: RemoteNotification.sizeLimit + 1) {
      case .success(let bytes): data = Data(bytes)
      case .failure(.tooLarge):
        throw ExitStatus(
          code: 1,
          message:
            "'\(path)' holds more than \(RemoteNotification.sizeLimit) bytes; APNs delivers at most \(RemoteNotification.sizeLimit) bytes a notification."
        )
      case .failure(let failure):
        throw ExitStatus(code: 1, message: "Cannot read the payload '\(path)': \(failure.reason).")
      }
    }
    do {
      return try RemoteNotification(payload: data, source: path == "-" ? "The payload on standard input" : "'\(path)'")
    } catch {
      throw ExitStatus(code: 1, message: invocation.describe(error))
    }
  }

  static func runPush(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let notification = try readPayload(invocation)
    let device = invocation.device
    do {
      let reply = try AppCommand.send(.push(payload: notification.json), to: bundleID, device: device)
      if reply.value == "throttled" {
        Console.out(
          "The app \(bundleID) had its share of background pushes this hour (--push-limit): the notification is held and delivered when the budget allows (a newer one replaces it)."
        )
      }
      if reply.value == "shown" {
        Console.out(
          "The app \(bundleID) is not active: the notification is shown, and without \"content-available\": 1 the app is not woken."
        )
      }
      return 0
    } catch let status as ExitStatus where status.message == AppCommand.notRunning(bundleID) {
      guard notification.isContentAvailable else {
        Console.out(
          "The app \(bundleID) is not running: the notification is shown, and without \"content-available\": 1 the app is not launched."
        )
        return 0
      }
      // The payload is the sender's, and may hold secrets: it goes to the launch in a file only
      // root reads, named on its command line, never on the command line itself (every user
      // reads /proc/PID/cmdline for as long as the launch runs).
      let held = try PushPayloadFile.hold(notification.json, on: device)
      do {
        try launchInBackground(bundleID, device: device, for: .push(payloadFile: held), purpose: "the notification")
      } catch {
        PushPayloadFile.discard(held, on: device)
        throw error
      }
      return 0
    }
  }

  /// Launches `bundleID`, which is not running, in the background as the system does, for
  /// `reason` (refused for an app never launched, or force-quit by the user); `purpose` ends the
  /// line that reports it.
  static func launchInBackground(
    _ bundleID: BundleID, device: Device, for reason: BackgroundLaunchReason, purpose: String
  )
    throws
  {
    let pid = try AppSessionLauncher(device: device).launchInBackground(bundleID, for: reason)
    Console.out("Launched \(bundleID) in the background for \(purpose) (supervisor pid \(pid)).")
  }

  static func runFetch(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    do {
      _ = try AppCommand.send(.fetch, to: bundleID, device: device)
      return 0
    } catch let status as ExitStatus where status.message == AppCommand.notRunning(bundleID) {
      try launchInBackground(bundleID, device: device, for: .fetch, purpose: "a fetch")
      return 0
    }
  }

  static func runTerminate(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    let request = AppRequest.terminate(byUser: invocation.flag(user))
    // A supervisor killed with SIGKILL left no one to ask: what it left running is ended here.
    let ended = try AppStore(device: device).endAbandoned(bundleID)
    if ended > 0 {
      Console.out(
        "Ended \(ended) process\(ended == 1 ? "" : "es") of \(bundleID) that its killed supervisor left running.")
      return 0
    }
    // A prewarmed app was never launched: it is discarded, as iOS discards one, without events.
    if let record = try AppStore(device: device).record(bundleID), record.isSupervised, record.state == .prewarmed {
      try PrewarmedLaunch.discard(bundleID, device: device)
      Console.out("Ended the prewarmed app \(bundleID).")
      return 0
    }
    let supervisor = try AppStore(device: device).record(bundleID)?.supervisor
    _ = try AppCommand.send(request, to: bundleID, device: device)
    if invocation.flag(user) {
      // The session service stops the app's transfers (resumable) and relaunches it no more.
      do throws(ProtFSError) {
        try SessionServiceClient.forceQuit(
          bundleID: bundleID.rawValue, socketName: SessionServiceClient.socketName(device: device))
      } catch  where error.code != .notFound {
        Console.err("warning: the session service was not told of the force-quit: \(invocation.describe(error))")
      } catch {}
    }
    guard !invocation.flag(noWait), let supervisor else { return 0 }
    try waitUntilGone(bundleID, supervisor: supervisor, device: device)
    Console.out("Terminated \(bundleID): its processes have ended.")
    return 0
  }

  /// Waits until the app's supervisor is gone: it ends last, once the app's first process has
  /// ended and it has killed the rest of the app (its cgroup). One that outlives `terminateWait`
  /// is killed, and the app's processes with it, as a killed supervisor's are (`endAbandoned`).
  static func waitUntilGone(_ bundleID: BundleID, supervisor: ProcessIdentity, device: Device) throws {
    let killed = try SupervisorEnd.await(
      supervisor, of: bundleID, device: device, seconds: terminateWait
    ) { waited in
      "The app \(bundleID) was asked to terminate, but its supervisor (process \(supervisor.pid)) did not end within \(waited) s, even killed; end it with kill -9 \(supervisor.pid)."
    }
    guard let ended = killed else { return }
    Console.err(
      "warning: the supervisor of \(bundleID) did not end within \(Int(terminateWait)) s: it was killed, and \(ended) process\(ended == 1 ? "" : "es") of the app it left with it."
    )
  }

  /// Sends the request `kind` (a subcommand's name) to the app named by the invocation.
  static func runControl(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    guard let kind = AppRequest.Kind(rawValue: invocation.commandPath.last ?? ""), let request = AppRequest(kind) else {
      return 70
    }
    _ = try AppCommand.send(request, to: bundleID, device: invocation.device)
    return 0
  }

  private static func control(_ name: String, _ abstract: String, _ kind: AppRequest.Kind) -> Command {
    Command(name: name, abstract: abstract, arguments: [AppCommand.bundleArgument], run: runControl)
  }
}
