import Foundation
import ProtFS
import ProtFSSystem

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
    _ = Kernel.unlinkat(directory.fd, Self.prewarmFileName(bundleID), 0)
    let name = bundleID.rawValue + ".json"
    switch Kernel.unlinkat(directory.fd, name, 0) {
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
      _ = Kernel.unlinkat(directory.fd, name, 0)
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
    switch Kernel.flock(lock.rawValue, LOCK_EX | LOCK_NB) {
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
