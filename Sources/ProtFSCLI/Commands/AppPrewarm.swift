import Foundation
import ProtFS
import ProtFSApp
import ProtFSLaunch
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
  static let holdTimeout = PrewarmServer.holdTimeout

  static func run(_ invocation: Invocation) throws -> Int32 {
    let bundleID = try AppCommand.existingApp(invocation)
    let device = invocation.device
    let store = AppStore(device: device)
    let command = try swiftCommand(invocation, bundleID, store)
    if let record = try store.record(bundleID), record.isSupervised {
      guard record.state == .prewarmed else {
        throw ExitStatus(
          code: 1, message: "The app \(bundleID) is already running; terminate it first, or bring it to the foreground."
        )
      }
      try PrewarmedLaunch.discard(bundleID, device: device)
    }
    let forwarded = AppLaunchCommand.givenOptions(invocation, among: prewarmOptions)
    let held = try AppSessionLauncher(device: device).startSupervisor(
      bundleID,
      ["app", "launch", "--" + AppLaunchCommand.prewarm.long, bundleID.rawValue] + forwarded + ["--"] + command,
      for: .prewarm, within: holdTimeout
    ) { $0.state == .prewarmed && store.prewarmSocket(bundleID) != nil }
    if let pid = held {
      Console.out("\(bundleID): \(pid)")
      return 0
    }
    let path = AppInstallCommand.logPath(device, bundleID)
    try PrewarmedLaunch.discard(bundleID, device: device)
    throw ExitStatus(
      code: 1,
      message:
        "The app \(bundleID) did not reach UIApplicationMain within \(Int(holdTimeout)) s, so it was ended: only a Swift app that runs UIApplicationMain (ProtFSKit) can be prewarmed. Its output is in \(path)."
    )
  }

  /// The command to prewarm: CMD, or the installed app's, its program made absolute; it must be a
  /// Swift program, the only kind that can be held.
  private static func swiftCommand(_ invocation: Invocation, _ bundleID: BundleID, _ store: AppStore) throws
    -> [String]
  {
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
    return absolute
  }
}
