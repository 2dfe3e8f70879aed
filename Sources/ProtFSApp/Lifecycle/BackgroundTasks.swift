import Foundation
import ProtFS

/// A request the app submitted to BGTaskScheduler (docs/semantics.md §8), as the app's record
/// keeps it until the system runs it or the app cancels it: it outlives the app's process, as on
/// iOS, where a request submitted before the app was terminated still launches it.
public struct BackgroundTaskRequest: Codable, Sendable, Equatable {
  /// BGAppRefreshTaskRequest's or BGProcessingTaskRequest's.
  public enum Kind: String, Codable, Sendable, CaseIterable {
    /// A short refresh (about 30 s), for an app whose UIBackgroundModes lists `fetch`.
    case refresh
    /// A long task (minutes), for an app whose UIBackgroundModes lists `processing`.
    case processing

    /// The background mode an app must declare to submit it.
    public var requiredMode: String { self == .refresh ? "fetch" : "processing" }
    /// How many of its kind may be pending at once, as on iOS.
    public var pendingLimit: Int { self == .refresh ? 1 : 10 }
  }

  /// The task's identifier, one of the app's `BGTaskSchedulerPermittedIdentifiers`.
  public var identifier: String
  /// Its kind.
  public var type: Kind
  /// The earliest moment the system may run it (nil: as soon as it likes).
  public var earliestBeginDate: Date?
  /// BGProcessingTaskRequest's `requiresNetworkConnectivity`.
  public var requiresNetworkConnectivity: Bool?
  /// BGProcessingTaskRequest's `requiresExternalPower`.
  public var requiresExternalPower: Bool?

  /// A request for `identifier` of `type`.
  public init(
    identifier: String, type: Kind, earliestBeginDate: Date? = nil, requiresNetworkConnectivity: Bool? = nil,
    requiresExternalPower: Bool? = nil
  ) {
    self.identifier = identifier
    self.type = type
    self.earliestBeginDate = earliestBeginDate
    self.requiresNetworkConnectivity = requiresNetworkConnectivity
    self.requiresExternalPower = requiresExternalPower
  }

  /// The longest identifier accepted (iOS's reverse-DNS identifiers are far shorter).
  public static let identifierLimit = 255

  /// Whether `identifier` is one a request may carry: 1 to 255 printable characters without spaces.
  public static func isValidIdentifier(_ identifier: String) -> Bool {
    !identifier.isEmpty && identifier.utf8.count <= identifierLimit
      && identifier.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value != 0x7F }
  }
}

extension BackgroundTaskRequest {
  /// Why no request may run (`choose`).
  public struct NotRunnable: Error, Equatable {
    /// In words, naming the fix.
    public var message: String
  }

  /// The request of `type` among `requests` the system runs for `message` at `date`: the one it
  /// names, or the first of the kind that is due; never one whose earliest begin date has not
  /// come, unless `message.now`.
  public static func choose(
    from requests: [BackgroundTaskRequest], for message: BackgroundTaskMessage, type: Kind, at date: Date,
    app bundleID: String
  ) -> Result<BackgroundTaskRequest, NotRunnable> {
    let candidates = requests.filter { request in
      request.type == type && (message.identifier == nil || message.identifier == request.identifier)
    }
    guard let first = candidates.first else {
      let which = message.identifier.map { "'\($0)' " } ?? ""
      return .failure(
        NotRunnable(
          message:
            "No \(type.rawValue) task request \(which)of \(bundleID) is pending: the app submits one with BGTaskScheduler.submit (or protfs app bgtask-submit)."
        ))
    }
    if message.now == true { return .success(first) }
    if let due = candidates.first(where: { ($0.earliestBeginDate ?? .distantPast) <= date }) { return .success(due) }
    let earliest = first.earliestBeginDate.map { JSONStateFile.timestamp($0) } ?? ""
    return .failure(
      NotRunnable(
        message:
          "The \(type.rawValue) task '\(first.identifier)' may not begin before \(earliest); give --now to run it anyway."
      ))
  }
}

/// The argument of the background-task requests (`AppRequest.Kind.bgTask…`), one JSON object:
/// the identifier, and what the request needs besides.
public struct BackgroundTaskMessage: Codable, Sendable, Equatable {
  /// The task's identifier (nil for a launch of whichever request is due first, or to cancel all).
  public var identifier: String?
  /// The request's kind (a submission, a launch).
  public var type: BackgroundTaskRequest.Kind?
  /// A submission's earliest begin date.
  public var earliestBeginDate: Date?
  /// A submission's `requiresNetworkConnectivity`.
  public var requiresNetworkConnectivity: Bool?
  /// A submission's `requiresExternalPower`.
  public var requiresExternalPower: Bool?
  /// A completion's `success`.
  public var success: Bool?
  /// A launch before the request's earliest begin date (`--now`).
  public var now: Bool?

  /// A message about `identifier`.
  public init(
    identifier: String? = nil, type: BackgroundTaskRequest.Kind? = nil, earliestBeginDate: Date? = nil,
    requiresNetworkConnectivity: Bool? = nil, requiresExternalPower: Bool? = nil, success: Bool? = nil,
    now: Bool? = nil
  ) {
    self.identifier = identifier
    self.type = type
    self.earliestBeginDate = earliestBeginDate
    self.requiresNetworkConnectivity = requiresNetworkConnectivity
    self.requiresExternalPower = requiresExternalPower
    self.success = success
    self.now = now
  }

  /// The submission of `request`.
  public init(submitting request: BackgroundTaskRequest) {
    self.init(
      identifier: request.identifier, type: request.type, earliestBeginDate: request.earliestBeginDate,
      requiresNetworkConnectivity: request.requiresNetworkConnectivity,
      requiresExternalPower: request.requiresExternalPower)
  }

  private enum Key: String, CodingKey {
    case identifier, type, earliestBeginDate, requiresNetworkConnectivity, requiresExternalPower, success, now
  }

  /// Decodes a message, its date in seconds since 1970 whatever the decoder's date strategy: it is
  /// read inside a request (`AppRequest.bgTaskSubmit`) as well as on its own.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Key.self)
    identifier = try container.decodeIfPresent(String.self, forKey: .identifier)
    type = try container.decodeIfPresent(BackgroundTaskRequest.Kind.self, forKey: .type)
    earliestBeginDate = try container.decodeIfPresent(Double.self, forKey: .earliestBeginDate)
      .map(Date.init(timeIntervalSince1970:))
    requiresNetworkConnectivity = try container.decodeIfPresent(Bool.self, forKey: .requiresNetworkConnectivity)
    requiresExternalPower = try container.decodeIfPresent(Bool.self, forKey: .requiresExternalPower)
    success = try container.decodeIfPresent(Bool.self, forKey: .success)
    now = try container.decodeIfPresent(Bool.self, forKey: .now)
  }

  /// Encodes the message, its date in seconds since 1970 (as `init(from:)` reads it).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    try container.encodeIfPresent(identifier, forKey: .identifier)
    try container.encodeIfPresent(type, forKey: .type)
    try container.encodeIfPresent(earliestBeginDate?.timeIntervalSince1970, forKey: .earliestBeginDate)
    try container.encodeIfPresent(requiresNetworkConnectivity, forKey: .requiresNetworkConnectivity)
    try container.encodeIfPresent(requiresExternalPower, forKey: .requiresExternalPower)
    try container.encodeIfPresent(success, forKey: .success)
    try container.encodeIfPresent(now, forKey: .now)
  }

  /// The message as a request's argument.
  public var json: String {
    (try? Self.encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
  }

  /// The message `text` holds, or nil when it holds none (bounded: whoever sent it is not trusted).
  public static func parse(_ text: String) -> BackgroundTaskMessage? {
    guard text.utf8.count <= 4096 else { return nil }
    return try? decoder.decode(BackgroundTaskMessage.self, from: Data(text.utf8))
  }

  private static let encoder: JSONEncoder = {
    let encoder = JSONEncoder()
    encoder.dateEncodingStrategy = .secondsSince1970
    encoder.outputFormatting = .sortedKeys
    return encoder
  }()
  private static let decoder: JSONDecoder = {
    let decoder = JSONDecoder()
    decoder.dateDecodingStrategy = .secondsSince1970
    return decoder
  }()

  /// The pending `requests` as a reply's value (`bgTaskRequests`), and back.
  public static func list(_ requests: [BackgroundTaskRequest]) -> String {
    (try? encoder.encode(requests)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
  }

  /// The requests a `bgTaskRequests` reply lists.
  public static func requests(_ text: String) -> [BackgroundTaskRequest] {
    (try? decoder.decode([BackgroundTaskRequest].self, from: Data(text.utf8))) ?? []
  }
}

/// Why BGTaskScheduler refused a request, as its error codes name it (`AppReply.code`).
public enum BackgroundTaskRefusal: String, Sendable {
  /// `BGTaskScheduler.Error.Code.notPermitted`: the identifier is not permitted, or the app does
  /// not declare the background mode.
  case notPermitted
  /// `.tooManyPendingTaskRequests`: one refresh and ten processing requests at most.
  case tooManyPendingTaskRequests
  /// `.unavailable`: the app cannot schedule background work.
  case unavailable
  /// A launch handler registered twice, or after the launch finished: iOS raises an exception.
  case programmingError
}
