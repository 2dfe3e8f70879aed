import CProtFSSys
import Foundation
import ProtFSSystem

extension Device {
  /// The own class of the item at `path`, or nil when it has none.
  public func ownClass(of path: DevicePath) throws(ProtFSError) -> ProtectionClass? {
    let (parent, name) = try openParent(path)
    return try parent.protectionClass(of: name)
  }

  /// The effective class of the item at `path` and where it came from (docs/semantics.md §2): its own
  /// attribute, else the nearest ancestor's inside the device, else its container's default, else class C.
  public func effectiveClass(of path: DevicePath) throws(ProtFSError) -> EffectiveClass {
    var directory = try openRoot()
    var inherited = try directory.protectionClass()
    var containerDefault: ProtectionClass?
    for (depth, component) in path.components.enumerated() {
      let isItem = depth == path.components.count - 1
      if isItem {
        if let own = try directory.protectionClass(of: component) { return EffectiveClass(own, .own) }
        if depth == 1 && path.components[0] == Device.containersDirectoryName {
          // The container root itself: its default is stored on it.
          let root = try directory.openDirectory(component)
          containerDefault = try root.defaultClass()
        }
        break
      }
      directory = try directory.openDirectory(component)
      if let own = try directory.protectionClass() { inherited = own }
      if depth == 1 && path.components[0] == Device.containersDirectoryName {
        containerDefault = try directory.defaultClass()
      }
    }
    if path.isRoot, let own = inherited { return EffectiveClass(own, .own) }
    if let inherited { return EffectiveClass(inherited, .inherited) }
    return EffectiveClass(containerDefault ?? .containerDefault, .default)
  }

  /// Sets the own class of the item at `path`; with `recursive`, of everything below it too.
  ///
  /// Symlinks are never followed; below a directory they are skipped and returned.
  @discardableResult
  public func setClass(_ protectionClass: ProtectionClass, of path: DevicePath, recursive: Bool = false)
    throws(ProtFSError) -> SetClassResult
  {
    let (parent, name) = try openParent(path)
    var result = SetClassResult()
    try parent.setProtectionClass(protectionClass, of: name)
    result.changed += 1
    guard recursive else { return result }
    let status = try parent.status(name)
    guard status.kind == .directory else { return result }
    let directory = if let name { try parent.openDirectory(name) } else { parent }
    try setClassBelow(directory, path, protectionClass, &result)
    return result
  }

  private func setClassBelow(
    _ directory: DirectoryHandle, _ path: DevicePath, _ protectionClass: ProtectionClass,
    _ result: inout SetClassResult
  ) throws(ProtFSError) {
    for (name, kind) in try directory.entries() {
      if path.isRoot && name == Device.stateDirectoryName { continue }
      var kind = kind
      if kind == .unknown { kind = try directory.status(name).kind }
      switch kind {
      case .file:
        try directory.setProtectionClass(protectionClass, of: name)
        result.changed += 1
      case .directory:
        try directory.setProtectionClass(protectionClass, of: name)
        result.changed += 1
        try setClassBelow(try directory.openDirectory(name), path.appending(name), protectionClass, &result)
      case .symlink, .other, .unknown:
        result.skipped.append(path.appending(name))
      }
    }
  }

  /// Removes the own class of the item at `path`, so that it inherits again.
  public func removeClass(of path: DevicePath) throws(ProtFSError) {
    let (parent, name) = try openParent(path)
    try parent.removeAttribute(AttributeName.protectionClass, of: name)
  }

  /// Creates the directory at `path` with `protectionClass`, or the parent's effective class when nil.
  ///
  /// The directory appears with its class already set (made under a temporary name, then renamed),
  /// so no reader ever sees it unlabelled. Returns false when it already existed.
  @discardableResult
  public func createDirectory(
    _ path: DevicePath, protectionClass: ProtectionClass? = nil,
    permissions: FilePermissions = FilePermissions(rawValue: 0o755)
  ) throws(ProtFSError) -> Bool {
    guard let name = path.name else { return false }
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
    return try Device.makeLabelledDirectory(name, in: parent, protectionClass: cls!, permissions: permissions)
  }

  /// Creates `path` and every missing ancestor, each taking its parent's effective class, the last
  /// one `protectionClass` when given.
  public func createDirectories(_ path: DevicePath, protectionClass: ProtectionClass? = nil) throws(ProtFSError) {
    var current = DevicePath.root
    for (index, component) in path.components.enumerated() {
      current = current.appending(component)
      let isLast = index == path.components.count - 1
      try createDirectory(current, protectionClass: isLast ? protectionClass : nil)
    }
  }

  /// mkdir under a temporary name, label, then rename into place without replacing anything.
  package static func makeLabelledDirectory(
    _ name: String, in parent: DirectoryHandle, protectionClass: ProtectionClass,
    permissions: FilePermissions
  ) throws(ProtFSError) -> Bool {
    let temporary = AtomicFile.temporaryName(for: name)
    try parent.makeDirectory(temporary, permissions: permissions)
    do throws(ProtFSError) {
      try parent.setProtectionClass(protectionClass, of: temporary)
      switch valueOrErrno({ protfs_rename_noreplace(parent.fd, temporary, parent.fd, name) }) {
      case .success:
        return true
      case .failure(let e) where e == .exists:
        unlinkat(parent.fd, temporary, AT_REMOVEDIR)
        return false
      case .failure(let e):
        throw ProtFSError.system("create the directory", path: parent.pathOf(name), errno: e.rawValue)
      }
    } catch {
      unlinkat(parent.fd, temporary, AT_REMOVEDIR)
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
