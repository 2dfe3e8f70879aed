import Foundation
import ProtFS
import ProtFSSystem

/// A request on the wire: one JSON object a line, `kind` and the kind's own members (`name`,
/// `task`, `result`, `session`, `payload`, `event`, `line`, `seconds` or `never`, `identifier`,
/// `success`, `message`, `playing`, `updates`, `latitude` and `longitude`, `user`). A member of the
/// wrong type, or a value out of range, fails the decoding: the supervisor refuses the request
/// before anything reads it.
extension AppRequest: Codable {
  private enum Key: String, CodingKey {
    case kind, argument, name, task, result, session, payload, event, line, seconds, never, identifier, success
    case message, playing, updates, latitude, longitude, user
  }

  /// Decodes a request; one of the old form (`kind` and a string `argument`) is parsed as
  /// `init(parsing:_:)` parses it. An older peer can still send that form: the supervisor and the
  /// `protfs app` helpers come from one build, but an app's ProtFSKit is compiled into the app, which
  /// may have been built by an older protfs.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Key.self)
    let kind = try container.decode(Kind.self, forKey: .kind)
    if let argument = try container.decodeIfPresent(String.self, forKey: .argument) {
      self = try AppRequest(parsing: kind, argument)
      return
    }
    if let request = AppRequest(kind) {
      self = request
      return
    }
    self = try Self.decode(kind, from: container)
  }

  /// The request of `kind` (one that carries values) from `container`.
  private static func decode(_ kind: Kind, from container: KeyedDecodingContainer<Key>) throws -> AppRequest {
    func text(_ key: Key) throws -> String { try container.decode(String.self, forKey: key) }
    switch kind {
    case .terminate: return .terminate(byUser: try container.decodeIfPresent(Bool.self, forKey: .user) ?? false)
    case .beginTask: return .beginTask(name: try text(.name))
    case .endTask: return .endTask(id: try container.decode(Int.self, forKey: .task))
    case .fetchCompleted: return .fetchCompleted(try container.decode(CompletionResult.self, forKey: .result))
    case .pushCompleted: return .pushCompleted(try container.decode(CompletionResult.self, forKey: .result))
    case .sessionEvents: return .sessionEvents(session: try text(.session))
    case .eventsHandled: return .eventsHandled(session: try text(.session))
    case .push: return .push(payload: try text(.payload))
    case .mainThreadAnswered: return .mainThreadAnswered(event: try container.decode(Int.self, forKey: .event))
    case .uncaughtException: return .uncaughtException(line: try text(.line))
    case .setFetchInterval:
      if try container.decodeIfPresent(Bool.self, forKey: .never) == true { return .setFetchInterval(seconds: nil) }
      let seconds = try container.decode(Double.self, forKey: .seconds)
      guard seconds.isFinite, seconds >= 0 else { throw Self.notAFetchInterval(String(seconds)) }
      return .setFetchInterval(seconds: seconds)
    case .bgTaskRegister: return .bgTaskRegister(identifier: try text(.identifier))
    case .bgTaskExpire: return .bgTaskExpire(identifier: try text(.identifier))
    case .bgTaskCancel:
      return .bgTaskCancel(identifier: try container.decodeIfPresent(String.self, forKey: .identifier))
    case .bgTaskSubmit: return .bgTaskSubmit(try container.decode(BackgroundTaskMessage.self, forKey: .message))
    case .bgTaskLaunch: return .bgTaskLaunch(try container.decode(BackgroundTaskMessage.self, forKey: .message))
    case .bgTaskCompleted:
      return .bgTaskCompleted(
        identifier: try text(.identifier), success: try container.decode(Bool.self, forKey: .success))
    case .audio: return .audio(playing: try container.decode(Bool.self, forKey: .playing))
    case .locationUpdates: return .locationUpdates(try container.decode(LocationUpdates.self, forKey: .updates))
    case .location:
      let latitude = try container.decode(Double.self, forKey: .latitude)
      let longitude = try container.decode(Double.self, forKey: .longitude)
      guard let coordinate = Coordinate(latitude: latitude, longitude: longitude) else {
        throw Self.notALocation("\(latitude),\(longitude)")
      }
      return .location(coordinate)
    case .background, .foreground, .fetch, .timeRemaining, .startSessionService, .watchMainThread, .bgTaskRequests:
      // Carry nothing: `init?(_ kind:)` made them.
      throw ProtFSError(.invalidArgument, "The request \(kind.rawValue) carries nothing.")
    }
  }

  /// Encodes the request in its typed form (never the old `argument`).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    try container.encode(kind, forKey: .kind)
    switch self {
    case .background, .foreground, .fetch, .timeRemaining, .startSessionService, .watchMainThread, .bgTaskRequests:
      break
    case .terminate(let byUser): if byUser { try container.encode(true, forKey: .user) }
    case .beginTask(let name): try container.encode(name, forKey: .name)
    case .endTask(let id): try container.encode(id, forKey: .task)
    case .fetchCompleted(let result), .pushCompleted(let result): try container.encode(result, forKey: .result)
    case .sessionEvents(let session), .eventsHandled(let session): try container.encode(session, forKey: .session)
    case .push(let payload): try container.encode(payload, forKey: .payload)
    case .mainThreadAnswered(let event): try container.encode(event, forKey: .event)
    case .uncaughtException(let line): try container.encode(line, forKey: .line)
    case .setFetchInterval(let seconds):
      if let seconds {
        try container.encode(seconds, forKey: .seconds)
      } else {
        try container.encode(true, forKey: .never)
      }
    case .bgTaskRegister(let identifier), .bgTaskExpire(let identifier):
      try container.encode(identifier, forKey: .identifier)
    case .bgTaskCancel(let identifier): try container.encodeIfPresent(identifier, forKey: .identifier)
    case .bgTaskSubmit(let message), .bgTaskLaunch(let message): try container.encode(message, forKey: .message)
    case .bgTaskCompleted(let identifier, let success):
      try container.encode(identifier, forKey: .identifier)
      try container.encode(success, forKey: .success)
    case .audio(let playing): try container.encode(playing, forKey: .playing)
    case .locationUpdates(let updates): try container.encode(updates, forKey: .updates)
    case .location(let coordinate):
      try container.encode(coordinate.latitude, forKey: .latitude)
      try container.encode(coordinate.longitude, forKey: .longitude)
    }
  }
}

extension AppRequest {
  /// The request of `kind` whose one value is `argument`'s text, as the old form of the wire and
  /// the command line give it; throws `.invalidArgument`, saying what the text should be, when it
  /// is not one.
  package init(parsing kind: Kind, _ argument: String?) throws(ProtFSError) {
    if let request = AppRequest(kind) {
      self = request
      return
    }
    let text = argument ?? ""
    switch kind {
    case .terminate: self = .terminate(byUser: text == "user")
    case .beginTask: self = .beginTask(name: text)
    case .endTask:
      guard let id = Int(text) else { throw Self.refusal("'\(text)' is not an open background task.") }
      self = .endTask(id: id)
    case .fetchCompleted:
      guard let result = CompletionResult(rawValue: text) else {
        throw Self.refusal("'\(text)' is not a fetch result: give newData, noData or failed.")
      }
      self = .fetchCompleted(result)
    case .pushCompleted:
      guard let result = CompletionResult(rawValue: text) else {
        throw Self.refusal("'\(text)' is not a result of a remote notification: give newData, noData or failed.")
      }
      self = .pushCompleted(result)
    case .sessionEvents: self = .sessionEvents(session: text)
    case .eventsHandled: self = .eventsHandled(session: text)
    case .push: self = .push(payload: text)
    case .mainThreadAnswered:
      guard let number = text == "launch" ? 0 : Int(text) else {
        throw Self.refusal("No event \(text) waits for the main thread's answer.")
      }
      self = .mainThreadAnswered(event: number)
    case .uncaughtException: self = .uncaughtException(line: text)
    case .setFetchInterval: self = .setFetchInterval(seconds: try Self.fetchInterval(text))
    default: self = try Self.parse(kind, text, argument)
    }
  }

  /// `init(parsing:_:)`'s background tasks, audio and location.
  private static func parse(_ kind: Kind, _ text: String, _ argument: String?) throws(ProtFSError) -> AppRequest {
    switch kind {
    case .bgTaskRegister: return .bgTaskRegister(identifier: text)
    case .bgTaskExpire: return .bgTaskExpire(identifier: text)
    case .bgTaskCancel: return .bgTaskCancel(identifier: argument)
    case .bgTaskSubmit:
      guard let message = BackgroundTaskMessage.parse(text) else {
        throw refusal("The task request is not valid: it needs an identifier and a type.")
      }
      return .bgTaskSubmit(message)
    case .bgTaskLaunch:
      guard let message = BackgroundTaskMessage.parse(text) else {
        throw refusal("The launch is not valid: it needs the task's type.")
      }
      return .bgTaskLaunch(message)
    case .bgTaskCompleted:
      guard let message = BackgroundTaskMessage.parse(text), let identifier = message.identifier,
        let success = message.success
      else { throw refusal("The completion is not valid: it needs the task's identifier and its success.") }
      return .bgTaskCompleted(identifier: identifier, success: success)
    case .audio:
      guard text == "play" || text == "stop" else { throw refusal("'\(text)' is not play or stop.") }
      return .audio(playing: text == "play")
    case .locationUpdates:
      guard let updates = LocationUpdates(rawValue: text) else {
        throw refusal("'\(text)' is not foreground, background or stop.")
      }
      return .locationUpdates(updates)
    case .location:
      guard let coordinate = Coordinate(text) else { throw notALocation(String(text.prefix(80))) }
      return .location(coordinate)
    default:
      throw refusal("The request \(kind.rawValue) is not valid.")
    }
  }

  /// The interval `text` gives: seconds (0 or more), or nil for `never`.
  package static func fetchInterval(_ text: String) throws(ProtFSError) -> Double? {
    if text == "never" { return nil }
    guard let seconds = Double(text), seconds.isFinite, seconds >= 0 else { throw notAFetchInterval(text) }
    return seconds
  }

  private static func notAFetchInterval(_ text: String) -> ProtFSError {
    refusal("'\(text)' is not a fetch interval: give seconds (0 for the minimum) or never.")
  }

  private static func notALocation(_ text: String) -> ProtFSError {
    refusal("'\(text)' is not a location: give LATITUDE,LONGITUDE in degrees, such as 48.8584,2.2945.")
  }

  private static func refusal(_ message: String) -> ProtFSError { ProtFSError(.invalidArgument, message) }
}
