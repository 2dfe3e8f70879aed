import ProtFSSystem

/// The mount's remedies: make FUSE available, unmount first.
extension Remedy.Action {
  /// Make FUSE available (`/dev/fuse`, the fuse module) and mount as root.
  package static let enableFuse = Self("enableFuse")
  /// Unmount the device's mount at argument `mountpoint` first.
  package static let unmount = Self("unmount")
}

extension Remedy {
  /// Make FUSE available (`/dev/fuse`, the fuse module) and mount as root.
  package static let enableFuse = Remedy(
    .enableFuse,
    advice: "make /dev/fuse available (load the fuse module; in a container, pass /dev/fuse in) and mount as root")

  /// Unmount the device's mount at `mountpoint` first.
  package static func unmount(mountpoint: String) -> Remedy {
    Remedy(.unmount, ["mountpoint": .text(mountpoint)], advice: "unmount '\(mountpoint)' first")
  }
}
