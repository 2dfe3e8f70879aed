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
    AppSessionLauncher(device: device).logPath(bundleID)
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
    let started = try AppSessionLauncher(device: device).startSupervisor(
      bundleID, ["app", "launch", bundleID.rawValue] + forwarded + ["--"] + command, for: .launch, within: 60
    ) { $0.state != .notRunning }
    guard let pid = started else {
      throw ExitStatus(
        code: 1,
        message: "The app \(bundleID) did not start within 60 s; its output is in \(logPath(device, bundleID)).")
    }
    Console.out("\(bundleID): \(pid)")
    return 0
  }
}
