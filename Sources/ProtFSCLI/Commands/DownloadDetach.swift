import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSLaunch
import ProtFSSessions
import ProtFSSystem

/// `download --detach`: the tasks are recorded here, then handed to the session service.
extension DownloadCommand {
  /// `--detach`.
  package static let detach = Option.flag(
    "detach", help: "Hand the tasks to the session service, print their ids and return at once.")

  /// Records the tasks (suspended, each with a resume request for the service) a chunk at a time
  /// and hands each chunk to the device's session service as soon as it is recorded, starting the
  /// service if needed, so that the first transfers run while a long list is still being recorded;
  /// prints the ids handed over. When the service cannot take them, the tasks not handed over stay
  /// suspended in the store, resumable by `protfs tasks resume`, and one error says so. Tasks left
  /// so, or by a `download --detach` killed before its handover, go to the service with the next
  /// one's, or when the service next starts (the session is marked as the service's before the
  /// first task is recorded). `next(n)` gives up to `n` more requests; the chunks
  /// double up to `chunk`, so that the service, done with a small first chunk in a few
  /// milliseconds, soon has the next.
  static func detach(
    _ invocation: Invocation, configuration: DownloadSessionConfiguration, first: [DownloadRequest],
    next: (Int) -> [DownloadRequest]
  ) throws -> Int32 {
    // Tasks a killed process left running are reattached here, not run: they go to the service
    // with the new ones and run again there. So do those a killed `download --detach` recorded
    // and did not hand over (they carry their resume request), and every task recorded here
    // carries one from the start, so that the service runs it whenever it gets it.
    var opening = configuration
    opening.resumesReattachedTasks = false
    opening.recordsForService = true
    let session = try DownloadSession(configuration: opening)
    var handover = ServiceHandover(invocation, configuration: configuration)
    try handover.register(in: session.store)
    try handOverStranded(session, &handover)
    var kept: [DownloadTask] = []
    var requests = first
    var size = max(first.count, 1)
    do {
      defer { session.invalidate() }
      while !requests.isEmpty {
        let tasks = try session.downloadTasks(with: requests)
        size = min(size * 2, chunk)
        requests = next(size)
        // A task this session cannot let go of yet (not suspended) is handed over once it is closed.
        let released = handover.failure == nil ? try session.release(tasks) : []
        let handed = Set(released.map(\.id))
        kept += tasks.filter { !handed.contains($0.id) }
        handover.hand(released)
      }
    }
    let leftover = kept
    kept = []
    handover.hand(leftover)
    try handover.finish()
    return exitCompleted
  }

  /// Hands over the tasks a killed process left running, or a killed `download --detach` recorded
  /// and did not hand over (they carry their resume request): they run again in the service.
  private static func handOverStranded(_ session: DownloadSession, _ handover: inout ServiceHandover) throws {
    let reattached = session.allTasks
    let reattachedIDs = reattached.map(\.id)
    let requested = try session.store.pendingRequests(ids: reattachedIDs)
    let states = try session.store.states(ids: reattachedIDs)
    let stranded = Set(reattachedIDs.filter { states[$0]?.state == .running || requested[$0] == .resume })
    guard !stranded.isEmpty else { return }
    handover.hand(try session.release(reattached.filter { stranded.contains($0.id) }))
  }

  /// Hands the recorded `tasks` of `configuration`'s session (suspended, released) to the
  /// device's session service, starting it if needed, and prints their ids; when the service cannot
  /// take them they stay suspended in the store and one error says so. `upload --detach` too.
  static func handToService(
    _ invocation: Invocation, configuration: DownloadSessionConfiguration, tasks: [DownloadTask]
  ) throws {
    var handover = ServiceHandover(invocation, configuration: configuration)
    handover.hand(tasks)
    try handover.finish()
  }
}

/// Tasks handed to the session service in parts: the service is started (if needed) before the
/// first, each part's ids are printed once the service took it (with --json, a JSON line per
/// task), and after the first failure the rest are only collected for the error.
struct ServiceHandover {
  /// The service's settings for the session.
  private let settings: SessionConfiguration
  private let device: Device
  /// How the error's remedy spells the commands it suggests.
  private let spelling: CommandSpelling
  private let destinationDirectory: String
  /// Whether each task is printed as a JSON line (`--json`) instead of its bare id.
  private let json: Bool
  private var started = false
  /// Why the service did not take a part, after the first failure.
  private(set) var failure: String?
  /// The tasks not handed over.
  private var kept: [Int64] = []

  init(_ invocation: Invocation, configuration: DownloadSessionConfiguration) {
    var settings = SessionConfiguration(identifier: configuration.identifier, bundleID: configuration.bundleID)
    settings.connectionsPerHost = configuration.maximumConnectionsPerHost
    settings.requestTimeout = Double(configuration.requestTimeout.components.seconds)
    settings.resourceTimeout = Double(configuration.resourceTimeout.components.seconds)
    settings.sendsLaunchEvents = false
    self.settings = settings
    device = invocation.device
    spelling = invocation.spelling
    destinationDirectory = configuration.destinationDirectory
    json = invocation.flag(CommonOptions.json)
  }

  /// Hands `tasks` (recorded and released) to the service and prints them; keeps them for the
  /// error instead once a part failed.
  mutating func hand(_ tasks: [DownloadTask]) {
    let ids = tasks.map(\.id)
    guard !ids.isEmpty else { return }
    guard failure == nil else {
      kept += ids
      return
    }
    do {
      if !started {
        try SessionServiceStarter.ensureRunning(device)
        started = true
      }
      try SessionServiceClient.adopt(
        settings, destinationDirectory: destinationDirectory, resuming: ids,
        socketName: SessionServiceClient.socketName(device: device))
    } catch {
      failure = (error as? ProtFSError)?.message ?? "\(error)"
      kept += ids
      return
    }
    for task in tasks {
      if json {
        try? Console.jsonLine(
          HandedOverTask(id: task.id, kind: task.kind, sessionIdentifier: settings.identifier))
      } else {
        Console.out(String(task.id))
      }
    }
  }

  /// Marks the session as the service's in `store` before a task is recorded: a service that
  /// starts later runs the tasks even if this command dies before handing any over.
  func register(in store: DownloadStore) throws {
    try SessionService.register(settings, destinationDirectory: destinationDirectory, in: store)
  }

  /// Throws the one error naming the tasks not handed over, if any.
  func finish() throws {
    guard let failure else { return }
    let list = kept.map(String.init).joined(separator: " ")
    throw ProtFSError(
      .io, "The tasks (\(list)) were not handed to the session service: \(failure)",
      remedy: .advice(
        "they stay suspended and run when the session service next starts (\(spelling.command("sessions start"))) or with the next `download --detach` of the session; \(spelling.command("tasks resume ID")) runs one here"
      ))
  }
}
