import Foundation
import ProtFSSystem
import Testing

@testable import ProtFSSessions

/// A subscription's writer: nobody who produces an event waits for an app that reads nothing (a
/// suspended one), progress merges while it waits, and completions all arrive, in order.
@Suite(.timeLimit(.minutes(1))) struct SessionSubscriberTests {
  /// A connected pair of Unix stream sockets with small buffers, and timeouts as the service sets
  /// them on a subscription (sends wait at most `ControlSocket.peerTimeout`).
  static func pair() -> (service: FileDescriptor, app: FileDescriptor) {
    var fds: [Int32] = [0, 0]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
    var size: Int32 = 4096
    _ = setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    _ = setsockopt(fds[1], SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    let service = FileDescriptor(owning: fds[0])
    ControlSocket.limitWaits(service, reads: false)
    return (service, FileDescriptor(owning: fds[1]))
  }

  /// Every event the app end reads until `queuedEventsDelivered`.
  static func readUntilMark(_ app: FileDescriptor) -> [SessionEvent] {
    var events: [SessionEvent] = []
    while let event = SessionWire.receive(SessionEvent.self, on: app) {
      if case .queuedEventsDelivered = event { break }
      events.append(event)
    }
    return events
  }

  @Test func progressForAnAppThatReadsNothingMergesAndEveryCompletionArrivesInOrder() async throws {
    let (service, app) = Self.pair()
    defer { app.close() }
    let subscriber = SessionSubscriber(connection: service)
    // Far more than the socket holds: with writes made by the producer, the first send that finds
    // the buffer full would wait out the send limit and then let the subscriber go.
    let tasks: [Int64] = [1, 2, 3]
    for step in 1...20_000 {
      for task in tasks {
        subscriber.send(
          .wroteData(
            task: task, bytesWritten: 10, totalBytesWritten: Int64(step) * 10, totalBytesExpectedToWrite: 200_000))
      }
    }
    for task in tasks {
      subscriber.send(.finishedDownloading(task: task, location: "/tmp/CFNetworkDownload_\(task).tmp"))
      subscriber.send(
        .completed(
          task: task,
          snapshot: .init(
            id: task, kind: .download, request: .init(url: URL(string: "http://127.0.0.1/x")!), state: "completed"),
          error: nil))
    }
    subscriber.send(.queuedEventsDelivered)
    // Only now does the app read (it was frozen until here).
    let events = await Task.detached { Self.readUntilMark(app) }.value
    var bytes: [Int64: Int64] = [:]
    var last: [Int64: Int64] = [:]
    var completions: [Int64] = []
    for event in events {
      switch event {
      case .wroteData(let task, let written, let total, _):
        #expect(!completions.contains(task), "progress after the completion of task \(task)")
        bytes[task, default: 0] += written
        last[task] = total
      case .completed(let task, _, _): completions.append(task)
      default: break
      }
    }
    #expect(completions == tasks)
    for task in tasks {
      #expect(bytes[task] == 200_000, "task \(task)")
      #expect(last[task] == 200_000)
    }
    // Merged while the app read nothing: far fewer lines than the 60,000 sent.
    #expect(events.count < 10_000, "\(events.count) events")
    subscriber.finish()
    service.close()
  }

  @Test func finishingLetsGoOfAWriterWaitingForAFrozenApp() async throws {
    let (service, app) = Self.pair()
    defer { app.close() }
    let subscriber = SessionSubscriber(connection: service)
    // Enough different completions to fill the socket: the writer now waits inside send.
    for task in Int64(1)...400 {
      subscriber.send(.finishedDownloading(task: task, location: String(repeating: "x", count: 200)))
    }
    // Returns although the app never reads: the writer is let go, and never writes again.
    await Task.detached { subscriber.finish() }.value
    subscriber.send(.queuedEventsDelivered)
    service.close()
    var afterFinish = false
    while let event = SessionWire.receive(SessionEvent.self, on: app) {
      if case .queuedEventsDelivered = event { afterFinish = true }
    }
    #expect(!afterFinish)
  }
}
