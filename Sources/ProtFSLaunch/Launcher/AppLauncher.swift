import Foundation
import ProtFS
import ProtFSApp
import ProtFSLock
import ProtFSSystem

/// Runs an app as iOS runs one (docs/semantics.md §8): its supervisor, its mount, its confined
/// process, the system's launch requests, the lock schedule, and its end.
///
/// ```swift
/// let device = try Device(root: "/srv/device")
/// var plan = LaunchPlan(bundleID: try BundleID("com.example.app"), command: ["/usr/local/bin/app"])
/// plan.schedule = try LockSchedule(parsing: "background@1s,lock@2s")
/// let status = try AppLauncher(device: device).run(plan)
/// ```
///
/// The launcher prints nothing itself: what it would tell the user (a warning, the watchdog's
/// kill) goes to `report`.
public struct AppLauncher: Sendable {
  /// The device the app runs on.
  public let device: Device
  /// The controller scheduled lock steps go through.
  public var lockController: LockController
  /// The passcode scheduled unlocks give.
  public var passcode: String?
  /// Where the launch's warnings and notices go, one line each (nowhere by default).
  public var report: @Sendable (String) -> Void = { _ in }
  /// How an error is worded in a report (its description by default; the command line words its
  /// remedy as a command).
  public var describe: @Sendable (any Error) -> String = { "\($0)" }
  /// For a prewarm: the plan a launch's request asks for (the launcher's own syntax), which the
  /// held app compares with its own. Without it no launch can take a prewarmed app.
  public var planOfRequest: (@Sendable (LaunchRequest) -> LaunchPlan?)?
  /// How the app's program is started.
  package var spawner: any AppSpawner = ConfinedSpawner()
  /// Called once a prewarmed app is held and launches may take it (tests wait for it).
  package var onPrewarmHeld: @Sendable () -> Void = {}

  /// A launcher of the apps of `device`.
  public init(device: Device) {
    self.device = device
    self.lockController = LockController(device: device)
  }

  /// A launcher of the apps of `device` that starts their programs with `spawner`.
  package init(device: Device, spawner: any AppSpawner) {
    self.init(device: device)
    self.spawner = spawner
  }

  /// Runs `plan` until the app ends; returns its exit status (128+N when signal N ended it, so 137
  /// when the system killed it). Throws when the app cannot be started: another supervisor runs it
  /// (`.alreadyExists`), its program cannot be executed (`UnrunnableProgram`), or a step failed.
  public func run(_ plan: LaunchPlan) throws -> Int32 {
    if !plan.prewarm { try PrewarmedLaunch.discard(plan.bundleID, device: device) }
    let launch = try AppLaunch(plan: plan, launcher: self)
    return try launch.run()
  }
}
