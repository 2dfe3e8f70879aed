import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// How a transition meets the device's mounts: after it commits (or goes back), it waits until
/// every active mount enforces the state, that is until its daemon has read the classes of the
/// items it knows again and dropped their cached pages (docs/semantics.md §7). So when a
/// transition returns, no page read before it is served through a mount any more.
public struct MountSync: Sendable {
  /// How long one mount is waited for; zero or less: mounts are not waited for.
  public var timeout: TimeInterval
  /// Called with the mountpoint of each mount that did not take the new state within `timeout`:
  /// until it does, pages it cached may still be served.
  public var lagging: @Sendable (_ mountpoint: String) -> Void

  /// Waits up to `timeout` seconds for each mount, telling `lagging` of those that lag.
  public init(timeout: TimeInterval = 5, lagging: @escaping @Sendable (_ mountpoint: String) -> Void = { _ in }) {
    self.timeout = timeout
    self.lagging = lagging
  }

  /// Waits for no mount: for callers that must not block on a daemon (which then lags the state
  /// until its watcher catches up).
  public static let none = MountSync(timeout: 0)

  /// Waits for each of `device`'s active mounts to report `state`.
  func waitForMounts(of device: Device, toEnforce state: ProtectionState) {
    // The encoding cannot fail for a state; were it to, there would be nothing to compare with.
    guard timeout > 0, let expected = try? state.mountStateValue() else { return }
    for mount in MountRegistry(device: device).active() {
      if !wait(for: Array(expected), at: mount.mountpoint) { lagging(mount.mountpoint) }
    }
  }

  /// Whether the mount at `mountpoint` reported `expected` within `timeout`. The attribute is read
  /// on a thread of its own: a daemon that is stopped would hold a read of it without end.
  private func wait(for expected: [UInt8], at mountpoint: String) -> Bool {
    let done = DispatchSemaphore(value: 0)
    let matched = Mutex(false)
    let timeout = timeout
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
        // The daemon signals nothing a client can wait on: its answer is polled.
        Thread.sleep(forTimeInterval: 0.001)
      }
    }
    thread.start()
    _ = done.wait(timeout: .now() + timeout + 0.5)
    return matched.withLock { $0 }
  }
}

extension LockController {
  /// After a transition committed `state` (or went back to it): waits for the mounts, then tells
  /// `afterCommit`.
  func committed(_ state: ProtectionState) {
    mountSync.waitForMounts(of: device, toEnforce: state)
    afterCommit(state)
  }
}
