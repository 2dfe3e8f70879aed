@_exported import Foundation
import ProtFS
import ProtFSFoundation
import ProtFSSystem

/// Foundation's `FileManager.default`, protection-aware as on iOS, so that iOS code compiles and
/// behaves unchanged: `FileManager.default.createDirectory(atPath:…, attributes:
/// [.protectionKey: …])` sets the class, files created take their directory's class or the one
/// asked for, `setAttributes([.protectionKey: …])` sets a class, `attributesOfItem` reports
/// `.protectionKey`, moves and copies keep the class, and `urls(for:in:)` gives the app's
/// container directories (ProtFSFoundation's `ProtectedFileManager`, on the device
/// `PROTFS_DEVICE` names). Paths outside the device go to Foundation's own implementation.
///
/// How it fits beside Foundation: a ProtFSKit program's `FileManager` is Foundation's class, and
/// `FileManager.default` is this subclass. Swift prefers the static property of this extension,
/// whose type is the more specific one, and every method iOS code calls is an override, so it is
/// reached through any `FileManager` reference. Nothing shadows a Foundation name.
///
/// `@unchecked Sendable`: it adds only the immutable `protected` to Foundation's `FileManager`,
/// which is `@unchecked Sendable` itself.
public final class ProtectionAwareFileManager: Foundation.FileManager, @unchecked Sendable {
  /// The protection-aware manager underneath.
  public let protected: ProtectedFileManager

  /// A manager over `protected`.
  public init(_ protected: ProtectedFileManager) {
    self.protected = protected
    super.init()
  }

  /// Whether `path` lies inside the device.
  private func onDevice(_ path: String) -> Bool {
    let root = protected.device.root
    let absolute = Device.normalize(path, relativeTo: currentDirectoryPath)
    return absolute == root || absolute.hasPrefix(root + "/")
  }

  /// The app's directories (Documents, Library, Caches, Application Support) in its container;
  /// Foundation's answer when the program is not an app.
  public override func urls(for directory: SearchPathDirectory, in domainMask: SearchPathDomainMask) -> [URL] {
    let inContainer = protected.urls(for: directory, in: domainMask)
    return inContainer.isEmpty ? super.urls(for: directory, in: domainMask) : inContainer
  }

  /// Whether an item exists at `path` (symlinks on the device are not followed).
  public override func fileExists(atPath path: String) -> Bool {
    onDevice(path) ? protected.fileExists(atPath: path) : super.fileExists(atPath: path)
  }

  /// Whether the caller may execute `path`: a file it may run or a directory it may search, as
  /// `access(2)` with `X_OK` answers on Apple's platforms (Linux Foundation's is false for a
  /// directory).
  public override func isExecutableFile(atPath path: String) -> Bool {
    onDevice(path)
      ? protected.isExecutableFile(atPath: path) : (try? Kernel.access(path, X_OK).get()) != nil
  }

  /// Creates a directory; `.protectionKey` in `attributes` sets its class, otherwise its parent's.
  public override func createDirectory(
    atPath path: String, withIntermediateDirectories createIntermediates: Bool,
    attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    guard onDevice(path) else {
      return try super.createDirectory(
        atPath: path, withIntermediateDirectories: createIntermediates, attributes: attributes)
    }
    try protected.createDirectory(
      atPath: path, withIntermediateDirectories: createIntermediates, attributes: attributes)
  }

  /// URL form of `createDirectory(atPath:withIntermediateDirectories:attributes:)`.
  public override func createDirectory(
    at url: URL, withIntermediateDirectories createIntermediates: Bool, attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    try createDirectory(atPath: url.path, withIntermediateDirectories: createIntermediates, attributes: attributes)
  }

  /// Creates or replaces a file; `.protectionKey` sets its class, otherwise its directory's.
  public override func createFile(
    atPath path: String, contents data: Data?, attributes: [FileAttributeKey: Any]? = nil
  ) -> Bool {
    onDevice(path)
      ? protected.createFile(atPath: path, contents: data, attributes: attributes)
      : super.createFile(atPath: path, contents: data, attributes: attributes)
  }

  /// The file's contents, nil on failure (a protected file while locked).
  public override func contents(atPath path: String) -> Data? {
    onDevice(path) ? protected.contents(atPath: path) : super.contents(atPath: path)
  }

  /// The item's attributes, with `.protectionKey` on the device.
  public override func attributesOfItem(atPath path: String) throws -> [FileAttributeKey: Any] {
    onDevice(path) ? try protected.attributesOfItem(atPath: path) : try super.attributesOfItem(atPath: path)
  }

  /// Sets attributes; `.protectionKey` sets the class.
  public override func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws {
    onDevice(path)
      ? try protected.setAttributes(attributes, ofItemAtPath: path)
      : try super.setAttributes(attributes, ofItemAtPath: path)
  }

  /// Moves an item; on the device it keeps its class.
  public override func moveItem(atPath source: String, toPath destination: String) throws {
    if onDevice(source) && onDevice(destination) {
      try protected.moveItem(atPath: source, toPath: destination)
    } else {
      try super.moveItem(atPath: source, toPath: destination)
    }
  }

  /// URL form of `moveItem(atPath:toPath:)`.
  public override func moveItem(at source: URL, to destination: URL) throws {
    try moveItem(atPath: source.path, toPath: destination.path)
  }

  /// Copies an item; on the device the copy keeps the source's class.
  public override func copyItem(atPath source: String, toPath destination: String) throws {
    if onDevice(source) && onDevice(destination) {
      try protected.copyItem(atPath: source, toPath: destination)
    } else {
      try super.copyItem(atPath: source, toPath: destination)
    }
  }

  /// URL form of `copyItem(atPath:toPath:)`.
  public override func copyItem(at source: URL, to destination: URL) throws {
    try copyItem(atPath: source.path, toPath: destination.path)
  }

  /// Removes an item and everything below it.
  public override func removeItem(atPath path: String) throws {
    onDevice(path) ? try protected.removeItem(atPath: path) : try super.removeItem(atPath: path)
  }

  /// URL form of `removeItem(atPath:)`.
  public override func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }
}

extension Foundation.FileManager {
  /// The protection-aware manager of the app's device (`ProtectionAwareFileManager`).
  public static var `default`: ProtectionAwareFileManager { protectionAwareManager }
}

/// The one manager `FileManager.default` gives.
private let protectionAwareManager = ProtectionAwareFileManager(
  ProtectedFileManager(device: Device.locate(explicit: nil, environment: ProcessEnvironment.all())))
