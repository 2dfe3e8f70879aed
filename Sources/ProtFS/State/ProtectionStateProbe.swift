import Foundation
import ProtFSSystem
import Synchronization

/// The device's protection state for callers that ask for it with every file (the download
/// engine): one `stat` of the state file per question, and a read only when the file changed.
///
/// The lock simulator only ever replaces `lock-state.json` by a rename, and the state does not
/// depend on the time, so a file with the same identity holds the same state. Identities are
/// trusted only once the file is older than the timestamp granularity: an inode reused by two
/// replacements within one clock tick could otherwise look unchanged.
public final class ProtectionStateProbe: Sendable {
  private struct Identity: Equatable {
    var present: Bool
    var device: UInt64 = 0
    var inode: UInt64 = 0
    var size: Int64 = 0
    var modified: timespec = timespec()
    var changed: timespec = timespec()

    static let absent = Identity(present: false)

    static func == (a: Identity, b: Identity) -> Bool {
      a.present == b.present && a.device == b.device && a.inode == b.inode && a.size == b.size
        && a.modified.tv_sec == b.modified.tv_sec && a.modified.tv_nsec == b.modified.tv_nsec
        && a.changed.tv_sec == b.changed.tv_sec && a.changed.tv_nsec == b.changed.tv_nsec
    }
  }

  /// A state file changed less than this long ago is read again: longer than any filesystem's
  /// timestamp granularity, short enough that a lock read once serves a whole download.
  private static let settlingSeconds = 2

  private let device: Device
  private let statePath: String
  private let now: @Sendable () -> Int
  private let cache = Mutex<(identity: Identity, state: ProtectionState)?>(nil)

  /// A probe of `device`'s state; `now` gives the wall clock in seconds since 1970 (tests move it on).
  public init(device: Device, now: @escaping @Sendable () -> Int = { Int(time(nil)) }) {
    self.device = device
    self.now = now
    statePath = device.stateDirectory + "/" + LockStore.stateFileName
  }

  /// The protection state now, as `Device.protectionState()` returns it.
  public func state() throws(ProtFSError) -> ProtectionState {
    let identity = currentIdentity()
    if let identity, let cached = cache.withLock({ $0 }), cached.identity == identity { return cached.state }
    let state = try device.protectionState()
    if let identity { cache.withLock { $0 = (identity, state) } }
    return state
  }

  /// The state file's identity, or nil when it cannot be trusted to tell a change (it changed
  /// too recently, or `stat` failed for a reason other than its absence).
  private func currentIdentity() -> Identity? {
    var s = stat()
    if case .failure(let e) = Kernel.stat(statePath, &s) { return e == .noSuchFile ? .absent : nil }
    guard now() - max(s.st_mtim.tv_sec, s.st_ctim.tv_sec) >= Self.settlingSeconds else { return nil }
    return Identity(
      present: true, device: UInt64(s.st_dev), inode: UInt64(s.st_ino), size: Int64(s.st_size),
      modified: s.st_mtim, changed: s.st_ctim)
  }
}
