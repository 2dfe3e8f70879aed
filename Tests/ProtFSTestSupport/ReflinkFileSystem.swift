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
  /// shows it: every extent that holds the file's bytes flagged `shared`, and at least one. Extents
  /// that start past the end of the file are not counted: XFS preallocates there after a write,
  /// for a while, and those blocks hold none of the file.
  public static func sharesAllExtents(_ path: String) async throws -> Bool {
    let result = try await Protfs.runProgram("/usr/sbin/filefrag", ["-v", path])
    guard result.status == 0 else { return false }
    let lines = result.stdout.split(separator: "\n")
    // "File size of P is N (B blocks of 4096 bytes)".
    guard let header = lines.first(where: { $0.hasPrefix("File size of ") }),
      let open = header.lastIndex(of: "("),
      let blocks = Int(header[header.index(after: open)...].prefix { $0.isNumber })
    else { return false }
    var extents = 0
    for line in lines {
      // "   0:        0..   16895:      24..  16919:  16896:             last,shared,eof".
      let fields = line.split(separator: ":", maxSplits: 2)
      guard fields.count == 3, Int(fields[0].trimmingCharacters(in: .whitespaces)) != nil,
        let start = Int(fields[1].split(separator: ".").first?.trimmingCharacters(in: .whitespaces) ?? "")
      else { continue }
      guard start < blocks else { continue }
      extents += 1
      if !line.contains("shared") { return false }
    }
    return extents > 0
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
