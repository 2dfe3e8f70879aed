/// Where a download task is in its life, as stored in the task store and shown by `protfs tasks`.
///
/// The raw values are the stored and printed spelling; do not change them.
public enum DownloadState: String, Sendable, Codable, CaseIterable {
  /// Bytes are moving, or the task waits for a connection or for a retry.
  case running
  /// Not transferring; `resume()` continues from the bytes already in the temp file.
  case suspended
  /// `cancel()` was called and the engine has not yet let go of the transfer.
  case canceling
  /// The file is at its destination.
  case completed
  /// The task ended with an error (including cancellation); see the task's error.
  case failed
  /// The transfer finished but the destination was not available; the temp file is kept.
  case waitingForUnlock
  /// Its process stopped it while it ran (a Ctrl-C, a kill) and no process transfers it now; the
  /// temp file is kept, and a session that reattaches it goes on from there. Stored by a process
  /// that was signalled, and shown for a task stored as running whose process is gone.
  case interrupted

  /// Whether the task will not change again without being completed from outside (unlock, resume).
  public var isSettled: Bool {
    switch self {
    case .completed, .failed, .waitingForUnlock: return true
    case .running, .suspended, .canceling, .interrupted: return false
    }
  }

  /// Whether the store should reattach a task in this state when its session is opened again.
  public var isUnfinished: Bool {
    switch self {
    case .running, .suspended, .canceling, .waitingForUnlock, .interrupted: return true
    case .completed, .failed: return false
    }
  }
}
