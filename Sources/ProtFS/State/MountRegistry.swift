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
    Set(MountInfo.entries().lazy.filter { $0.type == filesystemType }.map(\.mountpoint))
  }
}
