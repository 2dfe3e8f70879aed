import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSessions
import ProtFSSystem
import Synchronization

/// `protfs tasks events --session ID`: the delegate calls queued for a session's app, for apps not
/// written in Swift (docs/semantics.md §9).
package enum TasksEventsCommand {
  package static let command = Command(
    name: "events",
    abstract: "Print the completions a background session's app has not acknowledged yet.",
    discussion: """
      One line per delegate call, in order per task: didFinishDownloadingTo with the handed-over
      file's location (it exists until the app acknowledges it with `protfs app events-handled ID`;
      move it before), then didCompleteWithError with null or the error. With --json, JSON lines
      such as {"task":3,"event":"didFinishDownloadingTo","location":"/abs/path"}. As root the task
      store is read; otherwise the session service is asked, from the session's app only.
      """,
    options: [session, CommonOptions.json],
    run: run
  )

  /// `--session IDENTIFIER` (required).
  package static let session = Option.value("session", "identifier", help: "The session (required).")

  /// One printed event.
  struct Line: Encodable {
    var task: Int64
    var event: String
    var location: String?
    var error: ProtFSError??

    enum CodingKeys: String, CodingKey { case task, event, location, error }

    func encode(to encoder: any Encoder) throws {
      var container = encoder.container(keyedBy: CodingKeys.self)
      try container.encode(task, forKey: .task)
      try container.encode(event, forKey: .event)
      try container.encodeIfPresent(location, forKey: .location)
      // didCompleteWithError always carries its error, null when the task succeeded.
      if let error { try container.encode(error, forKey: .error) }
    }
  }

  static func run(_ invocation: Invocation) throws -> Int32 {
    guard let identifier = invocation.value(session) else {
      throw invocation.usageError("Missing '--session <identifier>'.")
    }
    let device = invocation.device
    var lines: [Line] = []
    if Kernel.geteuid() == 0 {
      guard let store = try TasksCommand.store(device),
        try store.sessions().contains(where: { $0.identifier == identifier })
      else { throw SessionService.unknownSession(identifier) }
      for record in try store.pendingDeliveries(session: identifier) {
        if let path = record.handedOverPath {
          lines.append(Line(task: record.id, event: "didFinishDownloadingTo", location: path))
        }
        let failure: ProtFSError? =
          record.state == .failed
          ? record.failure ?? ProtFSError(.io, record.errorMessage ?? "The download failed.") : nil
        lines.append(Line(task: record.id, event: "didCompleteWithError", error: .some(failure)))
      }
    } else {
      lines = try fromService(identifier, device: device)
    }
    let json = invocation.flag(CommonOptions.json)
    for line in lines {
      if json {
        try Console.jsonLine(line)
      } else if let location = line.location {
        Console.out("task \(line.task): didFinishDownloadingTo \(location)")
      } else {
        let error = (line.error ?? nil).map { $0.message } ?? "no error"
        Console.out("task \(line.task): didCompleteWithError (\(error))")
      }
    }
    return 0
  }

  /// The queued events, from the service (a subscription read up to `queuedEventsDelivered`).
  private static func fromService(_ identifier: String, device: Device) throws -> [Line] {
    let socketName =
      ProcessEnvironment.value(SessionServiceClient.socketEnvironment)
      ?? SessionServiceClient.socketName(device: device)
    let client = SessionServiceClient.attach(identifier: identifier, socketName: socketName)
    defer { client.detach() }
    let collected = Mutex<[Line]>([])
    let done = DispatchSemaphore(value: 0)
    try client.subscribe { event in
      switch event {
      case .finishedDownloading(let task, let location):
        collected.withLock { $0.append(Line(task: task, event: "didFinishDownloadingTo", location: location)) }
      case .completed(let task, _, let error):
        collected.withLock { $0.append(Line(task: task, event: "didCompleteWithError", error: .some(error))) }
      case .queuedEventsDelivered: done.signal()
      default: break
      }
    }
    _ = done.wait(timeout: .now() + 10)
    return collected.withLock { $0 }
  }
}
