/// What a `DownloadAccessPolicy` says about writing a download's bytes somewhere.
public enum DownloadAccessDecision: Sendable, Equatable {
  /// Go ahead.
  case allow
  /// Refuse with this errno (the lock simulator answers `EPERM`, as iOS does).
  case deny(Int32)
  /// Not now: keep the finished temp file and wait until the data becomes available.
  case waitForUnlock
}
