import Foundation

/// A file system that clones (XFS with reflinks), made for one test: a sparse image in a
/// temporary directory, formatted with `mkfs.xfs -m reflink=1` (xfsprogs, installed by
/// `scripts/setup.sh`) and mounted through a loop device that the kernel frees at the unmount.
/// Needs root and loop devices, which the test machine has; where it cannot be made, the test
/// fails with the reason rather than skipping.
public final class ReflinkFileSystem: @unchecked Sendable {
  // @unchecked: the stored properties are immutable.
  /// Where the file system is mounted (an empty directory at first).
  public let mountpoint: String
  private let directory: String

  private init(directory: String) {
    self.directory = directory
    mountpoint = directory + "/mnt"
  }

  /// Makes and mounts a new file system of `size` bytes (XFS's smallest is 300 MiB).
  public static func make(size: Int = 320 << 20) async throws -> ReflinkFileSystem {
    let made = ReflinkFileSystem(directory: try TestDevice.makeTemporaryDirectory(prefix: "protfs-xfs"))
    let image = made.directory + "/xfs.img"
    guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(size)) == 0,
      mkdir(made.mountpoint, 0o755) == 0
    else { throw Failure("Cannot make the image '\(image)': \(String(cString: strerror(errno))).") }
    for (program, arguments) in [
      ("/usr/sbin/mkfs.xfs", ["-q", "-m", "reflink=1", image]),
      ("/usr/bin/mount", ["-o", "loop", image, made.mountpoint]),
    ] {
      let result = try await Protfs.runProgram(program, arguments)
      guard result.status == 0 else {
        throw Failure(
          "\(program) \(arguments.joined(separator: " ")) failed (is xfsprogs installed? scripts/setup.sh installs it): \(result)"
        )
      }
    }
    return made
  }

  /// Whether the file at `path` shares all its data with another file, as `filefrag -v` (FIEMAP)
  /// shows it: every extent flagged `shared`, and at least one extent.
  public static func sharesAllExtents(_ path: String) async throws -> Bool {
    let result = try await Protfs.runProgram("/usr/sbin/filefrag", ["-v", path])
    let extents = result.stdout.split(separator: "\n").filter {
      $0.range(of: #"^\s*\d+:"#, options: .regularExpression) != nil
    }
    return result.status == 0 && !extents.isEmpty && extents.allSatisfy { $0.contains("shared") }
  }

  /// Unmounts (lazily, so a file still open cannot keep it) and removes the image.
  public func remove() {
    _ = umount2(mountpoint, Int32(MNT_DETACH))
    TestDevice.removeTree(directory)
  }

  deinit { remove() }

  /// Why the file system could not be made.
  public struct Failure: Error, CustomStringConvertible {
    /// The reason, with the command that failed.
    public var description: String
    init(_ description: String) { self.description = description }
  }
}
