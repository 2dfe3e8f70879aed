import Foundation
import ProtFSApp
import Synchronization

/// The BackgroundTasks framework's scheduler, with Apple's names and rules (docs/semantics.md §8):
/// an app registers a launch handler for each identifier its Info.plist lists in
/// `BGTaskSchedulerPermittedIdentifiers` while it launches, submits requests, and the system runs
/// them later, in the background, launching the app if it is not running (`protfs app refresh`,
/// `protfs app process`, or a scheduled `refresh@`/`process@` step, as Xcode's debugger command
/// `_simulateLaunchForTaskWithIdentifier` does). Only a program that `protfs app launch` runs has
/// one.
///
/// `@unchecked Sendable`: its tables are behind a mutex, and it may be used from any thread.
public final class BGTaskScheduler: @unchecked Sendable {
  /// The app's scheduler.
  public static let shared = BGTaskScheduler()

  /// The error `submit(_:)` throws, as BackgroundTasks' `BGTaskScheduler.Error`.
  public struct Error: Swift.Error, CustomNSError, Hashable, CustomStringConvertible {
    /// Its codes, as `BGTaskSchedulerErrorCode`.
    public enum Code: Int, Sendable, Hashable {
      /// The app cannot schedule background work.
      case unavailable = 1
      /// Too many requests of the kind are pending (one refresh, ten processing).
      case tooManyPendingTaskRequests = 2
      /// The identifier is not in `BGTaskSchedulerPermittedIdentifiers`, or the app does not
      /// declare the kind's background mode (`fetch`, `processing`).
      case notPermitted = 3
      /// The system cannot run the task at once.
      case immediateRunIneligible = 4
    }

    /// The code.
    public let code: Code
    /// What the system said.
    public let reason: String

    /// `BGTaskSchedulerErrorDomain`.
    public static var errorDomain: String { "BGTaskSchedulerErrorDomain" }
    /// The code's number.
    public var errorCode: Int { code.rawValue }
    /// The reason, as the localized description.
    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: reason] }
    /// The code and the reason.
    public var description: String { "BGTaskScheduler.Error(\(code)): \(reason)" }

    /// `.unavailable`, for `catch BGTaskScheduler.Error.unavailable`.
    public static var unavailable: Code { .unavailable }
    /// `.tooManyPendingTaskRequests`.
    public static var tooManyPendingTaskRequests: Code { .tooManyPendingTaskRequests }
    /// `.notPermitted`.
    public static var notPermitted: Code { .notPermitted }

    /// Errors of one code are equal, as bridged NSErrors of one domain and code.
    public static func == (lhs: Error, rhs: Error) -> Bool { lhs.code == rhs.code }
    /// Hashes the code.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
  }

  /// A launch handler and the queue it runs on.
  private struct Handler {
    var queue: DispatchQueue
    var body: @Sendable (BGTask) -> Void
  }

  private let handlers = Mutex<[String: Handler]>([:])
  private let running = Mutex<[String: BGTask]>([:])

  private init() {}

  /// Registers `launchHandler` for the tasks of `identifier`, to be called on `queue` (a
  /// background serial queue when nil). Returns false when the Info.plist does not permit the
  /// identifier. Registering an identifier twice, or after the app finished launching, is a
  /// programming error: the app stops with iOS's exception.
  @discardableResult
  public func register(
    forTaskWithIdentifier identifier: String, using queue: DispatchQueue?,
    launchHandler: @escaping @Sendable (BGTask) -> Void
  ) -> Bool {
    let reply = Supervisor.send(.bgTaskRegister(identifier: identifier))
    if let error = reply.error?.message {
      if reply.code == BackgroundTaskRefusal.programmingError.rawValue {
        UncaughtException.raise("NSInternalInconsistencyException", reason: error)
      }
      return false
    }
    let queue = queue ?? DispatchQueue(label: "com.apple.BGTaskScheduler (\(identifier))")
    handlers.withLock { $0[identifier] = Handler(queue: queue, body: launchHandler) }
    return true
  }

  /// Submits `taskRequest`, then calls `completionHandler` with the error, if any, on an arbitrary
  /// queue.
  public func submitTaskRequest(
    _ taskRequest: BGTaskRequest, completionHandler: @escaping @Sendable ((any Swift.Error)?) -> Void
  ) {
    DispatchQueue.global().async {
      do {
        try self.submit(taskRequest)
        completionHandler(nil)
      } catch {
        completionHandler(error)
      }
    }
  }

  /// Submits `taskRequest`, from async code.
  public func submitTaskRequest(_ taskRequest: BGTaskRequest) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Swift.Error>) in
      submitTaskRequest(taskRequest) { error in
        if let error { continuation.resume(throwing: error) } else { continuation.resume() }
      }
    }
  }

  /// Submits `taskRequest`; a pending request of the same identifier is replaced. An identifier
  /// whose launch handler was not registered is iOS's exception.
  public func submit(_ taskRequest: BGTaskRequest) throws {
    let type: BackgroundTaskRequest.Kind = taskRequest is BGProcessingTaskRequest ? .processing : .refresh
    let processing = taskRequest as? BGProcessingTaskRequest
    let message = BackgroundTaskMessage(
      identifier: taskRequest.identifier, type: type, earliestBeginDate: taskRequest.earliestBeginDate,
      requiresNetworkConnectivity: processing?.requiresNetworkConnectivity,
      requiresExternalPower: processing?.requiresExternalPower)
    let reply = Supervisor.send(.bgTaskSubmit(message))
    guard let error = reply.error?.message else { return }
    if reply.code == BackgroundTaskRefusal.programmingError.rawValue {
      UncaughtException.raise("NSInternalInconsistencyException", reason: error)
    }
    let code: Error.Code =
      switch BackgroundTaskRefusal(rawValue: reply.code ?? "") {
      case .tooManyPendingTaskRequests: .tooManyPendingTaskRequests
      case .notPermitted: .notPermitted
      default: .unavailable
      }
    throw Error(code: code, reason: error)
  }

  /// Cancels the pending request of `identifier`.
  public func cancel(taskRequestWithIdentifier identifier: String) {
    _ = Supervisor.send(.bgTaskCancel(identifier: identifier))
  }

  /// Cancels every pending request.
  public func cancelAllTaskRequests() {
    _ = Supervisor.send(.bgTaskCancel(identifier: nil))
  }

  /// Calls `completionHandler` with the requests submitted and not run yet.
  public func getPendingTaskRequests(completionHandler: @escaping @Sendable ([BGTaskRequest]) -> Void) {
    DispatchQueue.global().async { completionHandler(self.fetchPendingRequests()) }
  }

  /// The requests submitted and not run yet.
  public func pendingTaskRequests() async -> [BGTaskRequest] {
    await withCheckedContinuation { continuation in
      getPendingTaskRequests { continuation.resume(returning: $0) }
    }
  }

  private func fetchPendingRequests() -> [BGTaskRequest] {
    guard let value = Supervisor.send(.bgTaskRequests).value else { return [] }
    return BackgroundTaskMessage.requests(value).map { request -> BGTaskRequest in
      switch request.type {
      case .refresh:
        let made = BGAppRefreshTaskRequest(identifier: request.identifier)
        made.earliestBeginDate = request.earliestBeginDate
        return made
      case .processing:
        let made = BGProcessingTaskRequest(identifier: request.identifier)
        made.earliestBeginDate = request.earliestBeginDate
        made.requiresNetworkConnectivity = request.requiresNetworkConnectivity ?? false
        made.requiresExternalPower = request.requiresExternalPower ?? false
        return made
      }
    }
  }

  // MARK: - Events

  /// The system runs task `identifier` of `type`: its launch handler gets the task on its queue.
  /// No handler registered for it is iOS's exception.
  func launch(_ identifier: String, type: BackgroundTaskRequest.Kind) {
    guard let handler = handlers.withLock({ $0[identifier] }) else {
      UncaughtException.raise(
        "NSInternalInconsistencyException",
        reason: "No launch handler registered for task with identifier \(identifier)")
    }
    let task: BGTask =
      type == .refresh ? BGAppRefreshTask(identifier: identifier) : BGProcessingTask(identifier: identifier)
    running.withLock { $0[identifier] = task }
    handler.queue.async { handler.body(task) }
  }

  /// Task `identifier`'s time is running out: its expiration handler runs on its handler's queue.
  func expire(_ identifier: String) {
    guard let task = running.withLock({ $0[identifier] }),
      let queue = handlers.withLock({ $0[identifier]?.queue })
    else { return }
    queue.async { task.expirationHandler?() }
  }

  /// Task `identifier` was completed.
  func completed(_ identifier: String) {
    running.withLock { _ = $0.removeValue(forKey: identifier) }
  }
}

/// A request for the system to run a task later: `BGAppRefreshTaskRequest` or
/// `BGProcessingTaskRequest`.
///
/// `@unchecked Sendable`: its settable properties are behind a mutex.
public class BGTaskRequest: @unchecked Sendable, CustomStringConvertible {
  /// The task's identifier, one of `BGTaskSchedulerPermittedIdentifiers`.
  public let identifier: String
  private let beginDate = Mutex<Date?>(nil)
  /// The earliest the system may run it (nil: whenever it likes).
  public var earliestBeginDate: Date? {
    get { beginDate.withLock { $0 } }
    set { beginDate.withLock { $0 = newValue } }
  }

  init(identifier: String) { self.identifier = identifier }

  /// The request's class, identifier and earliest begin date, as Foundation describes one.
  public var description: String {
    "<\(type(of: self)): \(identifier), earliestBeginDate: \(earliestBeginDate.map { "\($0)" } ?? "(null)")>"
  }
}

/// A request for a short refresh (about 30 s); the app's Info.plist lists `fetch` in
/// `UIBackgroundModes`.
///
/// `@unchecked Sendable`: it adds nothing to `BGTaskRequest`.
public final class BGAppRefreshTaskRequest: BGTaskRequest, @unchecked Sendable {
  /// A request for `identifier`.
  public override init(identifier: String) { super.init(identifier: identifier) }
}

/// A request for a long task (minutes); the app's Info.plist lists `processing` in
/// `UIBackgroundModes`.
///
/// `@unchecked Sendable`: its settable properties are behind a mutex.
public final class BGProcessingTaskRequest: BGTaskRequest, @unchecked Sendable {
  private let needs = Mutex((network: false, power: false))
  /// Whether the task needs the network.
  public var requiresNetworkConnectivity: Bool {
    get { needs.withLock { $0.network } }
    set { needs.withLock { $0.network = newValue } }
  }
  /// Whether the task needs the device on power.
  public var requiresExternalPower: Bool {
    get { needs.withLock { $0.power } }
    set { needs.withLock { $0.power = newValue } }
  }
  /// A request for `identifier`.
  public override init(identifier: String) { super.init(identifier: identifier) }
}

/// A task the system runs, handed to the launch handler: set `expirationHandler` and call
/// `setTaskCompleted(success:)` once the work is done (or at once when it expires), or the app is
/// killed with a crash report.
///
/// `@unchecked Sendable`: its expiration handler and completion are behind a mutex.
public class BGTask: @unchecked Sendable {
  /// The task's identifier.
  public let identifier: String
  private let state = Mutex<(handler: (@Sendable () -> Void)?, completed: Bool)>((nil, false))

  init(identifier: String) { self.identifier = identifier }

  /// Called shortly before the task's time runs out (on the launch handler's queue).
  public var expirationHandler: (@Sendable () -> Void)? {
    get { state.withLock { $0.handler } }
    set { state.withLock { $0.handler = newValue } }
  }

  /// Tells the system the task is done; later calls do nothing.
  public func setTaskCompleted(success: Bool) {
    let first = state.withLock { current -> Bool in
      defer { current.completed = true }
      return !current.completed
    }
    guard first else { return }
    BGTaskScheduler.shared.completed(identifier)
    _ = Supervisor.send(
      .bgTaskCompleted(identifier: identifier, success: success))
  }
}

/// A refresh task (`BGAppRefreshTaskRequest`'s).
///
/// `@unchecked Sendable`: it adds nothing to `BGTask`.
public final class BGAppRefreshTask: BGTask, @unchecked Sendable {}

/// A processing task (`BGProcessingTaskRequest`'s).
///
/// `@unchecked Sendable`: it adds nothing to `BGTask`.
public final class BGProcessingTask: BGTask, @unchecked Sendable {}
