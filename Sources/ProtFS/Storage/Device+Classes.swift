import Foundation
import ProtFSSystem

extension Device {
  /// The own class of the item at `path`, or nil when it has none.
  public func ownClass(of path: DevicePath) throws(ProtFSError) -> ProtectionClass? {
    let (parent, name) = try openParentEntry(path)
    return try parent.protectionClass(of: name)
  }

  /// The effective class of the item at `path` and where it came from (docs/semantics.md §2): its own
  /// attribute, else the nearest ancestor's inside the device, else its container's default, else class C.
  public func effectiveClass(of path: DevicePath) throws(ProtFSError) -> EffectiveClass {
    guard let name = path.fileName else {
      return ClassInheritance().effective(own: try openRoot().protectionClass())
    }
    var (parent, inheritance) = try descend(to: path.parent)
    let own = try parent.protectionClass(of: name)
    if own == nil && Device.isContainerRoot(path) {
      // The container root itself: its default is stored on it.
      inheritance = inheritance.inContainer(defaultClass: try parent.openDirectory(name).defaultClass())
    }
    return inheritance.effective(own: own)
  }

  /// What the entries of the directory at `path` inherit: the nearest own class from the device
  /// root down to it, and the default of the container it is in.
  public func classInheritance(below path: DevicePath) throws(ProtFSError) -> ClassInheritance {
    try descend(to: path).inheritance
  }

  /// Opens the file at `path` and tells its effective class, both decided from the same items:
  /// each directory on the way is opened without following a link and held, the file is opened
  /// relative to the last one by `open` (which gives its flags and words its errors), and its own
  /// class is read from the opened descriptor. A name swapped between a check by path and an open
  /// by path (`renameat2(RENAME_EXCHANGE)`) cannot make one item's class decide another's reading.
  public func openFile(
    _ path: DevicePath, _ open: (DirectoryHandle, String) throws(ProtFSError) -> FileDescriptor
  ) throws(ProtFSError) -> (FileDescriptor, EffectiveClass) {
    guard let name = try textName(of: path) else {
      throw ProtFSError(.invalidArgument, "'\(absolutePath(path))' is the device itself, not a file.", path: root)
    }
    let (parent, inheritance) = try descend(to: path.parent)
    let file = try open(parent, name)
    let own = try ProtectionClass.own(ofDescriptor: file.rawValue, path: absolutePath(path))
    return (file, inheritance.effective(own: own))
  }

  /// Opens the directory at `path` component by component, folding in each one's classes.
  private func descend(to path: DevicePath) throws(ProtFSError) -> (DirectoryHandle, inheritance: ClassInheritance) {
    var directory = try openRoot()
    var inheritance = ClassInheritance(ancestor: try directory.protectionClass())
    var current = DevicePath.root
    for component in path.names {
      directory = try directory.openDirectory(component)
      current = current.appending(component)
      let own = try directory.protectionClass()
      if Device.isContainerRoot(current) {
        inheritance = inheritance.inContainer(defaultClass: try directory.defaultClass())
      }
      inheritance = inheritance.below(own: own)
    }
    return (directory, inheritance)
  }

  /// Whether `path`, a directory, is a container root: directly inside `Containers/` and named by a
  /// valid bundle id (`ContainersEntry.isContainer`).
  public static func isContainerRoot(_ path: DevicePath) -> Bool {
    guard path.count == 2, path.names[0] == FileName(containersDirectoryName), let name = path.names[1].text else {
      return false
    }
    return ContainersEntry.isContainer(name: name, kind: .directory)
  }

  /// Sets the own class of the item at `path`; with `recursive`, of everything below it too.
  ///
  /// Symlinks are never followed; below a directory they are skipped and returned.
  @discardableResult
  public func setClass(_ protectionClass: ProtectionClass, of path: DevicePath, recursive: Bool = false)
    throws(ProtFSError) -> SetClassResult
  {
    let (parent, name) = try openParentEntry(path)
    var result = SetClassResult()
    try parent.setProtectionClass(protectionClass, of: name)
    result.changed += 1
    guard recursive else { return result }
    let status = if let name { try parent.status(name) } else { try parent.status() }
    guard status.kind == .directory else { return result }
    let directory = if let name { try parent.openDirectory(name) } else { parent }
    let (visitors, _) = TreeWalker(threads: 1).walk(
      [TreeWalker.Root(directory, path)], visitor: ClassSetter(protectionClass: protectionClass))
    let setter = visitors[0]
    if let error = setter.error { throw error }
    result.changed += setter.result.changed
    result.skipped += setter.result.skipped
    return result
  }

  /// Removes the own class of the item at `path`, so that it inherits again.
  public func removeClass(of path: DevicePath) throws(ProtFSError) {
    let (parent, name) = try openParentEntry(path)
    try parent.removeAttribute(AttributeName.protectionClass, of: name)
  }

  /// Creates the directory at `path` with `protectionClass`, or the parent's effective class when nil.
  ///
  /// The directory appears with its class already set (made under a temporary name, then renamed),
  /// so no reader ever sees it unlabelled. Returns false when it already existed.
  /// With `owner`, the directory is handed over to that user before it appears.
  @discardableResult
  public func createDirectory(
    _ path: DevicePath, protectionClass: ProtectionClass? = nil,
    permissions: FilePermissions = FilePermissions(rawValue: 0o755), owner: AppUser? = nil
  ) throws(ProtFSError) -> Bool {
    guard let name = try textName(of: path) else { return false }
    let parent = try openDirectory(path.parent)
    if let existing = try? parent.status(name) {
      guard existing.kind == .directory else {
        throw ProtFSError(
          .alreadyExists,
          "Cannot create the directory '\(parent.pathOf(name))': a \(existing.kind.rawValue) is in the way.",
          path: parent.pathOf(name), errno: EEXIST)
      }
      return false
    }
    var cls = protectionClass
    if cls == nil { cls = try effectiveClass(of: path.parent).protectionClass }
    return try Device.makeLabelledDirectory(
      name, in: parent, protectionClass: cls!, permissions: permissions, owner: owner)
  }

  /// Creates `path` and every missing ancestor, each taking its parent's effective class, the last
  /// one `protectionClass` when given; those it creates belong to `owner` when given.
  public func createDirectories(
    _ path: DevicePath, protectionClass: ProtectionClass? = nil, owner: AppUser? = nil
  ) throws(ProtFSError) {
    var current = DevicePath.root
    for (index, component) in path.names.enumerated() {
      current = current.appending(component)
      let isLast = index == path.count - 1
      try createDirectory(current, protectionClass: isLast ? protectionClass : nil, owner: owner)
    }
  }

  /// mkdir under a temporary name, label, then rename into place without replacing anything.
  package static func makeLabelledDirectory(
    _ name: String, in parent: DirectoryHandle, protectionClass: ProtectionClass,
    permissions: FilePermissions, owner: AppUser? = nil
  ) throws(ProtFSError) -> Bool {
    let temporary = AtomicFile.temporaryName(for: name)
    try parent.makeDirectory(temporary, permissions: permissions)
    do throws(ProtFSError) {
      try parent.setProtectionClass(protectionClass, of: temporary)
      // Through a descriptor of the directory (never following a link): the parent may be the
      // app's, which could put something else under the temporary name.
      if let owner { try parent.openDirectory(temporary).handOver(nil, to: owner) }
      switch Kernel.renameat2(parent.fd, temporary, parent.fd, name, .noReplace) {
      case .success:
        return true
      case .failure(let e) where e == .exists:
        _ = Kernel.unlinkat(parent.fd, temporary, AT_REMOVEDIR)
        return false
      case .failure(let e):
        throw ProtFSError.system("create the directory", path: parent.pathOf(name), errno: e)
      }
    } catch {
      _ = Kernel.unlinkat(parent.fd, temporary, AT_REMOVEDIR)
      throw error
    }
  }
}

/// What a `setClass` changed.
public struct SetClassResult: Sendable, Equatable {
  /// How many items got the class.
  public var changed = 0
  /// Symlinks and special files that were left alone.
  public var skipped: [DevicePath] = []
}

/// The visitor of a recursive `setClass`: labels every file and directory below, skips the rest,
/// and stops at the first error. Its context is the directory's device path.
private struct ClassSetter: TreeVisitor {
  /// The class to set.
  let protectionClass: ProtectionClass
  /// What was changed and skipped.
  var result = SetClassResult()
  /// The first error, which stopped the walk.
  var error: ProtFSError?

  /// Labels a file or directory (and walks the directory); records anything else as skipped.
  mutating func visit(_ entry: inout TreeEntry, in path: DevicePath) -> TreeStep<DevicePath> {
    // The name as the kernel has it: one that is not UTF-8 is labelled as any other.
    let name = entry.fileName
    if path.isRoot && name == FileName(Device.stateDirectoryName) { return .skip }
    guard entry.kind == .file || entry.kind == .directory else {
      result.skipped.append(path.appending(name))
      return .skip
    }
    do {
      try entry.directory.setProtectionClass(protectionClass, of: name)
    } catch {
      self.error = error
      return .stop
    }
    result.changed += 1
    return .descend(path.appending(name))
  }

  /// Records the error and stops.
  mutating func failed(_ error: ProtFSError, in path: DevicePath) -> Bool {
    self.error = error
    return false
  }
}
