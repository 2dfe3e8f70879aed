import ProtFSSystem

/// A download task attached to a container, as the cache manager needs to know it.
public struct AttachedTask: Sendable, Equatable, Codable {
  /// The task's identifier.
  public var id: String
  /// The session it belongs to.
  public var session: String
  /// Its state, as `protfs tasks` prints it.
  public var state: String
  /// The URL it downloads.
  public var url: String
  /// Bytes received so far.
  public var bytesReceived: Int64
  /// The name of its `CFNetworkDownload_XXXXXX.tmp` file, if it has one.
  public var temporaryFileName: String?
  /// Whether the task is transferring now: its temp file is never purged.
  public var isRunning: Bool
  /// Whether the task can resume from its temp file: purged only when asked.
  public var isResumable: Bool

  /// Creates a task description.
  public init(
    id: String, session: String, state: String, url: String, bytesReceived: Int64,
    temporaryFileName: String?, isRunning: Bool, isResumable: Bool
  ) {
    self.id = id
    self.session = session
    self.state = state
    self.url = url
    self.bytesReceived = bytesReceived
    self.temporaryFileName = temporaryFileName
    self.isRunning = isRunning
    self.isResumable = isResumable
  }
}

/// Where the cache manager learns which download tasks own which temp files.
public protocol DownloadTaskDirectory: Sendable {
  /// The tasks of the container of `bundleID`.
  func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask]
}

/// A device with no download tasks.
public struct NoDownloadTasks: DownloadTaskDirectory {
  /// Creates the empty directory.
  public init() {}
  /// No tasks.
  public func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask] { [] }
}
