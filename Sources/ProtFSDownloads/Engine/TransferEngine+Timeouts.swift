import Foundation
import ProtFSSystem

/// Timeouts and progress, checked by the engine thread on every turn of its loop.
extension TransferEngine {
  /// Ends attempts that received nothing, or less than the minimum speed, for their request
  /// timeout (retried), and tasks past their resource timeout (failed for good).
  package func checkTimeouts(_ now: UInt64) {
    guard !active.isEmpty else { return }
    let wallClock = Date().timeIntervalSince1970
    for transfer in Array(active.values) {
      let url = transfer.task.url.absoluteString
      let limit = transfer.requestLimit
      if wallClock > transfer.deadline {
        detach(transfer)
        fail(
          transfer,
          TransferClassification.resourceTimedOut(
            url, limit: transfer.deadline - transfer.task.runtime.withLock { $0.record.createdAt }))
        continue
      }
      if now > transfer.lastActivity && now - transfer.lastActivity > limit {
        stalled(
          transfer,
          "The server for '\(url)' sent nothing for \(TransferClassification.format(seconds: Double(limit) / 1e9)).")
        continue
      }
      guard now - transfer.speedWindowStart >= limit else { continue }
      // A trickle keeps `lastActivity` fresh; what it cannot do is move enough bytes in a window.
      let moved = transfer.position - transfer.speedWindowPosition
      let needed = Int64((Double(configuration.minimumSpeed) * Double(limit) / 1e9).rounded(.up))
      if moved < needed {
        stalled(
          transfer,
          "The server for '\(url)' sent \(moved) bytes in \(TransferClassification.format(seconds: Double(limit) / 1e9)), less than the minimum of \(configuration.minimumSpeed) bytes a second."
        )
        continue
      }
      transfer.speedWindowStart = now
      transfer.speedWindowPosition = transfer.position
    }
  }

  /// Ends a transfer whose server stopped sending (or sends too slowly) and retries its task, as
  /// both request-timeout checks do.
  private func stalled(_ transfer: Transfer, _ message: String) {
    detach(transfer)
    transfer.closeKeepingFile()
    retry(
      transfer.task,
      because: ProtFSError(
        .network, message, remedy: .advice("check the server, or allow a longer request timeout")))
  }

  /// Sends progress events at most once per interval per transfer, and writes every running
  /// transfer's count to the store once per persist interval.
  package func reportProgress(_ now: UInt64) {
    let interval = Monotonic.nanoseconds(configuration.progressEventInterval)
    for transfer in active.values where transfer.position != transfer.reportedPosition {
      guard now - transfer.lastProgressEvent >= interval else { continue }
      transfer.lastProgressEvent = now
      let position = transfer.position
      let previous = transfer.reportedPosition
      transfer.reportedPosition = position
      // The count first, then the event: a reader who subscribes late and then reads the count
      // misses nothing (`DownloadSession.events`).
      let expected = transfer.task.runtime.withLock { r in
        r.record.bytesReceived = position
        return r.record.bytesExpected
      }
      core.notifyProgress(transfer.task, bytesWritten: position - previous, total: position, expected: expected)
    }
    if now - lastPersist >= Monotonic.nanoseconds(configuration.progressPersistInterval) {
      lastPersist = now
      // Staged bytes go to the file first, so a process killed after this snapshot finds at least
      // the bytes it records.
      var records: [DownloadTaskRecord] = []
      for transfer in active.values {
        // The record names the file and counts its bytes: a process killed after this finds them.
        transfer.giveName()
        transfer.flush()
        let position = transfer.position
        records.append(
          transfer.task.runtime.withLock { r in
            r.record.bytesReceived = position
            return r.record
          })
      }
      core.persist(records)
    }
  }
}
