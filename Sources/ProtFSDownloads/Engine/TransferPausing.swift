import Foundation
import ProtFSSystem

/// The device locking during a transfer: the access policy asked, per temp directory, whether
/// running transfers may go on writing (stopped, paused until unlock, or resumed), and temp
/// directories checked to still be the ones the transfers write in.
extension TransferEngine {
  /// The temp directory at `path`: the held one when it was opened or found at its path within
  /// the last access-check interval, else opened now, following no symlink.
  package func temporaryDirectory(_ path: String) throws(ProtFSError) -> DirectoryHandle {
    let now = Monotonic.now
    if let held = heldTemporaryDirectories[path],
      now - held.confirmed < Monotonic.nanoseconds(configuration.accessCheckInterval)
    {
      return held.handle
    }
    let opened = try configuration.fileSystem.openDirectory(path, creating: true)
    heldTemporaryDirectories[path] = (opened, now)
    return opened
  }

  /// Asks the access policy, per temp directory, whether running transfers may go on writing:
  /// denied ones stop and fail with resume data kept; waiting ones pause until allowed again.
  package func checkAccess(_ now: UInt64) {
    guard now - lastAccessCheck >= Monotonic.nanoseconds(configuration.accessCheckInterval) else { return }
    lastAccessCheck = now
    // Requests from other processes (`protfs tasks cancel ID`) arrive through the store.
    core.applyRequests()
    guard !active.isEmpty || !paused.isEmpty else { return }
    var answers: [String: DownloadAccessDecision] = [:]
    func answer(_ directory: String) -> DownloadAccessDecision {
      if let known = answers[directory] { return known }
      let decision = configuration.accessPolicy.canContinueWritingTemp(in: directory)
      answers[directory] = decision
      return decision
    }
    stopTransfersInChangedDirectories(now)
    for transfer in Array(active.values) {
      let decision = answer(transfer.temporaryDirectory)
      guard decision != .allow else { continue }
      stopOrPause(transfer, decision)
    }
    guard !paused.isEmpty else { return }
    let ready = paused.filter { answer($0.directory) == .allow }
    guard !ready.isEmpty else { return }
    paused.removeAll { answer($0.directory) == .allow }
    for item in ready {
      hosts.forget(item.task.id)
      hosts.accept(item.task)
    }
  }

  /// Stops the transfers whose temp directory was moved or swapped for a symlink mid-transfer (now,
  /// not at the end: the held directory may be outside the device by then), or whose temp file was
  /// given another name; confirms the held directories found where they were at `now`.
  private func stopTransfersInChangedDirectories(_ now: UInt64) {
    var current: [String: DirectoryHandle?] = [:]
    for transfer in Array(active.values) {
      let path = transfer.temporaryDirectory
      if current[path] == nil {
        current[path] = .some(try? configuration.fileSystem.openDirectory(path, creating: false))
      }
      var status = stat()
      let linkedElsewhere =
        (try? Kernel.fstat(transfer.file.rawValue, &status).get()) != nil
        && UInt64(status.st_nlink) != transfer.ownLinkCount
      if let held = heldTemporaryDirectories[path], let found = current[path]!, held.handle.isSameDirectory(as: found) {
        heldTemporaryDirectories[path]!.confirmed = now
      }
      if !linkedElsewhere, let now = current[path]!, transfer.directory.isSameDirectory(as: now) { continue }
      detach(transfer)
      let url = transfer.task.url.absoluteString
      var error = DownloadFinisher.directoryChanged(path)
      error.message = "The download of '\(url)' stopped: " + error.message
      if linkedElsewhere {
        // Another name for the temp file could be outside the device: stop writing into it.
        error = ProtFSError(
          .invalidArgument,
          "The download of '\(url)' stopped: its temp file '\(transfer.temporaryPath)' was given another name (a hard link); protfs writes only to files nothing else names.",
          path: transfer.temporaryPath, remedy: .advice("remove the other link, then download it again"))
      }
      fail(transfer, error)
    }
  }

  /// Stops `transfer`, which the access policy no longer lets write (`decision`): failed with its
  /// bytes kept when denied, paused until unlock when it is to wait.
  private func stopOrPause(_ transfer: Transfer, _ decision: DownloadAccessDecision) {
    detach(transfer)
    transfer.closeKeepingFile()
    if case .deny(let code) = decision {
      let url = transfer.task.url.absoluteString
      // The bytes so far stay in the temp file, which the record keeps: the task can be resumed.
      core.finisher.post(
        .fail(
          transfer.task,
          ProtFSError(
            .protectedDataUnavailable,
            "Cannot go on writing the temp file of '\(url)' in '\(transfer.temporaryDirectory)': \(String(cString: strerror(code))) (the device locked during the download).",
            path: transfer.temporaryDirectory, errno: code, remedy: .resumeAfterUnlock
          ), deleting: nil))
    } else {
      hosts.remember(transfer.task.id)
      paused.append((transfer.temporaryDirectory, transfer.task))
      core.notify(.pausedForLock(taskID: transfer.task.id))
    }
  }
}
