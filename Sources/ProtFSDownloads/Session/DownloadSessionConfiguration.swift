/// How a download session behaves: where it keeps its state and bytes, and how it treats the network.
public struct DownloadSessionConfiguration: Sendable {
  /// The session's identifier; opening a session with the same one reattaches its unfinished tasks.
  public var identifier: String
  /// The bundle id the session belongs to.
  public var bundleID: String
  /// The task store's path (`<device>/.protfs/downloads.sqlite`).
  public var storePath: String
  /// Where temp files are written (`…/Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id>`);
  /// created when missing.
  public var temporaryDirectory: String
  /// Where finished files go unless a task names another directory.
  public var destinationDirectory: String
  /// Where upload tasks keep the snapshot of the file they send
  /// (`…/Library/Caches/com.apple.nsurlsessiond/Uploads/<bundle-id>`); by default beside the
  /// temp directory (its last `Downloads` component replaced by `Uploads`). Created when missing.
  public var uploadsDirectory: String
  /// The directory an upload's source file must be inside (the app's container); nil allows any.
  public var sourceDirectory: String?
  /// Connections per host (`CURLMOPT_MAX_HOST_CONNECTIONS`; iOS's default is 6).
  public var maximumConnectionsPerHost: Int = 6
  /// How many times a connection error or a 5xx answer is retried before the task fails.
  public var maximumRetries: Int = 4
  /// The first retry's delay; each further retry doubles it.
  public var retryBaseDelay: Duration = .milliseconds(500)
  /// The longest delay between retries.
  public var retryMaximumDelay: Duration = .seconds(30)
  /// How long to wait for a connection.
  public var connectTimeout: Duration = .seconds(30)
  /// How long a transfer may receive nothing, or less than `minimumSpeed` bytes a second, before
  /// the attempt times out and is retried (URLSession's `timeoutIntervalForRequest`). New tasks
  /// keep the value, so that a later session resuming them applies it too.
  public var requestTimeout: Duration = .seconds(60)
  /// The speed, in bytes a second averaged over `requestTimeout`, below which a transfer counts as
  /// stalled: a server trickling a byte a second is as stuck as a silent one.
  public var minimumSpeed: Int = 100
  /// How long a task may take in all, from its creation and across resumes, before it fails for
  /// good (URLSession's `timeoutIntervalForResource`, 7 days). New tasks keep the value.
  public var resourceTimeout: Duration = .seconds(7 * 86400)
  /// libcurl's receive buffer (`CURLOPT_BUFFERSIZE`), and the staging buffer bytes gather in
  /// before a write. 128 KiB keeps both in the CPU's cache: measured against 64 KiB to 1 MiB for a
  /// 1 GiB download from nginx on loopback, it was the fastest (0.63-0.90 s, against 1.1-1.4 s
  /// with 1 MiB, which had measured best on another kernel).
  public var receiveBufferSize: Int = 128 << 10
  /// How often progress is written to the task store.
  public var progressPersistInterval: Duration = .seconds(1)
  /// How often, at most, progress is reported per task.
  public var progressEventInterval: Duration = .milliseconds(100)
  /// Whether tasks that were running when their session's process ended start again on reattach.
  public var resumesReattachedTasks: Bool = true
  /// A session that records tasks for the session service to run (`download --detach`): each new
  /// task carries a resume request in the store from the moment it is recorded, so that it runs
  /// even if this process dies before handing it over (the service takes the request when it
  /// claims the task); and requests it finds on reattached tasks are left for the service.
  package var recordsForService: Bool = false
  /// Whether finished files are flushed to disk (fsync) before they are moved into place, so that
  /// not even a power cut can leave a partial file at the destination. Off by default, as with
  /// curl, wget and aria2c: the rename into place already keeps a killed or crashed process from
  /// leaving one, and flushing makes a download wait for the disk (twice curl's time for a large
  /// file on a disk slower than the network).
  public var synchronizesFiles: Bool = false
  /// Whether a new temp file is made without a name (`O_TMPFILE`), named in its temp directory
  /// only when something must find it there (docs/semantics.md §5), so that a download finishing
  /// at once is linked straight into its destination: half the directory updates of a named file
  /// renamed into place. Off, or on a filesystem without `O_TMPFILE`, every temp file is named
  /// from the start (the tests exercise both).
  package var usesUnnamedTemporaryFiles: Bool = true
  /// How long finished downloads wait for others to finish with them, so that many small files
  /// share one store transaction and one flush: a group commit. Zero settles each batch at once.
  /// Nil (the default) waits `flushGroupWindow` when `synchronizesFiles`, where the flushes are
  /// what grouping saves, and not at all otherwise: a finisher busy with one batch gathers the next
  /// meanwhile by itself, and waiting only added latency (7–9% of a run of 2,000 small files).
  public var settleGroupWindow: Duration?
  /// The group window of a session that flushes its files, unless `settleGroupWindow` says otherwise.
  public static let flushGroupWindow: Duration = .milliseconds(4)

  /// The group window in effect: `settleGroupWindow`, or its default.
  package var effectiveGroupWindow: Duration {
    settleGroupWindow ?? (synchronizesFiles ? Self.flushGroupWindow : .zero)
  }
  /// How often running transfers ask the access policy whether they may go on writing, and the
  /// session looks for requests from other processes in the store.
  public var accessCheckInterval: Duration = .milliseconds(250)
  /// The lock policy consulted before writing a temp file and before placing a result.
  public var accessPolicy: any DownloadAccessPolicy = AllowAllDownloadAccess()
  /// How the temp and destination directories are opened (held, following no symlink on a device)
  /// and how new files are labelled.
  public var fileSystem: any DownloadFileSystem = PlainDownloadFileSystem()
  /// The user agent sent to HTTP servers.
  public var userAgent: String = "protfs"
  /// A PEM file of certificate authorities to trust for HTTPS instead of the system's
  /// (`CURLOPT_CAINFO`); for servers with private certificates, such as a test server's.
  public var trustedCertificatesPath: String?

  /// Creates a configuration with the defaults above.
  public init(
    identifier: String, bundleID: String, storePath: String, temporaryDirectory: String,
    destinationDirectory: String
  ) {
    self.identifier = identifier
    self.bundleID = bundleID
    self.storePath = storePath
    self.temporaryDirectory = temporaryDirectory
    self.destinationDirectory = destinationDirectory
    uploadsDirectory = Self.uploadsDirectory(beside: temporaryDirectory)
  }

  /// `temporaryDirectory` with its last `Downloads` component replaced by `Uploads`, or with
  /// `.uploads` appended when it has none.
  package static func uploadsDirectory(beside temporaryDirectory: String) -> String {
    var components = temporaryDirectory.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard let index = components.lastIndex(of: "Downloads") else { return temporaryDirectory + ".uploads" }
    components[index] = "Uploads"
    return components.joined(separator: "/")
  }
}
