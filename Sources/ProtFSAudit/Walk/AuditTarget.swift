import Foundation
import ProtFS
import ProtFSSystem

/// What `protfs audit PATH` covers: one container, or every container of a device.
public struct AuditTarget: Sendable {
  /// One container to walk.
  public struct Unit: Sendable {
    /// The container's directory name (its bundle id).
    public var name: String
    /// Its absolute path.
    public var absolutePath: String
    /// Its path relative to the audited root, with a trailing `/` (empty when it is the root).
    public var displayPrefix: String
    /// The class it inherits from ancestors inside the device (docs/semantics.md §2), if any.
    public var inheritedClass: ProtectionClass?
    /// The device it lives in, when it is a container of a protfs device (whose lock state then applies).
    public var device: Device?
    /// What it is in a device's `Containers/`; nil when a directory is audited on its own (an
    /// exported container tree, which is taken as a container whatever its name).
    public var entry: ContainersEntry? = nil

    /// Whether it is a container (`ContainersEntry.isContainer`); other entries of `Containers/` are
    /// reported (PFS013), and walked when they are directories.
    public var isContainer: Bool { entry?.isContainer ?? true }
    /// Whether it is a directory to walk.
    public var isDirectory: Bool { entry.map { $0.kind == .directory } ?? true }
  }

  /// The audited path, absolute.
  public var root: String
  /// Whether the root is a whole device.
  public var isDevice: Bool
  /// The containers, sorted by name.
  public var units: [Unit]

  /// Resolves several paths into one target rooted at their nearest common directory, so that one
  /// report covers them all and every finding's path is relative to the same root.
  public static func resolve(_ paths: [String], currentDirectory: String = FileManager.default.currentDirectoryPath)
    throws(ProtFSError) -> AuditTarget
  {
    var targets: [AuditTarget] = []
    for path in paths { targets.append(try resolve(path, currentDirectory: currentDirectory)) }
    guard targets.count > 1 else {
      guard let only = targets.first else {
        throw ProtFSError(.invalidArgument, "No path to audit was given.")
      }
      return only
    }
    var common = targets[0].root.split(separator: "/")
    for target in targets.dropFirst() {
      let parts = target.root.split(separator: "/")
      common = Array(zip(common, parts).prefix { $0 == $1 }.map(\.0))
    }
    let root = "/" + common.joined(separator: "/")
    let prefixLength = root == "/" ? 1 : root.count + 1
    var seen: Set<String> = []
    var units: [Unit] = []
    for target in targets {
      for var unit in target.units where seen.insert(unit.absolutePath).inserted {
        unit.displayPrefix = unit.absolutePath == root ? "" : String(unit.absolutePath.dropFirst(prefixLength)) + "/"
        units.append(unit)
      }
    }
    return AuditTarget(root: root, isDevice: false, units: units)
  }

  /// Resolves `path`: a device (a directory with `Containers/`) means all its containers; any other
  /// directory is audited as one container (so an exported container tree can be checked in CI).
  ///
  /// Throws when the path cannot be read or is not a directory: the audit cannot run.
  public static func resolve(_ path: String, currentDirectory: String = FileManager.default.currentDirectoryPath)
    throws(ProtFSError) -> AuditTarget
  {
    let absolute = Device.normalize(path, relativeTo: currentDirectory)
    let directory: DirectoryHandle
    do {
      directory = try DirectoryHandle(path: absolute)
    } catch {
      throw ProtFSError(
        error.code, "Cannot audit '\(path)': \(error.reasonText).", path: absolute, errno: error.errno,
        remedy: .advice(
          error.errno == ENOTDIR
            ? "give a container directory or a device directory" : "check that the path exists and is readable"))
    }
    if case .success(let status) = directory.statusResult(Device.containersDirectoryName), status.kind == .directory {
      let isProtfsDevice =
        directory.statusResult(Device.stateDirectoryName).map { $0.kind == .directory } == .success(true)
      let containers = try directory.openDirectory(Device.containersDirectoryName)
      let inherited = ClassInheritance(ancestor: (try? directory.protectionClass()) ?? nil)
        .below(own: (try? containers.protectionClass()) ?? nil).ancestor
      // Every entry is a unit: containers are audited; any other entry is reported, and walked
      // when it is a directory, since the lock protects it too.
      let units = try containers.containersEntries().map { entry in
        Unit(
          name: entry.name, absolutePath: containers.pathOf(entry.name),
          displayPrefix: "\(Device.containersDirectoryName)/\(entry.name)/", inheritedClass: inherited,
          device: isProtfsDevice ? Device(root: absolute) : nil, entry: entry)
      }
      return AuditTarget(root: absolute, isDevice: true, units: units)
    }
    // A container inside a device inherits from Containers/ and the device root (docs/semantics.md §2).
    var inherited: ProtectionClass?
    var device: Device?
    let parent = (absolute as NSString).deletingLastPathComponent
    let deviceRoot = (parent as NSString).deletingLastPathComponent
    if (parent as NSString).lastPathComponent == Device.containersDirectoryName,
      let deviceDirectory = try? DirectoryHandle(path: deviceRoot),
      case .success = deviceDirectory.statusResult(Device.stateDirectoryName)
    {
      inherited =
        ClassInheritance(ancestor: (try? deviceDirectory.protectionClass()) ?? nil)
        .below(own: (try? DirectoryHandle(path: parent).protectionClass()) ?? nil).ancestor
      device = Device(root: deviceRoot)
    }
    let name = absolute == "/" ? "/" : (absolute as NSString).lastPathComponent
    return AuditTarget(
      root: absolute, isDevice: false,
      units: [
        Unit(name: name, absolutePath: absolute, displayPrefix: "", inheritedClass: inherited, device: device)
      ])
  }
}
