import Foundation
import ProtFSSystem

/// What becomes of a finished transfer after `didFinishDownloadingTo` returned: handed over to the
/// app, taken by the delegate, or placed at its destination (docs/semantics.md §9).
extension DownloadFinisher {
  /// Settles a transfer whose bytes are all in its temp file.
  ///
  /// - A handed-over task completes keeping its temp file, given to the container's owner so the
  ///   app's user can move it; the store queues its delivery until the app acknowledges it.
  /// - A delegate that moved the file away in `didFinishDownloadingTo` took it, as on iOS: the task
  ///   completes there and nothing is placed (placing it would fail later with ENOENT, a second
  ///   and false completion).
  /// - Otherwise the file is placed at the task's destination.
  ///
  /// A placed file's task is settled with the rest of `batch` (`settle(_:)`).
  package func finish(_ transfer: Transfer, in batch: PlacementBatch) -> Placement {
    let task = transfer.task
    // One field read under the lock, not a copy of the whole record.
    if task.runtime.withLock({ $0.record.handsOver }) { return .settled(handOver(transfer)) }
    if core.delegateTakesFiles, !transfer.directory.stillNames(transfer.temporaryFileName, fd: transfer.file.rawValue) {
      return .settled(settle(task, .completed) { $0.temporaryFileName = nil })
    }
    return place(task, transfer: transfer, in: batch)
  }

  private func handOver(_ transfer: Transfer) -> Outcome {
    let task = transfer.task
    do throws(ProtFSError) {
      // The app finds the file in the temp directory.
      if let failure = Self.name(transfer) { throw failure }
      // Labelling for its own directory keeps the temp file's class and gives it to the owner.
      try core.configuration.fileSystem.label(file: transfer.file.rawValue, for: transfer.directory)
    } catch {
      transfer.directory.removeFile(transfer.temporaryFileName, ifStill: transfer.file.rawValue)
      var failure = error
      failure.message = "The download of '\(task.url.absoluteString)' was not handed over: \(error.message)"
      return settle(task, .failed, error: failure) { $0.temporaryFileName = nil }
    }
    let event =
      core.reportsEvents
      ? DownloadEvent.completed(taskID: task.id, location: URL(fileURLWithPath: transfer.temporaryPath))
      : nil
    return settle(task, .completed, event: event)
  }
}

extension DirectoryHandle {
  /// Whether `name` in this directory is still the file open as `fd` (not moved, removed or replaced).
  package func stillNames(_ name: String, fd: Int32) -> Bool {
    var open = stat()
    var named = stat()
    guard case .success = Kernel.fstat(fd, &open),
      case .success = Kernel.fstatat(self.fd, name, &named, AT_SYMLINK_NOFOLLOW)
    else { return false }
    return open.st_dev == named.st_dev && open.st_ino == named.st_ino
  }
}
