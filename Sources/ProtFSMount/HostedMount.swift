import CFuse3
import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// A mount of the device served by threads of this process for one app: `protfs app launch`
/// starts it before the app and stops it once the app ended, so that the class decides every open
/// of the app as on a phone (refusals are EPERM), whatever the modes (docs/semantics.md §7, §8).
///
/// Its mountpoint is `<device>/.protfs/app-mounts/<bundle-id>`, which only root reaches; the app's
/// first process sees the mount over the device's `Containers/` in a mount namespace of its own
/// (`Confinement`). It is registered with `forApp`, so `protfs exec` and other apps do not use it.
/// A supervisor killed with SIGKILL leaves a dead mount there: the next start of the same app
/// detaches it first.
package final class HostedMount: Sendable {
  /// The directory of app mounts inside `.protfs/`.
  package static let directoryName = "app-mounts"
  /// The soft descriptor limit of this process before any mount raised it.
  package static let originalDescriptorLimit: rlim_t = {
    var limit = rlimit()
    return Kernel.getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit.rlim_cur : 1024
  }()

  /// The mountpoint.
  package let mountpoint: String
  private let answered = DispatchSemaphore(value: 0)
  private let finished = DispatchSemaphore(value: 0)
  private let failure = Mutex<ProtFSError?>(nil)
  private let stopped = Mutex(false)

  private init(mountpoint: String) { self.mountpoint = mountpoint }

  /// The mountpoint of `bundleID`'s mount on `device`.
  package static func mountpoint(of bundleID: String, on device: Device) -> String {
    device.stateDirectory + "/" + directoryName + "/" + bundleID
  }

  /// Starts serving `device` for `bundleID` on a thread of its own and returns at once, so that
  /// the launch prepares the rest meanwhile; `waitUntilServing()` waits for the mount to answer.
  /// Throws when this process cannot mount (not root, no FUSE). Call it only as the app's one
  /// supervisor: a mount already at the mountpoint is taken for a dead one and detached.
  package static func begin(device: Device, bundleID: String) throws(ProtFSError) -> HostedMount {
    try MountDaemon.checkAvailable()
    _ = originalDescriptorLimit
    let state = try DirectoryHandle(path: device.stateDirectory)
    _ = try state.makeDirectory(directoryName, permissions: FilePermissions(rawValue: 0o700))
    let parent = try state.openDirectory(directoryName)
    let mountpoint = mountpoint(of: bundleID, on: device)
    let mount = HostedMount(mountpoint: mountpoint)
    let thread = Thread {
      // Left by a supervisor that was killed: its serving threads died with it, and the dead mount
      // answers every look at the mountpoint with ENOTCONN until it is detached.
      if MountRegistry.protfsMountpoints().contains(mountpoint) {
        _ = Kernel.umount2(mountpoint, Int32(PROTFS_MOUNT_MNT_DETACH))
      }
      do throws(ProtFSError) {
        _ = try parent.makeDirectory(bundleID, permissions: FilePermissions(rawValue: 0o700))
        try MountDaemon.serve(device: device, at: mountpoint, forApp: bundleID, handlingSignals: false) {
          mount.answered.signal()
        }
      } catch {
        mount.failure.withLock { $0 = error }
        mount.answered.signal()
      }
      mount.finished.signal()
    }
    thread.name = "protfs-app-mount"
    thread.start()
    return mount
  }

  /// Returns once the mount answers; throws when it failed or did not answer within 10 s (and it
  /// is stopped then).
  package func waitUntilServing() throws(ProtFSError) {
    guard answered.wait(timeout: .now() + 10) == .success else {
      stop()
      throw ProtFSError(
        .io, "The app's mount at '\(mountpoint)' did not answer within 10 s.", path: mountpoint,
        remedy: .enableFuse)
    }
    if let error = failure.withLock({ $0 }) { throw error }
    // libfuse leaves /dev/fuse and its socket to fusermount3 inheritable: a child this process
    // started later would keep the mount's connection alive after the supervisor (and keep
    // auto_unmount from acting). No descriptor of this process is meant for a child's exec.
    // (The listing's own descriptor is among them: marking it too does no harm.)
    for (name, _) in (try? DirectoryHandle(path: "/proc/self/fd").entries()) ?? [] {
      if let fd = Int32(name), fd > STDERR_FILENO { _ = Kernel.fcntl(fd, F_SETFD, FD_CLOEXEC) }
    }
  }

  /// Unmounts and waits (at most 5 s) for the serving threads to end; a file some process still
  /// holds open through the mount keeps it until it is closed. Only the first call does anything,
  /// so an owner may call it on every path out.
  package func stop() {
    let first = stopped.withLock { done in
      defer { done = true }
      return !done
    }
    guard first else { return }
    _ = Kernel.umount2(mountpoint, Int32(PROTFS_MOUNT_MNT_DETACH))
    _ = finished.wait(timeout: .now() + 5)
  }
}
