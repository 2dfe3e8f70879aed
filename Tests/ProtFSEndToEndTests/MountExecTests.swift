import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs exec` in a mounted device: the program reaches the containers through the mount, by
/// their usual paths, so the class decides (EPERM) and not the modes (EACCES).
@Suite(.serialized) struct MountExecTests {
  @Test func execRunsTheProgramThroughTheMountByTheUsualPaths() async throws {
    let m = try await MountedDevice { t in
      try MountedDevice.file(t, "Documents/secret.txt", .complete, "secret\n")
      chown(t.containerPath(MountedDevice.bundle, "Documents/secret.txt"), 501, 501)
    }
    let secret = m.backingDocuments + "/secret.txt"
    let open = try await m.protfs(["exec", "--", "cat", secret])
    #expect(open.status == 0 && open.stdout == "secret\n", "\(open)")
    // The program's view: the device's Containers/ is the protfs mount.
    let view = try await m.protfs([
      "exec", "--", "grep", "-c", " \(m.root)/Containers .* - fuse.protfs ", "/proc/self/mountinfo",
    ])
    #expect(view.stdout == "1\n", "\(view)")
    // The host's view is unchanged: the backing tree is still the backing tree.
    let host = currentMountInfo()
    #expect(!host.contains(" \(m.root)/Containers "))

    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    let locked = try await m.protfs(["exec", "--", "cat", secret])
    #expect(locked.status == 1 && locked.stderr.contains("Operation not permitted"), "\(locked)")
    // The owner cannot chmod its way back in: modes never grant what the class forbids.
    let chmodded = try await m.protfs(["exec", "--", "sh", "-c", "chmod 666 '\(secret)'; cat '\(secret)'"])
    #expect(chmodded.status != 0 && chmodded.stderr.contains("Operation not permitted"), "\(chmodded)")
    // Nor can it take the mount away: in a user namespace of its own the mount is locked to it.
    let escape = try await m.protfs([
      "exec", "--", "sh", "-c", "unshare -r -m sh -c \"umount -l '\(m.root)/Containers'; cat '\(secret)'\"",
    ])
    #expect(escape.status != 0 && !escape.stdout.contains("secret"), "\(escape)")
    // A working directory inside the containers is taken through the mount too.
    let relative = try await Protfs.run(
      ["--device", m.root, "exec", "--", "cat", "secret.txt"], currentDirectory: m.backingDocuments)
    #expect(relative.status == 1 && relative.stderr.contains("Operation not permitted"), "\(relative)")

    #expect(try await m.protfs(["unlock"]).status == 0)
    let again = try await m.protfs(["exec", "--", "cat", secret])
    #expect(again.status == 0 && again.stdout == "secret\n", "\(again)")
  }

  /// A copy of another device's mount in the program's namespace would keep that mount's daemon
  /// serving after its unmount, for as long as the program runs: the namespace holds none.
  @Test func theProgramsNamespaceHoldsNoOtherProtfsMount() async throws {
    let m = try await MountedDevice()
    let other = try await MountedDevice()
    let view = try await m.protfs(["exec", "--", "cat", "/proc/self/mountinfo"])
    #expect(view.status == 0, "\(view)")
    #expect(view.stdout.contains(" \(m.root)/Containers "), "\(view)")
    #expect(!view.stdout.contains(" \(other.mountpoint) "), "\(view)")
    #expect(currentMountInfo().contains(" \(other.mountpoint) "), "the host keeps the other mount")
  }

  @Test func theMountGrantsNoSetIDAndOpensNoDevice() async throws {
    let m = try await MountedDevice()
    let info = currentMountInfo()
    let line = try #require(info.split(separator: "\n").first { $0.contains(" \(m.mountpoint) ") })
    let options = line.split(separator: " ")[5].split(separator: ",")
    #expect(options.contains("nosuid") && options.contains("nodev"), "\(line)")
    // No device node can be made through it, root included (nodev guards those behind it).
    let node = try await m.sh("mknod '\(m.documents)/null' c 1 3")
    #expect(node.status != 0, "\(node)")
    #expect(!FileManager.default.fileExists(atPath: m.backingDocuments + "/null"))
  }

  @Test func withoutAMountExecMeetsTheModes() async throws {
    let t = try TestDevice(containers: [MountedDevice.bundle])
    try MountedDevice.file(t, "Documents/secret.txt", .complete, "secret\n")
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let locked = try await Protfs.run(
      ["--device", t.root, "exec", "--", "cat", t.containerPath(MountedDevice.bundle, "Documents/secret.txt")])
    #expect(locked.status == 1 && locked.stderr.contains("Permission denied"), "\(locked)")
  }
}
