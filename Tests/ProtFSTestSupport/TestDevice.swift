import CAttr
import Foundation
import ProtFS
import ProtFSSystem

/// A fresh device in a temporary directory, removed when the value is released.
///
/// Every test makes its own, so tests never share state and can run in parallel.
public final class TestDevice: @unchecked Sendable {
  /// The temporary directory that holds the device (the device is `directory/device`).
  public let directory: String
  /// The device.
  public let device: Device

  /// Creates and initialises a device; with `bundleIDs`, creates those containers too.
  public init(containers bundleIDs: [String] = [], initialize: Bool = true) throws {
    directory = try TestDevice.makeTemporaryDirectory()
    // mkdtemp makes the directory 0700; the app user that `protfs exec` runs programs as (and
    // other users in the tests) must be able to reach the device inside it.
    chmod(directory, 0o755)
    device = Device(root: directory + "/device")
    if initialize { try device.initialize() }
    for id in bundleIDs { try device.createContainer(try BundleID(id)) }
  }

  /// Creates and initialises a device in `directory`, which the caller made (a mount point, say);
  /// with `bundleIDs`, creates those containers too. The directory is emptied when the value is
  /// released.
  public init(directory: String, containers bundleIDs: [String] = []) throws {
    self.directory = directory
    chmod(directory, 0o755)
    device = Device(root: directory + "/device")
    try device.initialize()
    for id in bundleIDs { try device.createContainer(try BundleID(id)) }
  }

  /// The device root.
  public var root: String { device.root }

  /// The absolute path of `relative` below the device root.
  public func path(_ relative: String) -> String { root + "/" + relative }

  /// The absolute path of `relative` inside the container of `bundleID`.
  public func containerPath(_ bundleID: String, _ relative: String = "") -> String {
    root + "/Containers/" + bundleID + (relative.isEmpty ? "" : "/" + relative)
  }

  /// Writes `contents` to the absolute `path` with plain system calls (as another program would).
  ///
  /// Opened close-on-exec: a program another test starts at that moment must not inherit the file
  /// (it would hold it open for as long as it runs, and `seal` refuses a file held open).
  public func writeFile(_ path: String, _ contents: String = "data", mode: Int = 0o644) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode_t(mode))
    guard fd >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
    defer { close(fd) }
    let bytes = Array(contents.utf8)
    var done = 0
    while done < bytes.count {
      let wrote = bytes[done...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
      guard wrote > 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
      done += wrote
    }
    fchmod(fd, mode_t(mode))
  }

  /// The raw `user.protfs.class` value of `path`, read with plain getxattr (nil when absent).
  public func rawClass(_ path: String) -> String? { TestDevice.rawAttribute(path, AttributeName.protectionClass) }

  /// An attribute read with plain `lgetxattr`, as getfattr would.
  public static func rawAttribute(_ path: String, _ name: String) -> String? {
    var buffer = [UInt8](repeating: 0, count: 256)
    let size = lgetxattr(path, name, &buffer, buffer.count)
    guard size >= 0 else { return nil }
    return String(decoding: buffer.prefix(size), as: UTF8.self)
  }

  /// The permission bits of `path` (not following a symlink).
  public func mode(_ path: String) -> UInt32 {
    var s = stat()
    lstat(path, &s)
    return UInt32(s.st_mode) & 0o7777
  }

  deinit { TestDevice.removeTree(directory) }

  /// mkdtemp under `$TMPDIR` (default /tmp).
  public static func makeTemporaryDirectory(prefix: String = "protfs-test") throws -> String {
    let base = ProcessInfo.processInfo.environment["TMPDIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
    var template = Array("\(base)/\(prefix)-XXXXXX".utf8CString)
    guard let result = mkdtemp(&template) else {
      throw ProtFSError.system("create a temporary directory in", path: base, errno: errno)
    }
    return String(cString: result)
  }

  /// Removes a tree even when a lock left modes at 0 (restores write/search bits first).
  public static func removeTree(_ path: String) {
    // An app's mount inside the tree (its supervisor may have been killed a moment ago, and
    // fusermount3 not yet have unmounted it) is detached first: nothing is removed through it.
    for mountpoint in MountRegistry.protfsMountpoints() where mountpoint.hasPrefix(path + "/") {
      _ = umount2(mountpoint, Int32(MNT_DETACH))
    }
    removeTreeBelowMounts(path)
  }

  private static func removeTreeBelowMounts(_ path: String) {
    removeTreeBelowMounts(bytes: Array(path.utf8))
  }

  /// `path` as bytes, so that names which are not UTF-8 (tests make them) are removed too.
  private static func removeTreeBelowMounts(bytes path: [UInt8]) {
    let cPath = path.map { CChar(bitPattern: $0) } + [0]
    var s = stat()
    guard lstat(cPath, &s) == 0 else { return }
    guard s.st_mode & S_IFMT == S_IFDIR else {
      unlink(cPath)
      return
    }
    chmod(cPath, 0o700)
    var names: [[UInt8]] = []
    if let directory = opendir(cPath) {
      while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
          Array(raw.prefix { $0 != 0 })
        }
        if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
      }
      closedir(directory)
    }
    for name in names { removeTreeBelowMounts(bytes: path + [0x2F] + name) }
    rmdir(cPath)
  }
}

/// The whole of `/proc/self/mountinfo`. Read to its end: a /proc file reports no size, and
/// `String(contentsOfFile:)` stops after its first page, which the mounts of tests running side by
/// side overflow.
public func currentMountInfo() -> String {
  guard let file = FileHandle(forReadingAtPath: "/proc/self/mountinfo") else { return "" }
  defer { try? file.close() }
  return String(decoding: (try? file.readToEnd()) ?? Data(), as: UTF8.self)
}
