import Foundation
import Testing

@testable import ProtFSSystem

/// `MountInfo`, the byte-level reader of `/proc/self/mountinfo` that the launch, the mount and
/// the cgroup code share.
@Suite struct MountInfoTests {
  @Test func fieldsAreReadEscapesUndoneAndOddLinesPassedOver() {
    let table = """
      22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
      30 22 0:26 / /sys/fs/cgroup rw,nosuid master:5 propagate_from:2 - cgroup2 cgroup2 rw
      41 22 0:45 / /tmp/a\\040b/c\\134d rw,nosuid,nodev - fuse.protfs protfs rw,user_id=0
      42 22 0:46 /sub /mnt/bound rw - ext4 /dev/vdb rw
      43 22 0:47 / /tmp/odd\\04 rw - tmpfs tmpfs rw
      garbage line
      44 22 0:48 / /no-dash rw ext4 /dev/vdc rw

      """
    let entries = MountInfo.parse(Array(table.utf8))
    #expect(entries.map(\.type) == ["ext4", "cgroup2", "fuse.protfs", "ext4", "tmpfs"])
    #expect(entries[2].mountpoint == "/tmp/a b/c\\d")
    #expect(entries[3].root == "/sub" && entries[3].mountpoint == "/mnt/bound")
    // An escape cut short is kept as written.
    #expect(entries[4].mountpoint == "/tmp/odd\\04")
  }

  @Test func thisProcessSeesItsRootMount() {
    let entries = MountInfo.entries()
    #expect(entries.contains { $0.mountpoint == "/" })
  }
}
