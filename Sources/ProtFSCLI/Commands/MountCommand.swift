import Foundation
import ProtFS
import ProtFSMount
import ProtFSSystem

/// `protfs mount MOUNTPOINT`: the device's containers through FUSE, where the class decides.
package enum MountCommand {
  package static let command = Command(
    name: "mount",
    abstract: "Serve the device's containers at MOUNTPOINT, where the lock binds every process.",
    discussion: """
      Mounts the device's Containers/ at MOUNTPOINT through FUSE (libfuse3). Every open, read,
      write, truncation, creation and attribute write through the mount is decided by the class ×
      state table at that moment, per open file, for every process, root included: refusals are
      "Operation not permitted" (EPERM), as on iOS. A complete file opened before a lock fails its
      reads and writes once the lock takes effect; a complete-unless-open one keeps working.
      Listing, stat, rename, unlink and chmod are never refused by the class. Items created
      through the mount get their directory's class and belong to their creator. Lock, unlock and
      reboot apply at once. Returns once the mount answers (the daemon stays in the background);
      `protfs unmount MOUNTPOINT` ends it. Needs root and /dev/fuse.
      """,
    arguments: [mountpoint],
    options: [foreground],
    run: run
  )

  /// `<mountpoint>`.
  package static let mountpoint = Argument(name: "mountpoint", help: "An existing directory outside the device.")
  /// `--foreground`.
  package static let foreground = Option.flag(
    "foreground", short: "f", help: "Stay attached: serve until unmounted or interrupted (Ctrl-C unmounts).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try MountDaemon.checkAvailable()
    try device.requireInitialized()
    let mountpoint = MountDaemon.mountpoint(invocation.required(Self.mountpoint))
    try MountDaemon.checkMountpoint(mountpoint, device: device)
    if invocation.environment[MountDaemon.notifyKey] == "1" {
      try MountDaemon.serveDetached(device: device, at: mountpoint)
      return 0
    }
    if invocation.flag(Self.foreground) {
      try MountDaemon.serve(device: device, at: mountpoint) {
        let unmount = invocation.spelling.command("unmount \(CommandSpelling.shellWord(mountpoint))")
        Console.err("Serving \(device.root)/Containers at \(mountpoint); Ctrl-C or \(unmount) ends it.")
      }
      return 0
    }
    return try startDaemon(invocation, device, mountpoint)
  }

  /// Starts `protfs mount` as a daemon and waits until it reports the mount answers; a daemon that
  /// ends first has its errors passed on as they are, and its status.
  private static func startDaemon(_ invocation: Invocation, _ device: Device, _ mountpoint: String) throws -> Int32 {
    do {
      let pid = try MountDaemon.start(device: device, at: mountpoint, environment: invocation.environment)
      Console.out("Mounted \(device.root)/Containers at \(mountpoint) (daemon pid \(pid)).")
      return 0
    } catch let failure as MountDaemon.StartFailure {
      FileHandle.standardError.write(Data(failure.errors.utf8))
      return failure.status
    }
  }
}
