import Foundation
import ProtFS
import ProtFSSystem

/// A `FileManager` for one device that honours data protection the way iOS does, where Linux
/// Foundation silently ignores it.
///
/// Names and semantics follow Foundation: `FileAttributeKey.protectionKey` is set with
/// `setAttributes(_:ofItemAtPath:)` and reported by `attributesOfItem(atPath:)`; new files and
/// directories take their parent directory's class unless the call says otherwise; `Data` writes
/// honour the protection bits of `Data.WritingOptions`; errors are `CocoaError`s in
/// `NSCocoaErrorDomain` with the path and the underlying POSIX error. Paths must lie inside the
/// device, and symlinks are never followed.
///
/// The device's lock state applies to every caller, root included (docs/semantics.md §3): reading or writing a
/// file whose class is unavailable, or creating one in a directory whose class is, fails with EPERM,
/// as `CocoaError` 257 (`NSFileReadNoPermissionError`) or 513 (`NSFileWriteNoPermissionError`).
/// Metadata (attributes, listing, moves within a filesystem, removal) is never gated. On a sealed
/// device, contents go through the files' keys, root's alone (`sealedFiles(for:path:)`).
///
/// `@unchecked Sendable`: everything is immutable but `beforeAtomicRename`, a test hook set before
/// the manager is first used and only read afterwards.
public final class ProtectedFileManager: @unchecked Sendable {
  /// The device whose files this manager works on.
  public let device: Device

  /// The app whose container `urls(for:in:)` answers for; nil: the app `protfs app` runs this
  /// program as (`PROTFS_APP_BUNDLE`), if any.
  public let bundleID: BundleID?

  /// A manager for the files of `device`, for the app `bundleID` when given.
  public init(device: Device, bundleID: BundleID? = nil) {
    self.device = device
    self.bundleID = bundleID
  }

  /// Called by an atomic write between closing its temp file and renaming it into place, with the
  /// directory, the temp name and the final name; tests use it to make the rename fail. Set before
  /// the manager is used.
  package var beforeAtomicRename: ((DirectoryHandle, String, String) -> Void)?

  // MARK: Attributes

  /// The item's attributes as `FileManager` reports them, plus `.protectionKey` (its effective class).
  public func attributesOfItem(atPath path: String) throws -> [FileAttributeKey: Any] {
    try cocoa(writing: false) { () throws(ProtFSError) in
      let item = try device.resolve(path)
      let status = try device.status(item)
      var attributes: [FileAttributeKey: Any] = [
        .size: NSNumber(value: status.size),
        .posixPermissions: NSNumber(value: status.permissions.rawValue),
        .modificationDate: status.modified,
        .ownerAccountID: NSNumber(value: status.uid),
        .groupOwnerAccountID: NSNumber(value: status.gid),
        .systemNumber: NSNumber(value: status.device),
        .systemFileNumber: NSNumber(value: status.inode),
        .referenceCount: NSNumber(value: status.linkCount),
        .type: fileType(status.kind),
      ]
      if status.kind == .file || status.kind == .directory {
        attributes[.protectionKey] = try device.effectiveClass(of: item).protectionClass.fileProtectionType
      }
      return attributes
    }
  }

  /// Sets attributes; `.protectionKey` (a `FileProtectionType` or its raw string) sets the item's
  /// class, the other keys go to `FileManager`.
  public func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws {
    var rest = attributes
    if let value = rest.removeValue(forKey: .protectionKey) {
      try cocoa(writing: true) { () throws(ProtFSError) in
        let protectionClass = try Self.protectionClass(from: value, path: path)
        try device.setClass(protectionClass, of: try device.resolve(path))
      }
    }
    if !rest.isEmpty {
      _ = try cocoa(writing: true) { () throws(ProtFSError) in try device.resolve(path) }
      try FileManager.default.setAttributes(rest, ofItemAtPath: path)
    }
  }

  /// The item's effective class as a `FileProtectionType` (what `URLResourceValues.fileProtection` gives on iOS).
  public func fileProtection(ofItemAtPath path: String) throws -> FileProtectionType {
    try cocoa(writing: false) { () throws(ProtFSError) in
      try device.effectiveClass(of: try device.resolve(path)).protectionClass.fileProtectionType
    }
  }

  // MARK: Creating

  /// Creates a directory; `attributes[.protectionKey]` sets its class, otherwise it takes its parent's.
  /// Intermediate directories, when allowed, each take their parent's class.
  public func createDirectory(
    atPath path: String, withIntermediateDirectories createIntermediates: Bool,
    attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    try cocoa(writing: true) { () throws(ProtFSError) in
      let item = try device.resolve(path)
      let requested = try attributes?[.protectionKey].map { v throws(ProtFSError) in
        try Self.protectionClass(from: v, path: path)
      }
      let permissions = (attributes?[.posixPermissions] as? NSNumber).map { FilePermissions(rawValue: $0.uint32Value) }
      if (try? device.status(item)) == nil { try checkCreation(item) }
      if createIntermediates {
        var current = DevicePath.root
        for component in item.parent.components {
          current = current.appending(component)
          try device.createDirectory(current)
        }
        try device.createDirectory(
          item, protectionClass: requested, permissions: permissions ?? FilePermissions(rawValue: 0o755))
      } else {
        let created = try device.createDirectory(
          item, protectionClass: requested, permissions: permissions ?? FilePermissions(rawValue: 0o755))
        if !created {
          throw ProtFSError(.alreadyExists, "The directory '\(path)' already exists.", path: path, errno: EEXIST)
        }
      }
      if let permissions {
        let (parent, name) = try device.openParent(item)
        try parent.setPermissions(permissions, of: name)
      }
    }
  }

  /// URL form of `createDirectory(atPath:withIntermediateDirectories:attributes:)`.
  public func createDirectory(
    at url: URL, withIntermediateDirectories createIntermediates: Bool,
    attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    try createDirectory(atPath: url.path, withIntermediateDirectories: createIntermediates, attributes: attributes)
  }

  /// Creates (or replaces) a file, as `FileManager.createFile` does: returns false on failure.
  public func createFile(atPath path: String, contents data: Data?, attributes: [FileAttributeKey: Any]? = nil) -> Bool
  {
    do {
      var options: Data.WritingOptions = [.atomic]
      if let value = attributes?[.protectionKey] {
        options.insert(try Self.protectionClass(from: value, path: path).writingOption)
      }
      try write(data ?? Data(), toPath: path, options: options)
      if let permissions = attributes?[.posixPermissions] {
        try FileManager.default.setAttributes([.posixPermissions: permissions], ofItemAtPath: path)
      }
      return true
    } catch {
      return false
    }
  }

  // MARK: Reading and writing

  /// Writes `data` as `Data.write(to:options:)` does, honouring the protection bits of `options`.
  ///
  /// The class is the one the options select; without one, an existing file keeps its own class and a
  /// new file takes its parent directory's. With `.atomic`, the file is written under a temporary
  /// name, labelled, synced and renamed into place, so no reader sees it partial or unlabelled.
  public func write(_ data: Data, toPath path: String, options: Data.WritingOptions = []) throws {
    try cocoa(writing: true) { () throws(ProtFSError) in
      let item = try device.resolve(path)
      guard let name = item.name else {
        throw ProtFSError(.invalidArgument, "Cannot write to '\(path)': it is the device directory.", path: path)
      }
      let parent = try device.openDirectory(item.parent)
      let requested = try ProtectionClass(writingOptions: options)
      let existing = try? parent.status(name)
      if let existing, existing.kind != .file {
        throw ProtFSError(
          existing.kind == .symlink ? .symlink : .alreadyExists,
          "Cannot write to '\(path)': it is a \(existing.kind.rawValue).", path: path, errno: EEXIST)
      }
      if existing != nil && options.contains(.withoutOverwriting) {
        throw ProtFSError(.alreadyExists, "Cannot write to '\(path)': the file exists.", path: path, errno: EEXIST)
      }
      // docs/semantics.md §3: writing needs the file's class available, creating needs its directory's.
      try device.checkAccess(item, for: existing == nil ? .create : .write)
      var protectionClass = requested
      if protectionClass == nil, existing != nil { protectionClass = try parent.protectionClass(of: name) }
      if protectionClass == nil { protectionClass = try device.effectiveClass(of: item.parent).protectionClass }
      try writeFile(
        data, name: name, in: parent, protectionClass: protectionClass!, existing: existing != nil,
        options: options)
    }
  }

  private func writeFile(
    _ data: Data, name: String, in parent: DirectoryHandle, protectionClass: ProtectionClass,
    existing: Bool, options: Data.WritingOptions
  ) throws(ProtFSError) {
    let sealed = try sealedFiles(for: parent, path: parent.pathOf(name))
    if options.contains(.atomic) {
      let temporary = ".\(name).protfs-\(Kernel.getpid())-\(UInt32.random(in: 0...UInt32.max))"
      let file = try parent.openDescriptor(
        temporary, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o644))
      do throws(ProtFSError) {
        try protectionClass.write(toDescriptor: file.rawValue, path: parent.pathOf(name))
        try writeContents(data, to: file.rawValue, path: parent.pathOf(name), protectionClass, false, sealed)
        _ = try Kernel.fsync(file.rawValue).orThrow("sync", path: parent.pathOf(name))
        // Closed before the rename, once: a failure below must not close the number again, which
        // another thread may hold by then.
        file.close()
        beforeAtomicRename?(parent, temporary, name)
        let renamed =
          options.contains(.withoutOverwriting)
          ? Kernel.renameat2(parent.fd, temporary, parent.fd, name, .noReplace)
          : Kernel.renameat(parent.fd, temporary, parent.fd, name)
        _ = try renamed.orThrow("write", path: parent.pathOf(name))
        _ = Kernel.fsync(parent.fd)
      } catch {
        file.close()
        _ = Kernel.unlinkat(parent.fd, temporary, 0)
        throw error
      }
      return
    }
    var flags = O_WRONLY | O_CREAT | O_TRUNC
    if options.contains(.withoutOverwriting) { flags |= O_EXCL }
    let file = try parent.openDescriptor(name, flags: flags)
    defer { file.close() }
    if !existing || options.rawValue & Data.WritingOptions.fileProtectionMask.rawValue != 0 {
      try protectionClass.write(toDescriptor: file.rawValue, path: parent.pathOf(name))
    }
    try writeContents(data, to: file.rawValue, path: parent.pathOf(name), protectionClass, existing, sealed)
  }

  /// The contents of the file at `path`.
  public func contents(ofItemAtPath path: String) throws -> Data {
    try cocoa(writing: false) { () throws(ProtFSError) in
      let item = try device.resolve(path)
      let (parent, name) = try device.openParent(item)
      guard let name else {
        throw ProtFSError(.invalidArgument, "Cannot read '\(path)': it is the device directory.", path: path)
      }
      _ = try parent.status(name)
      try device.checkAccess(item, for: .read)
      return Data(try readContents(name, in: parent, path: parent.pathOf(name)))
    }
  }

  /// `FileManager.contents(atPath:)`: the contents, or nil on any failure.
  public func contents(atPath path: String) -> Data? { try? contents(ofItemAtPath: path) }

  // MARK: Moving and copying

  /// Moves an item inside the device. The class travels with it; across filesystems the item is
  /// copied with all its extended attributes, then the source removed. Fails if the destination exists.
  public func moveItem(atPath source: String, toPath destination: String) throws {
    try cocoa(writing: true) { () throws(ProtFSError) in
      let (from, fromName) = try openItemParent(source)
      let (to, toName) = try openItemParent(destination)
      switch Kernel.renameat2(from.fd, fromName, to.fd, toName, .noReplace) {
      case .success:
        return
      case .failure(let e) where e == .crossDevice:
        // Across filesystems the contents are read and written again, so the table applies.
        try device.checkAccess(try device.resolve(source), for: .read)
        try device.checkAccess(try device.resolve(destination), for: .create)
        try moveAcrossFileSystems(fromName, in: from, to: toName, in: to)
      case .failure(let e):
        throw ProtFSError.system("move '\(source)' to", path: destination, errno: e)
      }
    }
  }

  /// URL form of `moveItem(atPath:toPath:)`.
  public func moveItem(at source: URL, to destination: URL) throws {
    try moveItem(atPath: source.path, toPath: destination.path)
  }

  /// Copies an item inside the device, keeping the source's class, or giving the copy (and, for a
  /// directory, everything in it) `protection` when the caller asks. Fails if the destination exists.
  public func copyItem(atPath source: String, toPath destination: String, protection: FileProtectionType? = nil) throws
  {
    try cocoa(writing: true) { () throws(ProtFSError) in
      let requested = try protection.map { p throws(ProtFSError) in try Self.protectionClass(from: p, path: destination)
      }
      let (from, fromName) = try openItemParent(source)
      let (to, toName) = try openItemParent(destination)
      try device.checkAccess(try device.resolve(source), for: .read)
      try device.checkAccess(try device.resolve(destination), for: .create)
      try ItemCopier.copy(fromName, in: from, to: toName, in: to)
      try adoptCopiedKeys(of: fromName, in: from, copy: toName, in: to, requested: requested)
      if let requested {
        try device.setClass(requested, of: try device.resolve(destination), recursive: true)
      }
    }
  }

  /// Removes an item and everything below it. Never gated by the class: metadata operations never are.
  public func removeItem(atPath path: String) throws {
    try cocoa(writing: true) { () throws(ProtFSError) in
      let (parent, name) = try openItemParent(path)
      try parent.removeTree(name)
    }
  }

  /// Whether an item exists at `path` inside the device (symlinks are not followed).
  public func fileExists(atPath path: String) -> Bool {
    guard let item = try? device.resolve(path) else { return false }
    return (try? device.status(item)) != nil
  }

  /// Creating a directory, and each missing ancestor, needs its parent's class available.
  private func checkCreation(_ item: DevicePath) throws(ProtFSError) {
    var current = item
    while !current.isRoot, (try? device.status(current.parent)) == nil { current = current.parent }
    try device.checkAccess(current, for: .create)
  }

  private func openItemParent(_ path: String) throws(ProtFSError) -> (DirectoryHandle, String) {
    let item = try device.resolve(path)
    guard let name = item.name else {
      throw ProtFSError(.invalidArgument, "'\(path)' is the device directory itself.", path: path)
    }
    return (try device.openDirectory(item.parent), name)
  }

  // MARK: Helpers

  package static func protectionClass(from value: Any, path: String) throws(ProtFSError) -> ProtectionClass {
    let raw: String? =
      (value as? FileProtectionType)?.rawValue ?? (value as? String) ?? (value as? ProtectionClass)?.rawValue
    guard let raw, let result = ProtectionClass(rawValue: raw) ?? ProtectionClass(parsing: raw) else {
      throw ProtFSError(
        .invalidArgument,
        "The value \(String(describing: value)) for .protectionKey of '\(path)' is not a protection class.",
        path: path)
    }
    return result
  }

  private func fileType(_ kind: FileKind) -> FileAttributeType {
    switch kind {
    case .file: .typeRegular
    case .directory: .typeDirectory
    case .symlink: .typeSymbolicLink
    case .other, .unknown: .typeUnknown
    }
  }

  /// Runs `body`, turning its error into the `CocoaError` Foundation throws for a read or a write.
  private func cocoa<T>(writing: Bool, _ body: () throws(ProtFSError) -> T) throws -> T {
    do { return try body() } catch { throw (whatIsMissing(for: error) ?? error).cocoaError(writing: writing) }
  }

  /// For a path not found because the device was never initialised, or because the app's container
  /// was never made (`Device.createContainer(_:defaultClass:)`, `protfs init`), the error that says
  /// so and how to fix it; nil for anything else, whose own error stands.
  private func whatIsMissing(for error: ProtFSError) -> ProtFSError? {
    guard error.code == .notFound, let path = error.path else { return nil }
    do {
      try device.requireInitialized()
      if let container = device.containerContaining(try device.resolve(path)) { try container.requireExists() }
    } catch {
      return error
    }
    return nil
  }
}

extension ProtFSError {
  /// The `CocoaError` Foundation would throw for this failure: for example 257
  /// (`NSFileReadNoPermissionError`) or 513 (`NSFileWriteNoPermissionError`) for EPERM, as iOS does
  /// for protected data; 4 / 260 for a missing file; 516 for an existing one.
  public func cocoaError(writing: Bool) -> CocoaError {
    let code: CocoaError.Code
    switch self.code {
    case .notFound: code = writing ? .fileNoSuchFile : .fileReadNoSuchFile
    case .alreadyExists: code = .fileWriteFileExists
    case .permissionDenied, .protectedDataUnavailable: code = writing ? .fileWriteNoPermission : .fileReadNoPermission
    case .invalidArgument, .outsideDevice, .symlink:
      code = writing ? .fileWriteInvalidFileName : .fileReadInvalidFileName
    case .corruptAttribute, .malformed: code = writing ? .fileWriteUnknown : .fileReadCorruptFile
    default: code = writing ? .fileWriteUnknown : .fileReadUnknown
    }
    var info: [String: Any] = [NSLocalizedDescriptionKey: description]
    if let path { info[NSFilePathErrorKey] = path }
    if let errno { info[NSUnderlyingErrorKey] = NSError(domain: NSPOSIXErrorDomain, code: Int(errno)) }
    return CocoaError(code, userInfo: info)
  }
}

extension Data {
  /// `write(to:options:)` on a protfs device: the protection bits of `options` are honoured
  /// (see `ProtectedFileManager.write(_:toPath:options:)`).
  public func write(to url: URL, options: Data.WritingOptions = [], using fileManager: ProtectedFileManager) throws {
    try fileManager.write(self, toPath: url.path, options: options)
  }

  /// `Data(contentsOf:)` on a protfs device.
  public init(contentsOf url: URL, using fileManager: ProtectedFileManager) throws {
    self = try fileManager.contents(ofItemAtPath: url.path)
  }
}
