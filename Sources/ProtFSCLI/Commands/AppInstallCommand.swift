import Foundation
import ProtFS
import ProtFSApp
import ProtFSAppBundle
import ProtFSLaunch
import ProtFSSystem

/// `protfs app install BUNDLE-ID [--info-plist FILE] -- CMD`, simctl's `install`: the app's
/// command and Info.plist are kept, so that `protfs app launch BUNDLE-ID` (simctl's `launch`) and
/// the system's launches (a fetch, a push, a BGTask, a session's events) start it without being
/// told the command again.
package enum AppInstallCommand {
  package static let command = Command(
    name: "install",
    abstract: "Install a program as the app, for `app launch BUNDLE-ID` and the system's launches (simctl install).",
    discussion: """
      Keeps CMD (its program made absolute) as the command the app is launched with, and builds its
      bundle on the device (Bundles/BUNDLE-ID.app/) with --info-plist's Info.plist (or the one
      installed before) and, for a Swift program, the program. With --from-app, the Info.plist is
      the app's own (an .ipa or .app, read in memory), and BUNDLE-ID may be left out. An app the
      user force-quit may be launched by the system again. A running app is not replaced:
      terminate it first.
      """,
    arguments: [bundleArgument],
    options: [AppLaunchCommand.infoPlist, fromApp],
    takesTrailingCommand: true,
    run: run)

  /// `[<bundle-id>]`: install's, which `--from-app` may give instead.
  package static let bundleArgument = Argument(
    name: "bundle-id", help: "The app's bundle id (with --from-app, the app's).", arity: .optional)
  /// `--from-app APP`.
  package static let fromApp = Option.value(
    "from-app", "app", help: "Install the Info.plist of this app (.ipa or .app); its bundle id is the app's.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let app = try invocation.value(Self.fromApp).map(AppPackage.read)
    if app != nil, invocation.value(AppLaunchCommand.infoPlist) != nil {
      throw invocation.usageError("Give either --info-plist or --from-app, not both.")
    }
    let bundleID = try InitCommand.appBundleID(invocation, Self.bundleArgument, app: app)
    let device = invocation.device
    try device.requireInitialized()
    try device.container(bundleID).requireExists()
    let command = try AppLaunchCommand.absoluteCommand(invocation.trailing)
    let store = AppStore(device: device)
    var record = try store.record(bundleID)?.settled ?? AppRecord(bundleID: bundleID.rawValue, backgroundTime: 30)
    guard record.state == .notRunning else {
      throw ExitStatus(
        code: 1,
        message:
          "The app \(bundleID) is running: terminate it before installing it again (\(invocation.spelling.command("app terminate \(bundleID)")))."
      )
    }
    let bundle =
      try app.map { app throws(ProtFSError) in
        try AppBundle(bundleID: bundleID, infoPlist: app.infoPlist, path: app.path + ":Info.plist")
      }
      ?? AppBundle(bundleID: bundleID, infoPlist: invocation.value(AppLaunchCommand.infoPlist), device: device)
    try bundle.install(AppBundle.isSwiftProgram(command[0]) ? command[0] : nil, on: device)
    record.lastLaunchCommand = command
    record.forceQuit = false
    try store.write(record)
    Console.out("Installed \(bundleID): \(command.joined(separator: " "))")
    return 0
  }

  /// The log of an app launched detached: `.protfs/logs/BUNDLE-ID.log` in the device, made anew at
  /// every such launch.
  static func logPath(_ device: Device, _ bundleID: BundleID) -> String {
    device.stateDirectory + "/logs/\(bundleID).log"
  }

  /// The last line written to `log` (read from its last 4 KiB), if any.
  static func lastLine(of log: Int32) -> String? {
    guard let size = try? Kernel.lseek(log, 0, SEEK_END).get(), size > 0 else { return nil }
    var bytes = [UInt8](repeating: 0, count: Int(min(size, 4096)))
    let count = bytes.withUnsafeMutableBytes { raw in
      (try? Kernel.pread(log, raw.baseAddress, raw.count, off_t(size) - off_t(raw.count)).get()) ?? 0
    }
    return String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n").last.map(String.init)
  }

  /// Launches the installed `command` of `bundleID` as `app launch` does, detached from this shell
  /// (its output goes to the app's log), with the options the invocation gave; returns once the
  /// app runs, printing `BUNDLE-ID: PID` as `simctl launch` does.
  static func launchDetached(_ invocation: Invocation, _ bundleID: BundleID, _ command: [String]) throws -> Int32 {
    let device = invocation.device
    // A prewarmed app has no terminal to take here: it is ended, and the app started anew.
    try PrewarmedLaunch.discard(bundleID, device: device)
    if try AppStore(device: device).record(bundleID)?.isSupervised == true {
      throw ExitStatus(
        code: 1, message: "The app \(bundleID) is already running; terminate it first, or bring it to the foreground.")
    }
    let forwarded = AppLaunchCommand.givenOptions(
      invocation, among: AppLaunchCommand.command.options.filter { $0 != AppLaunchCommand.wait })
    let started = try startSupervisor(
      device, bundleID, ["app", "launch", bundleID.rawValue] + forwarded + ["--"] + command, within: 60,
      purpose: "launch the app with", endedBefore: "it ran (its launch"
    ) { $0.state != .notRunning }
    guard started else {
      throw ExitStatus(
        code: 1,
        message: "The app \(bundleID) did not start within 60 s; its output is in \(logPath(device, bundleID)).")
    }
    return 0
  }

  /// Starts `protfs --device DEVICE ARGUMENTS` (an `app launch` of `bundleID`) detached from this
  /// shell, its output in the app's log, and waits until the app's record names it (by its start
  /// time too: a record left by an earlier one whose pid was reused is not taken for it) and
  /// `ready` accepts the record; then prints `BUNDLE-ID: PID`, as `simctl launch` does, and returns
  /// true. False when `within` seconds passed first; throws when the launch ended first, with its
  /// own error (`endedBefore` words what it did not get to).
  static func startSupervisor(
    _ device: Device, _ bundleID: BundleID, _ arguments: [String], within timeout: Double, purpose: String,
    endedBefore: String, ready: (AppRecord) -> Bool
  ) throws -> Bool {
    let state = try DirectoryHandle(path: device.stateDirectory)
    try state.makeDirectory("logs", permissions: FilePermissions(rawValue: 0o700))
    let logs = try state.openDirectory("logs")
    let log = try logs.openFile(
      "\(bundleID).log", flags: O_RDWR | O_CREAT | O_TRUNC, permissions: FilePermissions(rawValue: 0o600))
    defer { closeDescriptor(log) }
    let supervisor = try DetachedLaunch.start(["--device", device.root] + arguments, purpose: purpose, output: log)
    let store = AppStore(device: device)
    let identity = ProcessIdentity(pid: supervisor)
    let deadline = Date().addingTimeInterval(timeout)
    var delay: useconds_t = 1_000
    while Date() < deadline {
      if case .success(let code?) = Kernel.reapChildIfEnded(supervisor) {
        // The launch's own error, when it wrote one, says best what went wrong.
        let said =
          lastLine(of: log).map { line in
            ": " + (line.hasPrefix("Error: ") ? String(line.dropFirst(7)) : line)
          } ?? "."
        throw ExitStatus(
          code: 1,
          message:
            "The app \(bundleID) ended before \(endedBefore) exited with status \(code))\(said) Its output is in \(logPath(device, bundleID))."
        )
      }
      if let record = try? store.record(bundleID), let identity, record.supervisor == identity, let pid = record.pid,
        ready(record)
      {
        Console.out("\(bundleID): \(pid)")
        return true
      }
      Kernel.usleep(delay)
      delay = min(delay * 2, 20_000)
    }
    return false
  }
}
