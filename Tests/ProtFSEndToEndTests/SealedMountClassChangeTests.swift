import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A class change through a sealed mount (`setfattr` or `setfattr -x` on a directory, whose new
/// class rewraps the keys of the files below it) whose daemon is killed midway is recorded, as
/// `protfs set-class` records its own: the next command run as root makes the same change again,
/// so every key ends wrapped by its file's class.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SealedMountClassChangeTests {
  static let files = ["a", "b", "c"]

  /// A sealed mounted device with `Documents/d` holding three files written through the mount and
  /// inheriting its class (the label the mount gave them taken off behind it), the mount then
  /// started again with `PROTFS_CRASH_AFTER=crashAfter` (1: the record written, 2: one key
  /// rewrapped too).
  static func device(crashAfter: Int, ownClass: ProtectionClass?) async throws -> (MountedDevice, ClassKeyring) {
    let (m, keyring) = try await SealedMountTests.sealedDevice(passcode: nil)
    let made = try await m.sh(
      "mkdir '\(m.documents)/d'" + files.map { " && echo \($0) > '\(m.documents)/d/\($0)'" }.joined()
        + files.map { " && setfattr -x user.protfs.class '\(m.backingDocuments)/d/\($0)'" }.joined()
        + (ownClass.map { " && setfattr -n user.protfs.class -v \($0.name) '\(m.documents)/d'" } ?? ""))
    #expect(made.status == 0, "\(made)")
    #expect(try await m.protfs(["unmount", m.mountpoint]).status == 0)
    let mounted = try await Protfs.run(
      ["--device", m.root, "mount", m.mountpoint], environment: ["PROTFS_CRASH_AFTER": "\(crashAfter)"])
    #expect(mounted.status == 0, "\(mounted)")
    return (m, keyring)
  }

  /// The class each file's key is wrapped with, behind the mount.
  static func codes(_ m: MountedDevice) throws -> [ProtectionClassCode] {
    try files.map { name in
      let fd = open(m.backingDocuments + "/d/" + name, O_RDONLY)
      defer { close(fd) }
      return try SealedFiles.record(of: fd).code
    }
  }

  /// The killed daemon's mount undone, then a command as root: it finishes the change.
  static func finish(_ m: MountedDevice) async throws {
    umount2(m.mountpoint, 2 /* MNT_DETACH */)
    let next = try await m.protfs(["status"])
    #expect(next.stderr.contains("finished an interrupted class change"), "\(next)")
    #expect(!FileManager.default.fileExists(atPath: m.root + "/.protfs/seal/class-change.json"))
  }

  @Test(arguments: [1, 2])
  func aClassSetThroughTheMountKilledMidwayIsFinishedByTheNextCommand(crashAfter: Int) async throws {
    let (m, keyring) = try await Self.device(crashAfter: crashAfter, ownClass: nil)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let inherited = try Self.codes(m)
    #expect(inherited == [.c, .c, .c])
    let killed = try await m.sh("setfattr -n user.protfs.class -v complete '\(m.documents)/d'")
    #expect(killed.status != 0, "\(killed)")
    try await Self.finish(m)
    #expect(m.t.rawClass(m.backingDocuments + "/d") == ProtectionClass.complete.rawValue)
    #expect(try Self.codes(m) == [.a, .a, .a])
  }

  @Test(arguments: [1, 2])
  func aClassRemovedThroughTheMountKilledMidwayIsFinishedByTheNextCommand(crashAfter: Int) async throws {
    let (m, keyring) = try await Self.device(crashAfter: crashAfter, ownClass: .complete)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    #expect(try Self.codes(m) == [.a, .a, .a])
    let killed = try await m.sh("setfattr -x user.protfs.class '\(m.documents)/d'")
    #expect(killed.status != 0, "\(killed)")
    try await Self.finish(m)
    #expect(m.t.rawClass(m.backingDocuments + "/d") == nil)
    #expect(try Self.codes(m) == [.c, .c, .c])
  }
}
