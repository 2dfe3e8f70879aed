import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// Waits, after a transition, until every active mount of the device enforces the new state: its
/// daemon has read the classes of the items it knows again and dropped their cached pages
/// (docs/semantics.md §7). So when `protfs lock` returns, no page read before the lock is served
/// through a mount any more.
enum MountSync {
  /// How long one mount is waited for before a warning says it lags.
  static let timeout = 5.0

  /// Waits for each of `device`'s mounts to report `state`.
  static func waitForMounts(of device: Device, toEnforce state: ProtectionState) {
    guard let expected = try? state.mountStateValue() else { return }
    for mount in MountRegistry(device: device).active() {
      if !wait(for: Array(expected), at: mount.mountpoint) {
        Console.err(
          "warning: the mount at '\(mount.mountpoint)' did not take the new state within \(Int(timeout)) s; until it does, pages it cached may still be served."
        )
      }
    }
  }

  /// Whether the mount at `mountpoint` reported `expected` within `timeout`. The attribute is read
  /// on a thread of its own: a daemon that is stopped would hold a read of it without end.
  private static func wait(for expected: [UInt8], at mountpoint: String) -> Bool {
    let done = DispatchSemaphore(value: 0)
    let matched = Mutex(false)
    let thread = Thread {
      let deadline = Date().addingTimeInterval(timeout)
      defer { done.signal() }
      guard let root = try? DirectoryHandle(path: mountpoint) else { return }
      var buffer = [UInt8](repeating: 0, count: 512)
      while Date() < deadline {
        let read = buffer.withUnsafeMutableBytes { raw in
          Kernel.getAttribute(dirfd: root.fd, name: nil, attribute: AttributeName.mountState, into: raw)
        }
        if case .success(let count) = read, Array(buffer.prefix(count)) == expected {
          matched.withLock { $0 = true }
          return
        }
        usleep(1_000)
      }
    }
    thread.start()
    _ = done.wait(timeout: .now() + timeout + 0.5)
    return matched.withLock { $0 }
  }
}
