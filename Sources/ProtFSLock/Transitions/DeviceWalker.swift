import Foundation
import ProtFS
import ProtFSSystem

/// One item met by a `DeviceWalker`: a file or directory inside a container, with its effective class.
package struct WalkEntry: Sendable {
  /// The directory holding the item; every operation on the item is relative to it.
  package var parent: DirectoryHandle
  /// The item's name in `parent`, as the kernel has it: UTF-8 or not, every call takes it as is.
  package var name: FileName
  /// `.file` or `.directory` (symlinks and special files are never handed out).
  package var kind: FileKind
  /// The effective class (docs/semantics.md §2); nil when the walk was asked not to read classes.
  package var protectionClass: ProtectionClass?
  /// Set when the item's own class attribute cannot be read or holds garbage. For garbage
  /// (`corruptAttribute`) `protectionClass` is complete, the strictest; else the inherited one.
  package var classError: ProtFSError?

  package var path: String { parent.pathOf(name) }
}

/// Visits every file and directory below a device's `Containers/` on a `TreeWalker`: its containers
/// and any other entry there (the lock protects them all; only a container has a default class).
/// Each item's class is read fast (`*xattrat` relative to the directory's descriptor, never
/// following a symlink).
package struct DeviceWalker {
  /// The device to walk.
  package var device: Device
  /// Whether to read each item's class; an unlock does not need them.
  package var readsClasses: Bool
  /// How many threads walk.
  package var threads: Int = 2
  /// Lets class reads widen an unprivileged owner's unreadable item (during transitions only).
  package var ownerAccess: OwnerAccessLog? = nil
  /// The directory walked as `Containers/` instead of the device's own: containers staged outside
  /// it, which inherit as if they were in it.
  package var containers: DirectoryHandle? = nil

  /// What a walk found besides what the visitor gathered.
  package struct Summary {
    /// Directories that could not be listed or opened, and other walk failures.
    var failures: [ProtFSError] = []
    /// Symlinks and special files left alone.
    var skipped = 0
  }

  /// Walks the device, giving each worker thread its own `Accumulator` (made by `make`), and returns them.
  package func walk<Accumulator: Sendable>(
    make: () -> Accumulator, visit: @escaping @Sendable (inout Accumulator, WalkEntry) -> Void
  ) throws(ProtFSError) -> (accumulators: [Accumulator], summary: Summary) {
    let root = try device.openRoot()
    let deviceContainers = try device.openDirectory(Device.containersPath)
    var inherited: ProtectionClass?
    if readsClasses {
      inherited = try? root.protectionClass()
      if let own = try? deviceContainers.protectionClass() { inherited = own }
    }
    let containers = self.containers ?? deviceContainers
    let visitor = DeviceVisitor(
      accumulator: make(), body: visit, readsClasses: readsClasses, ownerAccess: ownerAccess)
    let (visitors, _) = TreeWalker(threads: threads).walk(
      [TreeWalker.Root(containers, true, inheritance: ClassInheritance(ancestor: inherited))], visitor: visitor)
    if let failure = visitors.lazy.compactMap(\.rootFailure).first { throw failure }
    var summary = Summary()
    for visitor in visitors {
      summary.failures += visitor.failures
      summary.skipped += visitor.skipped
    }
    return (visitors.map(\.accumulator), summary)
  }

  /// The own class of `name`, reading it with temporary owner access when its mode forbids reading
  /// attributes (an unprivileged owner of a locked file).
  package static func ownClass(_ parent: DirectoryHandle, _ name: FileName, _ ownerAccess: OwnerAccessLog?)
    throws(ProtFSError) -> ProtectionClass?
  {
    do {
      return try parent.protectionClass(of: name)
    } catch  where error.errno == EACCES {
      return try ModeEnforcer.withOwnerAccess(parent, name, ownerAccess) { () throws(ProtFSError) in
        try parent.protectionClass(of: name)
      }
    }
  }
}

/// The device walk's visitor: hands files and directories with their effective class to the
/// caller's closure. Its context says whether the directory is `Containers/` (whose directories
/// are container roots, which may store a default class).
private struct DeviceVisitor<Accumulator: Sendable>: TreeVisitor {
  /// This worker's share of what the caller gathers.
  var accumulator: Accumulator
  /// The caller's per-item closure.
  let body: @Sendable (inout Accumulator, WalkEntry) -> Void
  /// Whether to read each item's class.
  let readsClasses: Bool
  /// Lets class reads widen an unprivileged owner's unreadable item.
  let ownerAccess: OwnerAccessLog?
  /// Directories that could not be opened or listed.
  var failures: [ProtFSError] = []
  /// Symlinks and special files left alone.
  var skipped = 0
  /// Set when `Containers/` itself cannot be listed: the walk then fails.
  var rootFailure: ProtFSError?

  /// Reads the item's class (a container root's default first) and hands the item to the closure.
  mutating func visit(_ entry: inout TreeEntry, in isContainers: Bool) -> TreeStep<Bool> {
    guard entry.kind == .file || entry.kind == .directory else {
      skipped += 1
      return .skip
    }
    // Every call below takes the name's bytes: a name that is not UTF-8 (which an app can make)
    // is locked like any other, never left readable nor reached through a decoded look-alike.
    let name = entry.fileName
    var item = WalkEntry(parent: entry.directory, name: name, kind: entry.kind)
    if readsClasses {
      if isContainers, let text = name.text, ContainersEntry.isContainer(name: text, kind: entry.kind),
        entry.inheritance.ancestor == nil
      {
        // A container root: what nothing above it decides, its stored default does.
        do {
          try entry.readContainerDefault()
        } catch {
          entry.inheritance = entry.inheritance.inContainer(defaultClass: nil)
        }
      }
      switch FastAttributes.protectionClass(entry.directory, entry.name) {
      case .value(let own): entry.ownClass = own
      case .absent: break
      case .unusual:
        do {
          entry.ownClass = try DeviceWalker.ownClass(entry.directory, name, ownerAccess)
        } catch {
          item.classError = error
        }
      }
      // An app can write any bytes into its own file's class attribute: garbage must neither
      // stop a lock nor leave the item the weaker class it would inherit. Its children still
      // inherit from above it, as they would from an item without a class.
      item.protectionClass =
        item.classError?.code == .corruptAttribute
        ? .complete : entry.inheritance.effectiveClass(own: entry.ownClass)
    }
    body(&accumulator, item)
    return .descend(false)
  }

  /// Collects the failure; the walk goes on.
  mutating func failed(_ error: ProtFSError, in isContainers: Bool) -> Bool {
    if isContainers { rootFailure = error } else { failures.append(error) }
    return true
  }
}
