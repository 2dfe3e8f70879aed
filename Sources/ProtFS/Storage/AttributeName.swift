import Foundation
import ProtFSSystem

/// The extended attributes protfs keeps on items. All live in the `user.protfs.` namespace.
public enum AttributeName {
  /// An item's own protection class: Apple's raw value, ASCII, no trailing NUL.
  public static let protectionClass = "user.protfs.class"
  /// A container root's default class, in the same encoding.
  public static let defaultClass = "user.protfs.default-class"
  /// The permission bits an item had before a lock removed them (octal ASCII, e.g. `0644`).
  public static let savedMode = "user.protfs.saved-mode"
  /// On a mount's root only, answered by the mount's daemon: the device state (JSON of
  /// `ProtectionState`) whose classes and cached pages it has brought up to date.
  public static let mountState = "user.protfs.mount-state"
  /// On a sealed mount's root (read only): how many open handles hold their file's key now, by
  /// class, as JSON (`{"complete-unless-open":1}`); a lock takes class A's from open handles.
  public static let mountFileKeys = "user.protfs.mount-file-keys"
}

extension DirectoryHandle {
  /// The own class of `name` (this directory when nil), or nil when it has none.
  ///
  /// Throws `corruptAttribute` when the attribute holds something that is not a raw value.
  public func protectionClass(of name: String? = nil) throws(ProtFSError) -> ProtectionClass? {
    try protectionClass(of: name.map(FileName.init))
  }

  /// The own class of the entry `name`, which may not be UTF-8 (this directory when nil), or nil
  /// when it has none.
  public func protectionClass(of name: FileName?) throws(ProtFSError) -> ProtectionClass? {
    try decodeClass(attribute(AttributeName.protectionClass, of: name), at: name.map(pathOf) ?? path)
  }

  /// The container default class stored on this directory, or nil.
  public func defaultClass() throws(ProtFSError) -> ProtectionClass? {
    try decodeClass(attribute(AttributeName.defaultClass), at: path, attribute: AttributeName.defaultClass)
  }

  /// Writes `protectionClass` as the own class of `name` (this directory when nil).
  public func setProtectionClass(_ protectionClass: ProtectionClass, of name: String? = nil) throws(ProtFSError) {
    try setProtectionClass(protectionClass, of: name.map(FileName.init))
  }

  /// Writes `protectionClass` as the own class of the entry `name`, which may not be UTF-8 (this
  /// directory when nil).
  public func setProtectionClass(_ protectionClass: ProtectionClass, of name: FileName?) throws(ProtFSError) {
    let target = name.map(pathOf) ?? path
    do {
      try protectionClass.write(
        to: name.map { .entry(dirfd: fd, name: $0) } ?? .descriptor(fd, pathOnly: false), path: target)
    } catch  where error.errno == EPERM {
      // The kernel refuses user.* attributes on anything but regular files and directories.
      let kind = name.flatMap { try? status($0).kind } ?? .directory
      let what = kind == .symlink ? "a symbolic link" : "not a regular file or directory"
      throw ProtFSError(
        .invalidArgument, "Cannot set the protection class of '\(target)': it is \(what).", path: target, errno: EPERM,
        remedy: kind == .symlink ? .advice("set the class of the link's target instead") : nil)
    }
  }

  private func decodeClass(_ bytes: [UInt8]?, at path: String, attribute: String = AttributeName.protectionClass)
    throws(ProtFSError) -> ProtectionClass?
  {
    try ProtectionClass.decode(bytes, at: path, attribute: attribute)
  }
}

extension ProtectionClass {
  /// The own class of the item open as `fd` (read from the descriptor, so from exactly that item),
  /// or nil when it has none; `path` names it in errors.
  ///
  /// Throws `corruptAttribute` when the attribute holds something that is not a raw value.
  public static func own(ofDescriptor fd: Int32, path: String) throws(ProtFSError) -> ProtectionClass? {
    var buffer = [UInt8](repeating: 0, count: 128)
    let result = buffer.withUnsafeMutableBytes { raw in
      Kernel.getAttribute(dirfd: fd, name: nil, attribute: AttributeName.protectionClass, into: raw)
    }
    switch result {
    case .success(let size): return try decode(Array(buffer.prefix(size)), at: path)
    case .failure(let e) where e == .noData: return nil
    case .failure(let e): throw ProtFSError.system("read the attributes of", path: path, errno: e)
    }
  }

  /// Writes this class as the own class (`user.protfs.class`) of `target`: the item a descriptor
  /// holds (an `O_PATH` one too), or the entry of a directory descriptor, never following a link.
  /// The one place protfs writes the attribute; this form is for the mount, which answers errnos.
  package func write(to target: Kernel.AttributeTarget, flags: Int32 = 0) -> Result<Void, Errno> {
    // `attributeValue`'s bytes, read in place: a download labels every file it makes with this.
    var value = rawValue
    return value.withUTF8 { raw in
      Kernel.setAttribute(
        target, attribute: AttributeName.protectionClass, value: UnsafeRawBufferPointer(raw), flags: flags)
    }
  }

  /// Writes this class as the own class of `target`, as `write(to:)` does; `path` names it in errors.
  package func write(to target: Kernel.AttributeTarget, path: String) throws(ProtFSError) {
    try write(to: target).orThrow("set the protection class of", path: path)
  }

  /// Writes this class as the own class of the item open as `fd` (so of exactly that item); `path`
  /// names it in errors.
  public func write(toDescriptor fd: Int32, path: String) throws(ProtFSError) {
    try write(to: .descriptor(fd, pathOnly: false), path: path)
  }

  /// The class `bytes` (an attribute's value; nil when absent) holds.
  fileprivate static func decode(_ bytes: [UInt8]?, at path: String, attribute: String = AttributeName.protectionClass)
    throws(ProtFSError) -> ProtectionClass?
  {
    guard let bytes else { return nil }
    guard let value = ProtectionClass(attributeValue: bytes) else {
      let shown = String(decoding: bytes.prefix(64), as: UTF8.self).debugDescription
      throw ProtFSError(
        .corruptAttribute, "The attribute \(attribute) of '\(path)' holds \(shown), which is not a protection class.",
        path: path, remedy: .setClass(path: path))
    }
    return value
  }
}
