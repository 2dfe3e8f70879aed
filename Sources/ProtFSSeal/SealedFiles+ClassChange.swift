import Glibc
import ProtFS
import ProtFSSystem

/// A class change on a sealed device while it is under way: the item (its path's components below
/// the device root) and the class it gets. A kill leaves it behind, and the next command makes the
/// same change again: its keys wrapped by the new class, then the class written.
package struct ClassChangeRecord: Codable, Sendable, Equatable {
  /// The item's path below the device root, one byte array per component.
  package var path: [[UInt8]]
  /// The class's raw value.
  package var protectionClass: String
  /// Whether everything below the item gets the class too.
  package var recursive: Bool
  /// Whether the item's own class is removed, `protectionClass` being the one it inherits then
  /// (a `removexattr` through the mount); absent in a record of a class set.
  package var removesOwnClass: Bool?

  package init(path: [[UInt8]], protectionClass: String, recursive: Bool, removesOwnClass: Bool? = nil) {
    self.path = path
    self.protectionClass = protectionClass
    self.recursive = recursive
    self.removesOwnClass = removesOwnClass
  }
}

/// A file whose key a class change wraps anew.
package struct KeyRewrap: Sendable {
  /// The directory holding it.
  package var directory: DirectoryHandle
  /// Its name there.
  package var name: FileName
  /// The class its key is wrapped with now.
  package var current: ProtectionClassCode
  /// The class it gets.
  package var target: ProtectionClass

  /// Its path, for messages.
  package var path: String { directory.pathOf(name) }
}

/// A class change on a sealed device (docs/sealed.md): the key of every sealed file whose effective
/// class changes is wrapped anew with the new class's key; contents are not touched. A directory's new
/// class reaches the files below it that inherit it, so they are rewrapped too (a key must always be
/// wrapped by the class the file has: the lock evicts by class).
///
/// The files are found and every key they need checked first, so a change refused for an evicted key
/// changes nothing. A kill midway leaves some keys wrapped by the class the file had, which still
/// open it; the same change again finishes it (`set-class` records it first, ``ClassChangeRecord``,
/// and the next command does so).
extension SealedFiles {
  /// The sealed files at `name` in `parent` (nil: `parent` itself) and below it whose keys a new
  /// own class `cls` on it (with `recursive`, on everything below too) must rewrap. `skipping` names
  /// an entry of the top directory that is not walked (the device's `.protfs`).
  package static func rewraps(
    of name: FileName?, in parent: DirectoryHandle, to cls: ProtectionClass, recursive: Bool,
    skipping: FileName? = nil
  ) throws(ProtFSError) -> [KeyRewrap] {
    var found: [KeyRewrap] = []
    let kind: FileKind = if let name { try parent.status(name).kind } else { .directory }
    switch kind {
    case .file:
      guard let name else { return [] }
      if let rewrap = try rewrap(name, in: parent, to: cls) { found.append(rewrap) }
    case .directory:
      let directory = if let name { try parent.openDirectory(name) } else { parent }
      try collect(in: directory, inherited: cls, recursive: recursive, skipping: skipping, into: &found)
    default: break
    }
    return found
  }

  /// Refuses, before anything changes, when a key that `rewraps` need is evicted: EPERM, naming the
  /// first file.
  package func requireKeys(for rewraps: [KeyRewrap]) throws(ProtFSError) {
    let held = available
    for rewrap in rewraps {
      let target = ProtectionClassCode(rewrap.target)
      // Wrapping for class B takes only its public key, which every state has.
      for code in [rewrap.current, target] where !held.contains(code) && !(code == .b && code == target) {
        throw ProtFSError(
          .permissionDenied,
          "Cannot give '\(rewrap.path)' the class \(rewrap.target.name): the key of class \(code) is evicted "
            + "while the device is locked, so its file key cannot be wrapped anew. Nothing was changed.",
          path: rewrap.path, errno: EPERM, remedy: .unlock)
      }
    }
  }

  /// Wraps each file's key with its new class's key; the number of files.
  @discardableResult
  package func perform(_ rewraps: [KeyRewrap], afterEach: () -> Void = {}) throws(ProtFSError) -> Int {
    for rewrap in rewraps {
      let file = FileDescriptor(owning: try open(rewrap.name, in: rewrap.directory))
      do { try self.rewrap(file.rawValue, to: rewrap.target) } catch { throw error.protfsError(path: rewrap.path) }
      afterEach()
    }
    return rewraps.count
  }

  /// The rewraps below `directory`, whose entries inherit `inherited` (all get it with `recursive`).
  private static func collect(
    in directory: DirectoryHandle, inherited: ProtectionClass, recursive: Bool, skipping: FileName?,
    into found: inout [KeyRewrap]
  ) throws(ProtFSError) {
    var entries: [(FileName, FileKind)] = []
    try directory.forEachRawEntry { (name, kind) throws(ProtFSError) in
      entries.append((FileName(cString: name), directory.resolvedKind(name, kind)))
    }
    for (name, kind) in entries where name != skipping && (kind == .file || kind == .directory) {
      var cls = inherited
      if !recursive {
        do { cls = try directory.protectionClass(of: name) ?? inherited } catch  where error.code == .corruptAttribute {
          cls = .complete  // as a lock treats garbage: the strictest
        }
      }
      if kind == .file {
        if let rewrap = try rewrap(name, in: directory, to: cls) { found.append(rewrap) }
      } else {
        try collect(
          in: try directory.openDirectory(name), inherited: cls, recursive: recursive, skipping: nil, into: &found)
      }
    }
  }

  /// The rewrap of the file `name` to `cls`, or nil when it is not sealed or its key is of `cls`.
  private static func rewrap(_ name: FileName, in directory: DirectoryHandle, to cls: ProtectionClass)
    throws(ProtFSError) -> KeyRewrap?
  {
    let file = FileDescriptor(owning: try open(name, in: directory))
    guard hasRecord(file.rawValue) else { return nil }
    let record: FileKeyRecord
    do { record = try Self.record(of: file.rawValue) } catch { throw error.protfsError(path: directory.pathOf(name)) }
    guard record.code != ProtectionClassCode(cls) else { return nil }
    return KeyRewrap(directory: directory, name: name, current: record.code, target: cls)
  }

  private static func open(_ name: FileName, in directory: DirectoryHandle) throws(ProtFSError) -> Int32 {
    try name.withCString { Kernel.openat(directory.fd, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
      .orThrow("open", path: directory.pathOf(name))
  }

  private func open(_ name: FileName, in directory: DirectoryHandle) throws(ProtFSError) -> Int32 {
    try Self.open(name, in: directory)
  }
}
