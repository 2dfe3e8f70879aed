import ProtFS
import ProtFSSystem

/// Decides whether a download may write its temp file and place its result: the hook through which
/// the lock simulator makes a download fail with "Operation not permitted" on a locked device.
///
/// Called from the engine's threads, so implementations must be thread-safe and quick.
public protocol DownloadAccessPolicy: Sendable {
  /// Whether a temp file may be created and written in `directory` (an absolute path).
  ///
  /// Anything but `.allow` fails the task with `EPERM`, as iOS fails a background download whose
  /// Downloads directory is protected while the device is locked.
  func canWriteTemp(in directory: String) -> DownloadAccessDecision

  /// Whether a finished download may be moved to `destination` (an absolute file path).
  ///
  /// `.waitForUnlock` leaves the task in `waitingForUnlock` with its temp file kept, until
  /// `DownloadSession.completeWaitingTasks()` is called again.
  func canPlaceDestination(_ destination: String) -> DownloadAccessDecision

  /// Whether a transfer already writing its open temp file in `directory` may go on; asked every
  /// `DownloadSessionConfiguration.accessCheckInterval` while transfers run, so that locking the
  /// device during a download takes effect (docs/semantics.md §3: with the fd already open, class B goes on,
  /// class A fails).
  ///
  /// `.deny` stops the transfer and fails the task with that errno, keeping the temp file so that
  /// the task can be resumed; `.waitForUnlock` pauses the transfer until the answer is `.allow`.
  func canContinueWritingTemp(in directory: String) -> DownloadAccessDecision

  /// Throws when the file at `path` (an absolute path), open for an upload's snapshot with the
  /// effective class `protectionClass` (read from the open file; nil outside a device), may not be
  /// read now: on a device, a complete file while locked fails with EPERM, as iOS refuses to
  /// create an upload task from it.
  func checkRead(_ path: String, protectionClass: ProtectionClass?) throws(ProtFSError)
}

extension DownloadAccessPolicy {
  /// By default an open temp file stays writable, as for every class but complete (A).
  public func canContinueWritingTemp(in directory: String) -> DownloadAccessDecision { .allow }
  /// By default every file may be read.
  public func checkRead(_ path: String, protectionClass: ProtectionClass?) throws(ProtFSError) {}
}

/// The policy of a device without data protection: everything is allowed.
public struct AllowAllDownloadAccess: DownloadAccessPolicy {
  /// Creates the policy.
  public init() {}
  /// Always `.allow`.
  public func canWriteTemp(in directory: String) -> DownloadAccessDecision { .allow }
  /// Always `.allow`.
  public func canPlaceDestination(_ destination: String) -> DownloadAccessDecision { .allow }
}
