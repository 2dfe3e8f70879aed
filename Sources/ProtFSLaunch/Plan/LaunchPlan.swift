import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem

/// One launch of an app, as a value: which app, what runs, how long it may run in the background,
/// who launches it (the user or the system, and for what), and the surroundings it starts in.
///
/// A launch's identity is its plan: a prewarmed app is taken by a launch whose plan equals the one
/// it was started with (`LaunchPlan.takes(_:)`), whatever words asked for either. `AppLauncher`
/// runs a plan; the command line builds one from its options.
public struct LaunchPlan: Sendable, Equatable {
  /// Who launches the app, and for what (docs/semantics.md §8).
  public enum Kind: Sendable, Equatable {
    /// The user: the app starts in the foreground.
    case user
    /// The system, in the background, for a background fetch.
    case fetch
    /// The system, in the background, to post a background session's events
    /// (`handleEventsForBackgroundURLSession`).
    case sessionEvents(session: String)
    /// The system, in the background, to deliver a silent remote notification (its JSON payload).
    case push(payload: String)
    /// The system, in the background, to run a BGTaskScheduler request (its JSON message).
    case backgroundTask(request: String)

    /// Whether the system launches the app rather than the user: a force-quit stays remembered.
    public var isSystemLaunch: Bool { self != .user }
  }

  /// A variable the caller passes to the app on purpose (`--env NAME=VALUE`, `PROTFS_CHILD_NAME`).
  public struct Variable: Sendable, Equatable {
    /// Its name.
    public var name: String
    /// Its value.
    public var value: String
    /// A variable `name`=`value`.
    public init(name: String, value: String) {
      self.name = name
      self.value = value
    }
  }

  /// Where a launch is made: the caller's working directory, umask and environment. Two launches
  /// from different surroundings are different launches (a prewarmed app is not taken by one);
  /// the shell's bookkeeping (`shellNotes`) and the order of the variables do not count.
  public struct Surroundings: Sendable, Equatable {
    /// The working directory, or empty when it cannot be named.
    public var directory: String
    /// The umask as `/proc/self/status` shows it (`0022`).
    public var umask: String
    /// The environment's entries, `NAME=value`, as given.
    public var environment: [String]

    /// Surroundings as given.
    public init(directory: String, umask: String, environment: [String]) {
      self.directory = directory
      self.umask = umask
      self.environment = environment
    }

    /// The variables a shell keeps for itself and changes from one command to the next, which do
    /// not make two launches different: `_` (the command it ran last), `SHLVL` and `OLDPWD`.
    public static let shellNotes = ["_=", "SHLVL=", "OLDPWD="]

    /// The environment as two launches compare it: sorted, without the shell's notes.
    var comparedEnvironment: [String] {
      environment.filter { entry in !Self.shellNotes.contains { entry.hasPrefix($0) } }.sorted()
    }

    /// Whether two launches are made in the same surroundings, as `comparedEnvironment` counts them.
    public static func == (lhs: Surroundings, rhs: Surroundings) -> Bool {
      lhs.directory == rhs.directory && lhs.umask == rhs.umask && lhs.comparedEnvironment == rhs.comparedEnvironment
    }
  }

  /// The app.
  public var bundleID: BundleID
  /// What runs: the program (an absolute path) and its arguments.
  public var command: [String]
  /// Background time, suspension, the watchdog, fetch and task budgets.
  public var timings: AppTimings
  /// Who launches it.
  public var kind: Kind
  /// Whether the app is started ahead of its launch and held before `UIApplicationMain` until a
  /// launch with an equal plan takes it.
  public var prewarm: Bool
  /// State changes while the app runs (lock, background, fetch…), from its start.
  public var schedule: LockSchedule
  /// Whether the app runs through a mount served for it when the device's own is not active;
  /// false runs it under permission modes alone.
  public var servesMount: Bool
  /// The app's Info.plist to install in its bundle, if one is given.
  public var infoPlist: String?
  /// What the caller passes to the app's environment on purpose.
  public var passedEnvironment: [Variable]
  /// Where the launch is made.
  public var surroundings: Surroundings

  /// A user's launch of `command` as app `bundleID`, with the default timings, no schedule, a
  /// mount of its own, made in `surroundings` (this process's by default).
  public init(bundleID: BundleID, command: [String], surroundings: Surroundings = .current()) {
    self.bundleID = bundleID
    self.command = command
    self.timings = AppTimings()
    self.kind = .user
    self.prewarm = false
    self.schedule = LockSchedule(steps: [])
    self.servesMount = true
    self.infoPlist = nil
    self.passedEnvironment = []
    self.surroundings = surroundings
  }

  /// Whether a launch planned as `other` takes the app this plan prewarmed: the same launch but
  /// for being prewarmed, made by the user.
  public func takes(_ other: LaunchPlan) -> Bool {
    var held = self
    held.prewarm = false
    return other.kind == .user && !other.prewarm && held == other
  }
}

extension LaunchPlan.Surroundings {
  /// This process's surroundings, without the variables named in `excluded` (secrets).
  public static func current(excluding excluded: [String] = []) -> LaunchPlan.Surroundings {
    LaunchPlan.Surroundings(
      directory: FileManager.default.currentDirectoryPath, umask: currentUmask(),
      environment: ProcessEnvironment.entries().filter { entry in !excluded.contains { entry.hasPrefix($0 + "=") } })
  }

  /// The process's umask as `/proc/self/status` shows it (reading it with `umask(2)` would change
  /// it for a moment, under the feet of other threads).
  static func currentUmask() -> String {
    guard let status = Kernel.readKernelFile("/proc/self/status", limit: 1 << 16) else { return "" }
    for line in String(decoding: status, as: UTF8.self).split(separator: "\n") where line.hasPrefix("Umask:") {
      return String(line.dropFirst(6).drop { $0 == "\t" || $0 == " " })
    }
    return ""
  }
}
