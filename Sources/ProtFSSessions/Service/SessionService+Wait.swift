import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import Synchronization

/// `protfs tasks wait`: the service answers once tasks have settled, without anyone polling.
extension SessionService {
  /// Returns once every task of `ids` is completed, failed or waiting for unlock, its outcome in
  /// the store (a completed download is in place): the service's own tasks are waited for, a task
  /// already settled in the store needs nothing. A suspended task of the service is waited for
  /// until it is resumed and settles, or cancelled. Throws, before waiting, for a task the store
  /// does not have, one the peer may not see, or one that is unfinished and not run by the service
  /// (a foreground `protfs download` or `tasks resume` runs it, or nobody does). The service
  /// stopping ends the wait early, leaving the tasks unfinished in the store. Returns the tasks
  /// that did not complete, so that the caller reads only those from the store. Throws once
  /// `hungUp` says the peer went away.
  func waitUntilSettled(_ ids: [Int64], peer: Peer, unless hungUp: () -> Bool = { false }) throws(ProtFSError)
    -> [Int64]
  {
    var notCompleted: [Int64] = []
    let sessions = state.withLock { Array($0.hosted.values) }
    var allowed: Set<String> = []
    var waiting: [DownloadTask] = []
    for id in ids {
      if let (hosted, task) = Self.find(id, in: sessions) {
        if allowed.insert(hosted.session.identifier).inserted {
          try authorize(peer, bundleID: hosted.bundleID, task: id)
        }
        waiting.append(task)
        continue
      }
      guard let record = try store.task(id: id) else {
        throw ProtFSError(.notFound, "There is no task \(id) on the device '\(device.root)'.", remedy: .listTasks)
      }
      if allowed.insert(record.sessionIdentifier).inserted {
        try authorize(peer, bundleID: try bundleOf(record.sessionIdentifier), task: id)
      }
      guard record.state.isSettled else {
        throw ProtFSError(
          .invalidArgument,
          "Task \(id) is \(record.state.rawValue) and the session service does not run it, so nothing would end the wait.",
          remedy: .resumeTask(id: id))
      }
      if record.state != .completed { notCompleted.append(id) }
    }
    guard !waiting.isEmpty else { return notCompleted }
    // Each task wakes its waiters once its outcome is stored; the connection's thread sleeps until
    // the last one has.
    // A peer that hung up waits no longer: its connection (one of its app's few) and this thread
    // are let go.
    guard DownloadTask.waitUntilAllSettled(waiting, unless: hungUp) != nil else {
      throw ProtFSError(.io, "The peer that waited for the tasks went away.")
    }
    return notCompleted + waiting.filter { $0.state != .completed }.map(\.id)
  }

  /// The hosted session holding task `id`, and the task.
  private static func find(_ id: Int64, in sessions: [HostedSession]) -> (HostedSession, DownloadTask)? {
    for hosted in sessions {
      if let task = hosted.session.task(id: id) { return (hosted, task) }
    }
    return nil
  }
}
