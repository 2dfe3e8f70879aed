import Foundation
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// How a session stands with the session service: what it tracks, and its connection, opened
/// with the first task that needs it.
extension URLSession {
  /// Where the session stands with the service.
  enum Connection: @unchecked Sendable {
    // @unchecked: the backends are Sendable; the enum holds them behind the Mutex alone.
    /// Not asked yet (a session that is not a background one, before its first download or upload).
    case deferred
    case opened(any SessionBackend)
    case failed(ProtFSError)
  }

  /// What the session tracks; guarded by `state`.
  ///
  /// `@unchecked Sendable`: it holds the delegate and the tasks, which are not Sendable, and is only
  /// ever touched inside `state`'s lock.
  struct SessionState: @unchecked Sendable {
    var delegate: (any URLSessionDelegate)?
    var description: String?
    var tasks: [Int: URLSessionTask] = [:]
    var completed: Set<Int> = []
    var resumedAt: [Int: Int64] = [:]
    var queuedDelivered = false
    /// The app was woken for this session's events: the next `queuedEventsDelivered` mark (which
    /// comes after everything the service sent before it) ends them with `urlSessionDidFinishEvents`.
    var woken = false
    /// Finished downloads whose file was acknowledged, whose completion is still to come.
    var acknowledged: Set<Int> = []
    /// No new task may be created (`finishTasksAndInvalidate` or `invalidateAndCancel` was called).
    var invalidated = false
    /// After `finishTasksAndInvalidate`: the tasks whose completion the session still waits for.
    var outstanding: Set<Int>?
    /// The session is over: `didBecomeInvalidWithError` is on its way and events are dropped,
    /// except the completions of `cancelledByEnd`.
    var ended = false
    /// The tasks of this process that `invalidateAndCancel` cancelled: each still gets its
    /// `didCompleteWithError` (`NSURLErrorCancelled`), before `didBecomeInvalidWithError`, as on iOS.
    var cancelledByEnd: Set<Int> = []
    /// The id the next task made here (never by the service) takes: negative, so that it is no
    /// service task's.
    var nextLocalID = -1
    /// The session itself while it has tasks, as Foundation's tasks keep their session: code that
    /// makes a session only to run a task (`URLSession(configuration: .default).dataTask(with:…)`)
    /// keeps no reference to it. Let go when the last task completes.
    var keptWhileRunning: URLSession?

    /// A new id for a task made here.
    mutating func takeLocalID() -> Int {
      defer { nextLocalID -= 1 }
      return nextLocalID
    }

    /// Sets `keptWhileRunning` from whether `tasks` holds any.
    mutating func keep(_ session: URLSession) { keptWhileRunning = tasks.isEmpty ? nil : session }
  }

  /// The service's session, opened now if it was not: the same one every time, or why there is none.
  func openedBackend() -> Result<any SessionBackend, ProtFSError> {
    Self.opening.withLock { _ in
      switch connection.withLock({ $0 }) {
      case .opened(let backend): return .success(backend)
      case .failed(let error): return .failure(error)
      case .deferred:
        do throws(ProtFSError) {
          let backend = try SessionServiceClient.open(configuration.sessionConfiguration(identifier: identifier))
          attach(backend)
          return .success(backend)
        } catch {
          connection.withLock { $0 = .failed(error) }
          return .failure(error)
        }
      }
    }
  }

  /// One session is opened at a time, so that two first tasks of one session open it once.
  private static let opening = Mutex(())

  /// Takes `backend` as the service's session: its tasks, a wake that came before, its events.
  func attach(_ backend: any SessionBackend) {
    connection.withLock { $0 = .opened(backend) }
    // The app's main thread makes its background session while it launches (for a relaunch, to
    // take the events of the tasks that outlived it) and lists the tasks before it returns, often
    // waiting for the list: as on iOS, what the service queued is delivered after that event, not
    // before the list, so that each delivery finds the task in what the app keeps. Only where the
    // main thread goes back to its run loop (`UIApplication.main`), or nothing would deliver it.
    if configuration.isBackground, Thread.isMainThread, UIApplication.mainLoopRuns.load(ordering: .acquiring) {
      pipeline.suspend()
      DispatchQueue.main.async { [pipeline] in pipeline.resume() }
    }
    for snapshot in (try? backend.tasks()) ?? [] { _ = task(for: snapshot) }
    // A wake that came before this session was made is this session's.
    if BackgroundSessionEvents.register(self) { state.withLock { $0.woken = true } }
    do {
      try backend.subscribe { [weak self] event in self?.receive(event) }
    } catch {
      FileHandle.standardError.write(Data("URLSession \(identifier): \(error.description)\n".utf8))
    }
  }
}
