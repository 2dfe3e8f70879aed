import Foundation
import ProtFSSystem

/// The names of nsurlsessiond's temp downloads, `CFNetworkDownload_XXXXXX.tmp`: the one definition
/// the download engine (which makes them), the cache manager (which purges them) and the audit
/// (which reports orphans) share.
public enum TemporaryDownloadName {
  /// What every temp download's name starts with.
  public static let prefix = "CFNetworkDownload_"
  /// What every temp download's name ends with.
  public static let suffix = ".tmp"

  /// Whether `name` looks like an nsurlsessiond temp download.
  public static func matches(_ name: String) -> Bool {
    name.hasPrefix(prefix) && name.hasSuffix(suffix)
  }

  /// The name for the six-character `suffix` (for example `a1B2c3`).
  public static func make(_ random: String) -> String { prefix + random + suffix }
}

/// The advisory lock a downloader holds (shared) on its temp file while it writes, so that a purge
/// in another process can tell a live temp file from an abandoned one.
public enum TemporaryFileLock {
  /// Whether another open file description holds a lock on `name`.
  public static func isHeld(_ name: String, in directory: DirectoryHandle) -> Bool {
    guard let file = try? directory.openDescriptor(name, flags: O_RDONLY | O_NONBLOCK) else { return false }
    defer { file.close() }
    switch Kernel.flock(file.rawValue, LOCK_EX | LOCK_NB) {
    case .success:
      _ = Kernel.flock(file.rawValue, LOCK_UN)
      return false
    case .failure(let e): return e == Errno(EWOULDBLOCK)
    }
  }

  /// Takes the shared lock on an open temp file; it lasts until the descriptor is closed.
  public static func hold(_ fd: Int32) { _ = Kernel.flock(fd, LOCK_SH) }
}
