import Foundation
import ProtFS
import ProtFSSystem

/// The lock simulator's answer to the download engine: the table of docs/semantics.md §3 applied to a background
/// download's temp file and destination on a device.
public struct DeviceDownloadAccess: DownloadAccessPolicy {
  /// The device whose state decides.
  public let device: Device
  private let probe: ProtectionStateProbe

  /// A policy for `device`.
  public init(device: Device) {
    self.device = device
    probe = ProtectionStateProbe(device: device)
  }

  /// Creating a temp file in a directory whose class is unavailable fails with EPERM, as
  /// nsurlsessiond's does on a locked phone.
  public func canWriteTemp(in directory: String) -> DownloadAccessDecision {
    decide(directory, for: .create, appending: "CFNetworkDownload_XXXXXX.tmp", whenUnavailable: { .deny($0) })
  }

  /// An open temp file follows the "fd already open" column of docs/semantics.md §3: a transfer into a complete
  /// (class A) directory fails when the device locks, keeping its bytes so that it resumes after
  /// unlock (iOS fails the I/O); complete-unless-open and weaker classes keep writing.
  public func canContinueWritingTemp(in directory: String) -> DownloadAccessDecision {
    decide(directory, for: .openHandle, whenUnavailable: { .deny($0) })
  }

  /// A finished download whose destination's class is unavailable waits for the next unlock.
  public func canPlaceDestination(_ destination: String) -> DownloadAccessDecision {
    decide(destination, for: .create, whenUnavailable: { _ in .waitForUnlock })
  }

  /// The lock table's answer for reading the open file at `path` of class `protectionClass`, as
  /// the error the device gives (`.protectionDataUnavailable`, EPERM, naming the path). Without
  /// a class (a file opened outside a device's rules) it is read as class complete would be.
  public func checkRead(_ path: String, protectionClass: ProtectionClass?) throws(ProtFSError) {
    let state = try device.protectionState()
    try device.checkAccess(try device.resolve(path), class: protectionClass ?? .complete, for: .read, in: state)
  }

  /// The lock table's answer for `access` to `path` (or to `child` inside it). A path outside the
  /// device is refused; failures other than unavailable data are left for the engine to meet.
  private func decide(
    _ path: String, for access: ProtectedDataAccess, appending child: String? = nil,
    whenUnavailable: (Int32) -> DownloadAccessDecision
  ) -> DownloadAccessDecision {
    // Unlocked (the common case, thousands of times per run) only the device's bounds matter; a
    // state that cannot be read is left for the engine to meet, as other failures are.
    guard let state = try? probe.state(), !state.isProtectedDataAvailable else {
      return device.contains(path) ? .allow : .deny(EPERM)
    }
    guard var item = try? device.resolve(path) else { return .deny(EPERM) }
    if let child { item = item.appending(child) }
    do {
      try device.checkAccess(item, for: access, in: state)
      return .allow
    } catch {
      return error.code == .protectedDataUnavailable ? whenUnavailable(error.errno ?? EPERM) : .allow
    }
  }
}

extension Device {
  /// The task store of every download session on the device.
  public var downloadStorePath: String { stateDirectory + "/downloads.sqlite" }

  /// A session configuration for `bundleID`'s container: temp files in its nsurlsessiond Downloads
  /// directory (created, with its inherited class, when `init-cache` has not made it), results in
  /// `destination`, the device's lock state consulted through `DeviceDownloadAccess`.
  public func downloadConfiguration(bundleID: BundleID, identifier: String, destination: DevicePath)
    throws(ProtFSError) -> DownloadSessionConfiguration
  {
    try requireInitialized()
    let container = self.container(bundleID)
    try container.requireExists()
    guard destination.hasPrefix(container.path) else {
      throw ProtFSError(
        .outsideDevice, "The destination '\(absolutePath(destination))' is outside the container of \(bundleID).",
        path: absolutePath(destination),
        remedy: .advice("give --to a directory inside the container, such as Documents"))
    }
    try createDirectories(container.downloadsPath)
    try createDirectories(destination)
    // Refuse a symlink now; the engine opens both again, the same way, each time it uses them.
    _ = try openDirectory(container.downloadsPath)
    _ = try openDirectory(destination)
    var configuration = DownloadSessionConfiguration(
      identifier: identifier, bundleID: bundleID.rawValue, storePath: downloadStorePath,
      temporaryDirectory: absolutePath(container.downloadsPath), destinationDirectory: absolutePath(destination))
    configuration.uploadsDirectory = absolutePath(container.uploadsPath)
    configuration.sourceDirectory = container.absolutePath
    configuration.accessPolicy = DeviceDownloadAccess(device: self)
    configuration.fileSystem = DeviceDownloadFileSystem(device: self)
    return configuration
  }

  /// A configuration that reattaches the session of `record` on this device, with the lock state as
  /// its access policy, starting nothing by itself.
  public func reattachConfiguration(for record: DownloadTaskRecord, bundleID: String) -> DownloadSessionConfiguration {
    var configuration = DownloadSessionConfiguration(
      identifier: record.sessionIdentifier, bundleID: bundleID, storePath: downloadStorePath,
      temporaryDirectory: record.temporaryDirectory, destinationDirectory: record.destinationDirectory)
    configuration.accessPolicy = DeviceDownloadAccess(device: self)
    configuration.fileSystem = DeviceDownloadFileSystem(device: self)
    configuration.resumesReattachedTasks = false
    return configuration
  }

  /// Moves the finished downloads that waited for the device to unlock into place, in every session;
  /// `protfs unlock` calls this. Returns the tasks it settled.
  @discardableResult
  public func completeWaitingDownloads() throws(ProtFSError) -> [DownloadTaskRecord] {
    guard FileManager.default.fileExists(atPath: downloadStorePath) else { return [] }
    let store = try DownloadStore(path: downloadStorePath)
    let waiting = try store.tasks().filter { $0.state == .waitingForUnlock }
    var settled: [DownloadTaskRecord] = []
    for (identifier, bundle) in try store.sessions()
    where waiting.contains(where: { $0.sessionIdentifier == identifier }) {
      guard let first = waiting.first(where: { $0.sessionIdentifier == identifier }),
        let bundleID = try? BundleID(bundle)
      else { continue }
      let session = try DownloadSession(configuration: reattachConfiguration(for: first, bundleID: bundleID.rawValue))
      settled += session.completeWaitingTasks().map(\.record)
      session.invalidate()
    }
    return settled
  }
}

/// The device's download tasks, as the cache manager needs them: which temp file each owns, and
/// whether a process is writing it now (it holds the temp file's lock) or it could resume from it.
public struct DeviceDownloadTasks: DownloadTaskDirectory {
  /// The device.
  public let device: Device

  /// The tasks of `device`.
  public init(device: Device) { self.device = device }

  /// The tasks of sessions that belong to `bundleID`.
  public func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask] {
    guard FileManager.default.fileExists(atPath: device.downloadStorePath) else { return [] }
    let store = try DownloadStore(path: device.downloadStorePath)
    let sessions = Set(try store.sessions().filter { $0.bundleID == bundleID.rawValue }.map(\.identifier))
    let downloads = try? device.openDirectory(device.container(bundleID).downloadsPath)
    return try store.listedTasks().filter { sessions.contains($0.sessionIdentifier) }.map { record in
      let held = record.temporaryFileName.map { name in
        downloads.map { TemporaryFileLock.isHeld(name, in: $0) } ?? false
      }
      return AttachedTask(
        id: String(record.id), session: record.sessionIdentifier, state: record.state.rawValue, url: record.url,
        bytesReceived: record.bytesReceived, temporaryFileName: record.temporaryFileName,
        // A handed-over file waiting for its app is kept like a resumable one.
        isRunning: held ?? false, isResumable: record.state.isUnfinished || record.handedOverPath != nil)
    }
  }
}
