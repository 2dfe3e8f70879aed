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

/// The crash report written when the system kills an app, or when it crashes (docs/semantics.md
/// §8).
public struct AppCrashReport: Codable, Sendable, Equatable {
  /// The app.
  public var bundleID: String
  /// When it was killed.
  public var time: Date
  /// `0x8badf00d` ("ate bad food"): the watchdog's reason, as on iOS; for a crash, its exception
  /// type (`EXC_BAD_ACCESS (SIGSEGV)`).
  public var terminationReason: String
  /// Why, in words.
  public var reason: String
  /// The names of the background tasks still open (an empty string for an unnamed one).
  public var openTasks: [String]
  /// The app's process.
  public var pid: Int32
  /// The thread that crashed, as iOS reports it (`Crashed Thread`): 0 for the main thread. Nil
  /// when the app did not say (a program that is not a ProtFSKit app) or said what is not believed.
  public var crashedThread: Int?
  /// That thread's name (the main thread's `com.apple.main-thread`), as the app gave it, escaped.
  public var crashedThreadName: String?

  /// The watchdog's termination reason.
  public static let watchdog = "0x8badf00d"
  /// The termination reason of an app that raised an exception nothing caught, as iOS reports it.
  public static let uncaughtException = "EXC_CRASH (SIGABRT)"

  /// Creates a report (the watchdog's unless `terminationReason` says otherwise).
  public init(
    bundleID: String, time: Date, reason: String, openTasks: [String], pid: Int32,
    terminationReason: String = Self.watchdog, crashedThread: Int? = nil, crashedThreadName: String? = nil
  ) {
    self.bundleID = bundleID
    self.time = time
    self.terminationReason = terminationReason
    self.reason = reason
    self.openTasks = openTasks
    self.pid = pid
    self.crashedThread = crashedThread
    self.crashedThreadName = crashedThreadName
  }

  /// The exception type iOS reports for a crash by `signal` (`EXC_BAD_ACCESS (SIGSEGV)`), nil for
  /// a signal that is no crash (a kill: the user's, the watchdog's, a terminate's).
  public static func exceptionType(signal: Int32) -> String? {
    switch signal {
    case SIGSEGV: "EXC_BAD_ACCESS (SIGSEGV)"
    case SIGBUS: "EXC_BAD_ACCESS (SIGBUS)"
    case SIGILL: "EXC_BAD_INSTRUCTION (SIGILL)"
    case SIGTRAP: "EXC_BREAKPOINT (SIGTRAP)"
    case SIGABRT: "EXC_CRASH (SIGABRT)"
    case SIGFPE: "EXC_ARITHMETIC (SIGFPE)"
    default: nil
    }
  }

  /// iOS's termination reason of a crash by `signal`, in words: `Namespace SIGNAL, Code 11,
  /// Segmentation fault: 11`.
  public static func signalReason(_ signal: Int32) -> String {
    let words =
      switch signal {
      case SIGSEGV: "Segmentation fault"
      case SIGBUS: "Bus error"
      case SIGILL: "Illegal instruction"
      case SIGTRAP: "Trace/BPT trap"
      case SIGABRT: "Abort trap"
      case SIGFPE: "Floating point exception"
      default: "Signal"
      }
    return "Namespace SIGNAL, Code \(signal), \(words): \(signal)"
  }

  /// The crashed thread a crash by `signal` is reported with, from the `records` the app sent (its
  /// claims, believed no further than this): the newest for that signal whose thread is a number a
  /// process can have, with its name escaped; nil when there is none.
  package static func crashedThread(in records: [CrashRecord], signal: Int32) -> (number: Int, name: String?)? {
    guard let record = records.last(where: { $0.signal == signal }), (0..<threadLimit).contains(record.thread)
    else { return nil }
    let name = TerminalText.escaped(String(decoding: record.name, as: UTF8.self))
    return (Int(record.thread), name.isEmpty ? nil : name)
  }

  /// More threads than any process here has (Linux's own limit is per system, and far higher).
  static let threadLimit: Int32 = 65_536
}

/// The app records and crash reports of a device, in `.protfs/apps/` and `.protfs/crash-reports/`.
public struct AppStore: Sendable {
  /// The records' directory under `.protfs/`.
  public static let directoryName = "apps"
  /// The crash reports' directory under `.protfs/`.
  public static let crashReportsDirectoryName = "crash-reports"
  /// The device.
  public let device: Device

  /// The store of `device`.
  public init(device: Device) { self.device = device }

  /// The crash reports' directory.
  public var crashReportsPath: String { device.stateDirectory + "/" + Self.crashReportsDirectoryName }

  private func directory(_ name: String, creating: Bool) throws(ProtFSError) -> DirectoryHandle? {
    let state = try DirectoryHandle(path: device.stateDirectory)
    if creating { try state.makeDirectory(name, permissions: FilePermissions(rawValue: 0o700)) }
    do {
      return try state.openDirectory(name)
    } catch  where error.code == .notFound {
      return nil
    }
  }

  /// What to do about a record that cannot be read.
  private static let unreadableRecord = Remedy.advice(
    "remove it: the app's next launch writes a new one")

  /// The record of `bundleID`, if one was written.
  public func record(_ bundleID: BundleID) throws(ProtFSError) -> AppRecord? {
    guard let directory = try directory(Self.directoryName, creating: false) else { return nil }
    let name = bundleID.rawValue + ".json"
    guard
      let record = try JSONStateFile.read(
        AppRecord.self, named: name, in: directory, what: "app record", remedy: Self.unreadableRecord)
    else { return nil }
    guard record.bundleID == bundleID.rawValue else {
      throw JSONStateFile.malformed(
        path: directory.pathOf(name), what: "app record", remedy: Self.unreadableRecord,
        detail: "it is the record of '\(record.bundleID)'")
    }
    return record
  }

  /// Removes the record of `bundleID` and the name of its prewarmed app's socket (`app
  /// uninstall`); false when it had no record.
  @discardableResult
  public func removeRecord(_ bundleID: BundleID) throws(ProtFSError) -> Bool {
    guard let directory = try directory(Self.directoryName, creating: false) else { return false }
    _ = valueOrErrno(.unlink) { unlinkat(directory.fd, Self.prewarmFileName(bundleID), 0) }
    let name = bundleID.rawValue + ".json"
    switch valueOrErrno(.unlink, { unlinkat(directory.fd, name, 0) }) {
    case .success: return true
    case .failure(let e) where e == .noSuchFile: return false
    case .failure(let e): throw ProtFSError.system("remove", path: directory.pathOf(name), errno: e)
    }
  }

  /// `2026-11-30T20:10:35.123Z`, as the records and crash reports write times (`JSONStateFile`).
  public static func timestamp(_ date: Date) -> String { JSONStateFile.timestamp(date) }

  /// Every record, sorted by bundle id; unreadable ones are skipped.
  public func records() throws(ProtFSError) -> [AppRecord] { try readRecords().records }

  /// Every app's record, sorted by bundle id, and the errors of the records that could not be
  /// read (each names its file), so that a listing can say which it left out.
  public func readRecords() throws(ProtFSError) -> (records: [AppRecord], unreadable: [ProtFSError]) {
    guard let directory = try directory(Self.directoryName, creating: false) else { return ([], []) }
    var result: [AppRecord] = []
    var unreadable: [ProtFSError] = []
    for entry in try directory.entries() where entry.name.hasSuffix(".json") && !entry.name.hasPrefix(".") {
      guard let id = try? BundleID(String(entry.name.dropLast(5))) else { continue }
      do {
        if let record = try record(id) { result.append(record) }
      } catch {
        unreadable.append(error)
      }
    }
    return (result.sorted { $0.bundleID < $1.bundleID }, unreadable)
  }

  /// The name of the file that names a held prewarmed app's launch socket.
  static func prewarmFileName(_ bundleID: BundleID) -> String { bundleID.rawValue + ".prewarm" }

  /// The socket on which the prewarmed app `bundleID` is taken by a launch, while it is held
  /// (`.protfs/apps/<bundle-id>.prewarm`, beside its record): what every launch looks at first,
  /// so that the usual case, no prewarmed app, costs one failed open and no record's decoding.
  /// Nil when there is none (or the file is not one protfs wrote).
  public func prewarmSocket(_ bundleID: BundleID) -> String? {
    guard let directory = try? directory(Self.directoryName, creating: false),
      let bytes = try? AtomicFile.read(
        named: Self.prewarmFileName(bundleID), in: directory, limit: 256, stateFile: true),
      let name = String(validating: bytes, as: UTF8.self), name.hasPrefix("protfs-prewarm."),
      name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
    else { return nil }
    return name
  }

  /// Names (or, with nil, forgets) the socket on which the prewarmed app `bundleID` is taken.
  public func setPrewarmSocket(_ bundleID: BundleID, _ name: String?) throws(ProtFSError) {
    guard let directory = try directory(Self.directoryName, creating: name != nil) else { return }
    if let name {
      try AtomicFile.write(
        Array(name.utf8), named: Self.prewarmFileName(bundleID), in: directory,
        options: AtomicFile.Options(permissions: FilePermissions(rawValue: 0o600), durability: .unsynced))
    } else {
      let name = Self.prewarmFileName(bundleID)
      // Gone already, or never written: nothing names the socket either way.
      _ = valueOrErrno(.unlink) { unlinkat(directory.fd, name, 0) }
    }
  }

  /// Replaces the record (atomically, unsynced: it describes running processes, and a launch
  /// writes it twice before the app's first line).
  public func write(_ record: AppRecord) throws(ProtFSError) {
    guard let directory = try directory(Self.directoryName, creating: true) else { return }
    try JSONStateFile.write(
      record, named: record.bundleID + ".json", in: directory, options: AtomicFile.Options(durability: .unsynced))
  }

  /// Claims `bundleID` for one supervisor: an exclusive lock (`flock`) on
  /// `.protfs/apps/<bundle-id>.lock`, held until the returned descriptor closes, which the
  /// process's end does whatever ends it (its children do not inherit it). Nil while another
  /// process holds it.
  public func claim(_ bundleID: BundleID) throws(ProtFSError) -> FileDescriptor? {
    guard let directory = try directory(Self.directoryName, creating: true) else { return nil }
    let lock = FileDescriptor(
      owning: try directory.openFile(
        bundleID.rawValue + ".lock", flags: O_RDWR | O_CREAT, permissions: FilePermissions(rawValue: 0o600)))
    switch valueOrErrno(.flock, { flock(lock.rawValue, LOCK_EX | LOCK_NB) }) {
    case .success: return lock
    case .failure(let error) where error.rawValue == EWOULDBLOCK: return nil
    case .failure(let error):
      throw ProtFSError.system("lock", path: directory.pathOf(bundleID.rawValue + ".lock"), errno: error)
    }
  }

  /// The socket of `bundleID`'s supervisor, while its record names one that lives and the app was
  /// launched: a prewarmed app is not running for the system's requests (a launch takes it).
  public func supervisorSocket(_ bundleID: BundleID) throws(ProtFSError) -> String? {
    guard let record = try record(bundleID), record.isSupervised, record.state != .prewarmed else { return nil }
    return record.supervisorSocket
  }

  /// Ends what a supervisor killed with SIGKILL left of `bundleID`: the processes still in the
  /// cgroup its record names (`setsid` and double-forked children, which would run on
  /// unsupervised and unseen), and writes the record as it stands (`settled`). The app is claimed
  /// meanwhile, so no supervisor runs or starts while it is done. Returns how many processes
  /// were ended; 0 when a supervisor runs or nothing was left.
  @discardableResult
  public func endAbandoned(_ bundleID: BundleID) throws(ProtFSError) -> Int {
    guard let current = try record(bundleID), current.state != .notRunning || current.cgroup != nil,
      !current.isSupervised
    else { return 0 }
    guard let claimed = try claim(bundleID) else { return 0 }
    defer { claimed.close() }
    // Read again under the claim: a launch may have finished in between.
    guard let record = try record(bundleID), !record.isSupervised else { return 0 }
    let ended = record.cgroup.map { AppProcesses.endAbandoned(cgroup: $0) } ?? 0
    var settled = record.settled
    settled.cgroup = nil
    settled.supervisorSocket = nil
    try write(settled)
    return ended
  }

  /// Writes a crash report; returns its path.
  @discardableResult
  public func write(_ report: AppCrashReport) throws(ProtFSError) -> String {
    guard let directory = try directory(Self.crashReportsDirectoryName, creating: true) else { return "" }
    let stamp = Int(report.time.timeIntervalSince1970 * 1000)
    let name = "\(report.bundleID)-\(stamp)-\(report.pid).json"
    try JSONStateFile.write(report, named: name, in: directory)
    return directory.pathOf(name)
  }
}
