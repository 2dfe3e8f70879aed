import Foundation
import ProtFS
import ProtFSApp
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// The requests about the service itself, or about every session of an app, rather than one session.
extension SessionServiceClient {
  /// The name of the abstract socket the service of `device` listens on: a hash of its root, so
  /// that any path length fits and two devices never share a name.
  package static func socketName(device: Device) -> String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(device.canonicalRoot.utf8) {
      hash ^= UInt64(byte)
      hash = hash &* 0x100_0000_01b3
    }
    return "protfs-sessions." + String(hash, radix: 16)
  }

  /// The app acknowledged session `session`'s events (`protfs app events-handled`, the completion
  /// handler of `handleEventsForBackgroundURLSession`): the completions it was given are done.
  /// Nothing to do when the service does not run.
  package static func eventsHandled(session: String, socketName: String) throws(ProtFSError) {
    let request = SessionServiceRequest.eventsHandled(session: session)
    // No service, nothing it could have queued: the app's answer needs nothing more.
    do {
      _ = try SessionWire.call(request, socketName: socketName)
    } catch  where error.errno == ENOENT {}
  }

  /// The user force-quit app `bundleID`: its transfers stop (resumable) and it is not relaunched
  /// until its next launch. Nothing to do when the service does not run.
  package static func forceQuit(bundleID: String, socketName: String) throws(ProtFSError) {
    let request = SessionServiceRequest.forceQuit(bundleID: bundleID)
    do {
      _ = try SessionWire.call(request, socketName: socketName)
    } catch  where error.errno == ENOENT {}
  }

  /// Asks the service at `socketName` to adopt the tasks another process recorded for session
  /// `configuration.identifier` (`download --detach`) and to resume `tasks`.
  package static func adopt(
    _ configuration: SessionConfiguration, destinationDirectory: String?, resuming tasks: [Int64], socketName: String
  ) throws(ProtFSError) {
    let request = SessionServiceRequest.adopt(
      configuration, destinationDirectory: destinationDirectory, resuming: tasks)
    _ = try SessionWire.call(request, socketName: socketName)
  }

  /// Returns once the service at `socketName` reports every task of `ids` completed, failed or
  /// waiting for unlock (its outcome stored); throws for a task it cannot wait for (unknown, not
  /// the caller's, unfinished and not run by the service) or when the service ends first.
  /// Returns the tasks of `ids` that did not complete (failed, waiting for unlock, or unfinished
  /// when the service stopped).
  @discardableResult
  package static func waitUntilSettled(_ ids: [Int64], socketName: String) throws(ProtFSError) -> [Int64] {
    var notCompleted: [Int64] = []
    // In parts, so that each request stays well within a line's limit: all settled is each part settled.
    for start in stride(from: 0, to: ids.count, by: 4096) {
      let request = SessionServiceRequest.wait(tasks: Array(ids[start..<min(start + 4096, ids.count)]))
      do {
        notCompleted += try SessionWire.call(request, socketName: socketName).notCompleted ?? []
      } catch  where error.errno == ENOENT && error.path == "@" + socketName {
        throw notRunning(socketName)
      }
    }
    return notCompleted
  }

  /// The task records of the calling app's sessions (root: of `bundleID`'s, or every app's), or of
  /// `session` only, from the service at `socketName`.
  package static func appTasks(session: String?, bundleID: String? = nil, socketName: String) throws(ProtFSError)
    -> [DownloadTaskRecord]
  {
    let request = SessionServiceRequest.appTasks(session: session, bundleID: bundleID)
    do {
      return try SessionWire.call(request, socketName: socketName).records ?? []
    } catch  where error.errno == ENOENT && error.path == "@" + socketName {
      throw notRunning(socketName)
    }
  }

  /// Asks the service at `socketName` to remove the finished tasks unchanged for `olderThan`
  /// seconds (every finished one when nil) of the caller's app (root: of `bundleID`'s, or of
  /// every app), or of `session` only; returns their ids (`protfs tasks prune`).
  package static func prune(
    olderThan: Double?, session: String?, bundleID: String? = nil, socketName: String
  ) throws(ProtFSError) -> [Int64] {
    let request = SessionServiceRequest.prune(session: session, bundleID: bundleID, olderThan: olderThan)
    do {
      return try SessionWire.call(request, socketName: socketName).pruned ?? []
    } catch  where error.errno == ENOENT && error.path == "@" + socketName {
      throw notRunning(socketName)
    }
  }

  /// Asks the service at `socketName` to end.
  package static func stop(socketName: String) throws(ProtFSError) {
    _ = try SessionWire.call(.stop, socketName: socketName)
  }

  /// Asks the service at `socketName` to place finished downloads that waited for unlock.
  package static func wake(socketName: String) throws(ProtFSError) {
    _ = try SessionWire.call(.wake, socketName: socketName)
  }
}
