import ProtFS
import ProtFSMount

/// `protfs unmount MOUNTPOINT`: ends a mount made by `protfs mount`.
package enum UnmountCommand {
  package static let command = Command(
    name: "unmount",
    abstract: "Unmount a device mounted with `protfs mount`.",
    discussion: """
      Unmounts MOUNTPOINT and waits for its daemon to end. A mount whose daemon was killed
      ("Transport endpoint is not connected") is unmounted too. When processes still have files
      open in it, the mount is detached at once and its daemon ends when the last one is closed.
      """,
    arguments: [MountCommand.mountpoint],
    run: run
  )

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let mountpoint = MountDaemon.mountpoint(invocation.required(MountCommand.mountpoint))
    switch try MountDaemon.unmount(mountpoint, device: invocation.device) {
    case .unmounted:
      Console.out("Unmounted \(mountpoint).")
    case .detached:
      Console.out("Detached \(mountpoint): files are still open in it; its daemon ends when they are closed.")
    }
    return 0
  }
}
