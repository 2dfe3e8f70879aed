import Foundation
import ProtFS
import ProtFSSystem

/// What protfs knows of one app's life: the record its supervisor keeps under
/// `.protfs/apps/<bundle-id>.json` (docs/semantics.md §8).
public struct AppRecord: Codable, Sendable, Equatable {
  /// The app's state, as iOS names them.
  public enum State: String, Codable, Sendable {
    /// No process.
    case notRunning
    /// In the foreground.
    case active
    /// In the background and running.
    case background
    /// Stopped (SIGSTOP) in the background.
    case suspended
    /// Started ahead of its launch and held before `UIApplicationMain` (`protfs app prewarm`, as
    /// iOS 15 prewarms apps): not running as far as the system and the app know, until a launch
    /// with the same command takes it.
    case prewarmed
  }

  /// A background task the app holds.
  public struct Task: Codable, Sendable, Equatable {
    /// The id `begin-task` printed.
    public var id: Int
    /// The name the app gave, or an empty string.
    public var name: String
    /// Creates a task.
    public init(id: Int, name: String) {
      self.id = id
      self.name = name
    }
  }

  /// How the last background fetch ended.
  public struct Fetch: Codable, Sendable, Equatable {
    /// `newData`, `noData`, `failed`, or `timedOut` when the app was killed for not completing.
    public var result: String
    /// Seconds from the wake-up to the result.
    public var duration: Double
    /// When it ended.
    public var time: Date
    /// Creates a fetch result.
    public init(result: String, duration: Double, time: Date) {
      self.result = result
      self.duration = duration
      self.time = time
    }
  }

  /// How the last BGTask ended.
  public struct BackgroundTaskResult: Codable, Sendable, Equatable {
    /// The task's identifier.
    public var identifier: String
    /// Its kind.
    public var type: BackgroundTaskRequest.Kind
    /// `success` or `failure` (`setTaskCompleted(success:)`), or `timedOut` when the app was killed
    /// for not completing it.
    public var result: String
    /// Seconds from its launch to its end.
    public var duration: Double
    /// When it ended.
    public var time: Date
  }

  /// How the system last ended the app (its watchdog's kill), or how it last crashed: what its
  /// crash report says and where that is.
  public struct Crash: Codable, Sendable, Equatable {
    /// Whether the system killed it (the watchdog) rather than the app crashing by itself.
    public var killed: Bool
    /// The report's termination reason: `0x8badf00d`, or the crash's exception type.
    public var terminationReason: String
    /// Why, in words.
    public var reason: String
    /// The crash report's path; nil when it could not be written.
    public var crashReport: String?

    /// A crash as `report` describes it, killed by the system or not.
    public init(_ report: AppCrashReport, killed: Bool) {
      self.killed = killed
      terminationReason = report.terminationReason
      reason = report.reason
    }

    /// One line that says it, as the launch prints it and `app status` shows it: "was killed:
    /// REASON (0x8badf00d); crash report: PATH".
    public var summary: String {
      (killed ? "was killed: " : "crashed: ") + "\(reason) (\(terminationReason))"
        + (crashReport.map { "; crash report: \($0)" } ?? "; no crash report could be written")
    }
  }

  /// The app.
  public var bundleID: String
  /// Its state.
  public var state: State
  /// Its process, while it runs.
  public var pid: Int32?
  /// The supervising `protfs app launch`, while it runs.
  public var supervisorPID: Int32?
  /// When the supervisor started (clock ticks since boot), so that a later process given its pid
  /// is not taken for it; nil in records written before it was kept.
  public var supervisorStartTime: UInt64?
  /// The cgroup that holds every process of the app while it runs (nil where its process group
  /// does, or when it is not running).
  public var cgroup: String?
  /// The abstract name of the supervisor's socket while it runs: chosen at random at each launch,
  /// so that no other process can bind it first (nil in records written before it was kept).
  public var supervisorSocket: String?
  /// The background tasks it holds.
  public var tasks: [Task] = []
  /// The background budget in seconds.
  public var backgroundTime: Double
  /// When it last entered the background (nil in the foreground and when not running).
  public var backgroundSince: Date?
  /// The last background fetch.
  public var lastFetch: Fetch?
  /// The BGTaskScheduler requests the app submitted and the system has not run (nil in records
  /// written before there were any: read through `taskRequests`).
  public var backgroundTaskRequests: [BackgroundTaskRequest]?
  /// The last BGTask that ended.
  public var lastBackgroundTask: BackgroundTaskResult?
  /// The command it was last launched with.
  public var lastLaunchCommand: [String] = []
  /// Whether the user force-quit it (`terminate --user`); cleared by the next launch.
  public var forceQuit: Bool = false
  /// How its last run ended (the exit status `app launch` returned), once it ended.
  public var lastExitStatus: Int32?
  /// Whether the system killed its last run, or that run crashed, and the crash report's path; nil
  /// when it ended otherwise.
  public var lastCrash: Crash?

  /// A record of an app that is not running.
  public init(bundleID: String, backgroundTime: Double) {
    self.bundleID = bundleID
    self.state = .notRunning
    self.backgroundTime = backgroundTime
  }

  /// The supervising process, when the record names one with its start time.
  public var supervisor: ProcessIdentity? {
    get { supervisorPID.flatMap { pid in supervisorStartTime.map { ProcessIdentity(pid: pid, startTime: $0) } } }
    set {
      supervisorPID = newValue?.pid
      supervisorStartTime = newValue?.startTime
    }
  }

  /// Whether the app runs under a supervisor that is still alive: a record whose supervisor died
  /// (kill -9, or a pid reused since) describes nobody, whatever its state says.
  public var isSupervised: Bool { state != .notRunning && supervisor?.isAlive == true }

  /// The record as it stands now: one whose supervisor died without its last word (kill -9)
  /// describes an app that is not running, without a process, supervisor or open tasks.
  public var settled: AppRecord {
    guard state != .notRunning, !isSupervised else { return self }
    var record = self
    record.state = .notRunning
    record.pid = nil
    record.supervisor = nil
    record.tasks = []
    return record
  }

  /// The pending BGTaskScheduler requests, in the order submitted.
  public var taskRequests: [BackgroundTaskRequest] {
    get { backgroundTaskRequests ?? [] }
    set { backgroundTaskRequests = newValue.isEmpty ? nil : newValue }
  }

  /// Seconds of background time left at `now`; nil (infinite) in the foreground.
  public func timeRemaining(now: Date = Date()) -> Double? {
    guard let backgroundSince, state != .active, state != .notRunning else { return nil }
    return max(0, backgroundTime - now.timeIntervalSince(backgroundSince))
  }
}
