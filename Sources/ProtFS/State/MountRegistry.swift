import Foundation
import ProtFSSystem

/// One active mount of a device (docs/semantics.md §7), as `<device>/.protfs/mounts/<pid>.json` holds it.
public struct MountRecord: Sendable, Equatable, Codable {
  /// The directory the device's `Containers/` is mounted at, absolute.
  public var mountpoint: String
  /// The daemon serving it.
  public var pid: Int32
  /// When the mount started answering.
  public var since: Date
  /// The app whose supervisor serves this mount for that app alone (`protfs app launch`); nil for
  /// a mount of the device (`protfs mount`), which `protfs exec` and other apps use.
  public var forApp: String?

  /// Creates a value from its parts.
  public init(mountpoint: String, pid: Int32, since: Date) {
    self.mountpoint = mountpoint
    self.pid = pid
    self.since = since
  }
}

/// The mounts of a device: one file per daemon under `<device>/.protfs/mounts/`, as any target
/// reads them.
///
/// ProtFSMount writes an entry when a mount answers and removes it when its daemon ends (its
/// `MountRegistry` extension). A daemon that was killed leaves its file behind; `active()` skips
/// such entries (dead process, or the mountpoint no longer a protfs mount) and removes those of
/// dead processes.
public struct MountRegistry: Sendable {
  /// The directory's name inside `.protfs/`.
  package static let directoryName = "mounts"
  /// The filesystem type the kernel lists for a protfs mount in `/proc/self/mountinfo`.
  public static let filesystemType = "fuse.protfs"

  /// The device.
  public let device: Device

  /// The registry of `device`.
  public init(device: Device) { self.device = device }

  /// The name of the entry of the daemon `pid` in the registry's directory.
  package static func entryName(pid: Int32) -> String { "\(pid).json" }

  /// The registry's directory; nil when no mount was ever registered.
  package func openDirectory() throws(ProtFSError) -> DirectoryHandle? {
    let state = try DirectoryHandle(path: device.stateDirectory)
    do {
      return try state.openDirectory(Self.directoryName)
    } catch  where error.code == .notFound {
      return nil
    }
  }

  /// The mounts whose daemon still runs and whose mountpoint is still a protfs mount, sorted by
  /// mountpoint. Reading changes nothing: the entries of daemons that were killed are passed over
  /// here and removed by the next daemon that registers (ProtFSMount).
  public func active() -> [MountRecord] {
    let mounted = Self.protfsMountpoints()
    return records().filter { ProcessIdentity.isRunning($0.pid) && mounted.contains($0.mountpoint) }
  }

  /// The active mounts of the device itself (`protfs mount`), not those an app's supervisor
  /// serves for its app alone.
  public func deviceMounts() -> [MountRecord] { active().filter { $0.forApp == nil } }

  /// Every recorded mount, live or not, sorted by mountpoint; unreadable entries are skipped.
  public func records() -> [MountRecord] { readRecords().records }

  /// Every recorded mount, live or not, sorted by mountpoint, and the errors of the entries that
  /// could not be read (each names its file and says to remove it), so that a listing can say
  /// which it left out.
  public func readRecords() -> (records: [MountRecord], unreadable: [ProtFSError]) {
    guard let directory = try? openDirectory(), let entries = try? directory.entries() else {
      return ([], [])
    }
    var result: [MountRecord] = []
    var unreadable: [ProtFSError] = []
    for (name, kind) in entries where kind == .file && name.hasSuffix(".json") && !name.hasPrefix(".") {
      do throws(ProtFSError) {
        if let record = try JSONStateFile.read(
          MountRecord.self, named: name, in: directory, limit: 16 << 10, what: "mount entry",
          remedy: .advice("remove it; a mount whose daemon still runs is listed again once the daemon is restarted"))
        {
          result.append(record)
        }
      } catch {
        unreadable.append(error)
      }
    }
    return (result.sorted { $0.mountpoint < $1.mountpoint }, unreadable)
  }

  /// The mountpoints of every protfs mount the kernel lists, unescaped.
  public static func protfsMountpoints() -> Set<String> {
    // Read to its end: a /proc file reports no size, and a reader that trusts one page misses the
    // mounts listed after it (tens of mounts fill a page).
    guard let file = FileHandle(forReadingAtPath: "/proc/self/mountinfo") else { return [] }
    defer { try? file.close() }
    guard let data = try? file.readToEnd() else { return [] }
    let text = String(decoding: data, as: UTF8.self)
    var result: Set<String> = []
    for line in text.split(separator: "\n") {
      // Fields: id parent major:minor root mountpoint options [optional…] - fstype source options.
      let fields = line.split(separator: " ")
      guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count,
        fields[dash + 1] == Substring(filesystemType)
      else { continue }
      result.insert(unescape(String(fields[4])))
    }
    return result
  }

  /// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
  private static func unescape(_ text: String) -> String {
    guard text.contains("\\") else { return text }
    var bytes: [UInt8] = []
    var input = Array(text.utf8)[...]
    while let byte = input.popFirst() {
      if byte == UInt8(ascii: "\\"), input.count >= 3,
        let value = UInt8(String(decoding: input.prefix(3), as: UTF8.self), radix: 8)
      {
        bytes.append(value)
        input = input.dropFirst(3)
      } else {
        bytes.append(byte)
      }
    }
    return String(decoding: bytes, as: UTF8.self)
  }
}
