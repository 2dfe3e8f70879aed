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
