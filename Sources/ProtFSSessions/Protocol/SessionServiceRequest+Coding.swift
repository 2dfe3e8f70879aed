import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem

/// A request on the wire: one JSON object a line, `kind` and the kind's own members, named as
/// before the requests were typed (`session`, `configuration`, `destinationDirectory`, `request`,
/// `resumeData`, `path`, `task`, `tasks`, `text`, `producingResumeData`, `cancelling`, `fileOnly`,
/// `bundleID`, `olderThan`, `beginsAt`). The service's socket hears apps and other users, so the
/// decoding is strict: an unknown kind, a member of the wrong type, or a member the kind does not
/// take fails it ("a wrong value at 'MEMBER'"), and a member the kind needs that is absent is
/// refused as the service refused it before ("The request to the session service has no MEMBER.").
extension SessionServiceRequest: Codable {
  private enum Key: String, CodingKey {
    case kind, session, configuration, destinationDirectory, request, resumeData, path, task, tasks, text
    case producingResumeData, cancelling, fileOnly, bundleID, olderThan, beginsAt
  }

  /// Any member's name, to find those a kind does not take.
  private struct Member: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
  }

  /// The members `kind` takes besides `kind`. Two are left from the requests' older form and are
  /// still taken from older peers (an app's ProtFSKit is compiled into the app, a supervisor may
  /// outlive an upgrade): `session` with `openSession` and `adopt` (the configuration's identifier,
  /// which it must equal), `bundleID` with `eventsHandled` (unused: the store knows the app).
  private static func members(of kind: Kind) -> Set<Key> {
    switch kind {
    case .ping, .wake, .stop: []
    case .openSession: [.configuration, .destinationDirectory, .session]
    case .adopt: [.configuration, .destinationDirectory, .tasks, .session]
    case .createDownloadTask: [.session, .request, .resumeData]
    case .createUploadTask: [.session, .request, .path]
    case .resume: [.session, .task, .beginsAt]
    case .suspend: [.session, .task]
    case .cancel: [.session, .task, .producingResumeData]
    case .setDescription: [.session, .task, .text]
    case .tasks, .subscribe, .markDelivered: [.session]
    case .appTasks: [.session, .bundleID]
    case .prune: [.session, .bundleID, .olderThan]
    case .invalidate: [.session, .cancelling]
    case .acknowledge: [.session, .task, .fileOnly]
    case .eventsHandled: [.session, .bundleID]
    case .forceQuit: [.bundleID]
    case .wait: [.tasks]
    }
  }

  /// Decodes a request, refusing any member its kind does not take.
  package init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Key.self)
    let kind = try container.decode(Kind.self, forKey: .kind)
    let taken = Set(Self.members(of: kind).map(\.rawValue) + [Key.kind.rawValue])
    let all = try decoder.container(keyedBy: Member.self)
    if let other = all.allKeys.sorted(by: { $0.stringValue < $1.stringValue }).first(where: {
      !taken.contains($0.stringValue)
    }) {
      throw DecodingError.dataCorruptedError(
        forKey: other, in: all, debugDescription: "A \(kind.rawValue) request takes no \(other.stringValue).")
    }
    self = try Self.decode(kind, from: container)
  }

  /// The request of `kind` from `container`, whose members are all `kind`'s.
  private static func decode(_ kind: Kind, from container: KeyedDecodingContainer<Key>) throws -> Self {
    func optional<T: Decodable>(_ key: Key) throws -> T? { try container.decodeIfPresent(T.self, forKey: key) }
    func required<T: Decodable>(_ key: Key) throws -> T {
      guard let value: T = try optional(key) else { throw missing(key.rawValue) }
      return value
    }
    func session() throws -> String { try required(.session) }
    func task() throws -> Int64 { try required(.task) }
    switch kind {
    case .ping: return .ping
    case .openSession, .adopt:
      let configuration: SessionConfiguration = try required(.configuration)
      if let named: String = try optional(.session), named != configuration.identifier {
        throw DecodingError.dataCorruptedError(
          forKey: .session, in: container, debugDescription: "The session is not the configuration's.")
      }
      let directory: String? = try optional(.destinationDirectory)
      guard kind == .adopt else { return .openSession(configuration, destinationDirectory: directory) }
      return .adopt(configuration, destinationDirectory: directory, resuming: try optional(.tasks) ?? [])
    case .createDownloadTask:
      return .createDownloadTask(session: try session(), try required(.request), resumeData: try optional(.resumeData))
    case .createUploadTask:
      return .createUploadTask(session: try session(), try required(.request), path: try required(.path))
    case .resume: return .resume(session: try session(), task: try task(), beginsAt: try optional(.beginsAt))
    case .suspend: return .suspend(session: try session(), task: try task())
    case .cancel:
      return .cancel(
        session: try session(), task: try task(), producingResumeData: try optional(.producingResumeData) ?? false)
    case .setDescription: return .setDescription(session: try session(), task: try task(), text: try optional(.text))
    case .tasks: return .tasks(session: try session())
    case .appTasks: return .appTasks(session: try optional(.session), bundleID: try optional(.bundleID))
    case .prune:
      return .prune(
        session: try optional(.session), bundleID: try optional(.bundleID), olderThan: try optional(.olderThan))
    case .subscribe: return .subscribe(session: try session())
    case .invalidate: return .invalidate(session: try session(), cancelling: try optional(.cancelling) ?? false)
    case .acknowledge:
      return .acknowledge(session: try session(), task: try task(), fileOnly: try optional(.fileOnly) ?? false)
    case .eventsHandled: return .eventsHandled(session: try session())
    case .markDelivered: return .markDelivered(session: try session())
    case .forceQuit: return .forceQuit(bundleID: try required(.bundleID))
    case .wake: return .wake
    case .wait: return .wait(tasks: try required(.tasks))
    case .stop: return .stop
    }
  }

  /// Encodes the request: `kind` and the members of its values (an absent optional value, and a
  /// `fileOnly` that is false, are left out).
  package func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    try container.encode(kind, forKey: .kind)
    switch self {
    case .ping, .wake, .stop: break
    case .openSession(let configuration, let directory):
      try container.encode(configuration, forKey: .configuration)
      try container.encodeIfPresent(directory, forKey: .destinationDirectory)
    case .adopt(let configuration, let directory, let tasks):
      try container.encode(configuration, forKey: .configuration)
      try container.encodeIfPresent(directory, forKey: .destinationDirectory)
      try container.encode(tasks, forKey: .tasks)
    case .createDownloadTask(let session, let request, let resumeData):
      try container.encode(session, forKey: .session)
      try container.encode(request, forKey: .request)
      try container.encodeIfPresent(resumeData, forKey: .resumeData)
    case .createUploadTask(let session, let request, let path):
      try container.encode(session, forKey: .session)
      try container.encode(request, forKey: .request)
      try container.encode(path, forKey: .path)
    case .resume(let session, let task, let beginsAt):
      try container.encode(session, forKey: .session)
      try container.encode(task, forKey: .task)
      try container.encodeIfPresent(beginsAt, forKey: .beginsAt)
    case .suspend(let session, let task):
      try container.encode(session, forKey: .session)
      try container.encode(task, forKey: .task)
    case .cancel(let session, let task, let producingResumeData):
      try container.encode(session, forKey: .session)
      try container.encode(task, forKey: .task)
      try container.encode(producingResumeData, forKey: .producingResumeData)
    case .setDescription(let session, let task, let text):
      try container.encode(session, forKey: .session)
      try container.encode(task, forKey: .task)
      try container.encodeIfPresent(text, forKey: .text)
    default: try encodeOthers(to: &container)
    }
  }

  /// `encode(to:)`'s requests about a session as a whole, an app or the service.
  private func encodeOthers(to container: inout KeyedEncodingContainer<Key>) throws {
    switch self {
    case .tasks(let session), .subscribe(let session), .eventsHandled(let session), .markDelivered(let session):
      try container.encode(session, forKey: .session)
    case .appTasks(let session, let bundleID):
      try container.encodeIfPresent(session, forKey: .session)
      try container.encodeIfPresent(bundleID, forKey: .bundleID)
    case .prune(let session, let bundleID, let olderThan):
      try container.encodeIfPresent(session, forKey: .session)
      try container.encodeIfPresent(bundleID, forKey: .bundleID)
      try container.encodeIfPresent(olderThan, forKey: .olderThan)
    case .invalidate(let session, let cancelling):
      try container.encode(session, forKey: .session)
      try container.encode(cancelling, forKey: .cancelling)
    case .acknowledge(let session, let task, let fileOnly):
      try container.encode(session, forKey: .session)
      try container.encode(task, forKey: .task)
      if fileOnly { try container.encode(true, forKey: .fileOnly) }
    case .forceQuit(let bundleID): try container.encode(bundleID, forKey: .bundleID)
    case .wait(let tasks): try container.encode(tasks, forKey: .tasks)
    case .ping, .wake, .stop, .openSession, .adopt, .createDownloadTask, .createUploadTask, .resume, .suspend, .cancel,
      .setDescription:
      break  // `encode(to:)`'s own
    }
  }
}
