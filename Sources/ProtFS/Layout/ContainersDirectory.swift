import ProtFSSystem

/// An entry directly inside a device's `Containers/`, and the one definition of a container.
///
/// A container is a directory directly inside `Containers/` whose name is a valid bundle id
/// (docs/semantics.md §3). Only a container has a default class (`user.protfs.default-class`), is
/// listed by `Device.containers()`, and has caches and download tasks. Every feature uses this
/// definition; what each covers is stated against it: the lock protects every item below
/// `Containers/`, containers or not, and the audit reports entries that are not containers.
public struct ContainersEntry: Sendable, Hashable {
  /// The entry's name.
  public var name: String
  /// Its type, never following a symlink.
  public var kind: FileKind

  /// Creates the entry `name` of type `kind`.
  public init(name: String, kind: FileKind) {
    self.name = name
    self.kind = kind
  }

  /// The bundle id the name spells, if it is a valid one.
  public var bundleID: BundleID? { try? BundleID(name) }

  /// Whether the entry is a container.
  public var isContainer: Bool { ContainersEntry.isContainer(name: name, kind: kind) }

  /// Whether an entry of `Containers/` named `name`, of type `kind`, is a container.
  public static func isContainer(name: String, kind: FileKind) -> Bool {
    kind == .directory && (try? BundleID(name)) != nil
  }

  /// Why the entry is not a container, as the end of a sentence; nil for a container.
  public var notAContainerReason: String? {
    if kind != .directory { return "it is a \(kind.rawValue), not a directory" }
    do {
      _ = try BundleID(name)
      return nil
    } catch {
      return "its name is not a valid bundle identifier"
    }
  }
}

extension DirectoryHandle {
  /// The entries of this directory (a device's `Containers/`), sorted by name, each with its type.
  /// Entries that vanish while being listed are left out.
  public func containersEntries() throws(ProtFSError) -> [ContainersEntry] {
    var entries: [ContainersEntry] = []
    try forEachRawEntry { name, direntKind in
      let kind = resolvedKind(name, direntKind)
      guard kind != .unknown else { return }
      entries.append(ContainersEntry(name: String(cString: name), kind: kind))
    }
    return entries.sorted { $0.name < $1.name }
  }
}
