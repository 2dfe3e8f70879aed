@_exported import Foundation
import ProtFS
import ProtFSFoundation

/// Foundation's `FileManager` for a ProtFSKit program, protection-aware as on iOS: files created
/// take their directory's class or the one asked for, `setAttributes([.protectionKey: …])` sets a
/// class, `attributesOfItem` reports `.protectionKey`, moves keep the class, and `urls(for:in:)`
/// gives the app's container directories (ProtFSFoundation's `ProtectedFileManager`, on the device
/// `PROTFS_DEVICE` names). Paths outside the device go to Foundation's manager.
///
/// A client importing both Foundation and ProtFSKit adds `import class ProtFSKit.FileManager`,
/// which Swift prefers over the module-wide `import Foundation` (without it `FileManager` is
/// ambiguous: Swift never lets one module's type shadow another's that it re-exports).
public final class FileManager: @unchecked Sendable {
  /// The search-path directories, Foundation's.
  public typealias SearchPathDirectory = Foundation.FileManager.SearchPathDirectory
  /// The search-path domains, Foundation's.
  public typealias SearchPathDomainMask = Foundation.FileManager.SearchPathDomainMask
  /// Directory enumeration options, Foundation's.
  public typealias DirectoryEnumerationOptions = Foundation.FileManager.DirectoryEnumerationOptions

  /// The manager of the app's device.
  public static let `default` = FileManager(
    ProtectedFileManager(device: Device.locate(explicit: nil, environment: ProcessInfo.processInfo.environment)))

  /// The protection-aware manager underneath.
  public let protected: ProtectedFileManager
  private let plain = Foundation.FileManager.default

  /// A manager over `protected`.
  public init(_ protected: ProtectedFileManager) { self.protected = protected }

  /// Whether `path` lies inside the device.
  private func onDevice(_ path: String) -> Bool {
    let root = protected.device.root
    let absolute = Device.normalize(path, relativeTo: plain.currentDirectoryPath)
    return absolute == root || absolute.hasPrefix(root + "/")
  }

  /// The app's directories (Documents, Library, Caches, Application Support) in its container.
  public func urls(for directory: SearchPathDirectory, in domainMask: SearchPathDomainMask) -> [URL] {
    protected.urls(for: directory, in: domainMask)
  }

  /// The temporary directory.
  public var temporaryDirectory: URL { plain.temporaryDirectory }
  /// The current directory.
  public var currentDirectoryPath: String { plain.currentDirectoryPath }

  /// Whether an item exists at `path` (symlinks on the device are not followed).
  public func fileExists(atPath path: String) -> Bool {
    onDevice(path) ? protected.fileExists(atPath: path) : plain.fileExists(atPath: path)
  }

  /// Whether an item exists at `path`, and whether it is a directory.
  public func fileExists(atPath path: String, isDirectory: UnsafeMutablePointer<ObjCBool>?) -> Bool {
    plain.fileExists(atPath: path, isDirectory: isDirectory)
  }

  /// Whether `path` is an executable regular file.
  public func isExecutableFile(atPath path: String) -> Bool {
    onDevice(path) ? protected.isExecutableFile(atPath: path) : plain.isExecutableFile(atPath: path)
  }

  /// Creates a directory; `.protectionKey` in `attributes` sets its class, otherwise its parent's.
  public func createDirectory(
    atPath path: String, withIntermediateDirectories createIntermediates: Bool,
    attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    guard onDevice(path) else {
      return try plain.createDirectory(
        atPath: path, withIntermediateDirectories: createIntermediates, attributes: attributes)
    }
    try protected.createDirectory(
      atPath: path, withIntermediateDirectories: createIntermediates, attributes: attributes)
  }

  /// URL form of `createDirectory(atPath:withIntermediateDirectories:attributes:)`.
  public func createDirectory(
    at url: URL, withIntermediateDirectories createIntermediates: Bool, attributes: [FileAttributeKey: Any]? = nil
  ) throws {
    try createDirectory(atPath: url.path, withIntermediateDirectories: createIntermediates, attributes: attributes)
  }

  /// Creates or replaces a file; `.protectionKey` sets its class, otherwise its directory's.
  @discardableResult
  public func createFile(atPath path: String, contents data: Data?, attributes: [FileAttributeKey: Any]? = nil) -> Bool
  {
    onDevice(path)
      ? protected.createFile(atPath: path, contents: data, attributes: attributes)
      : plain.createFile(atPath: path, contents: data, attributes: attributes)
  }

  /// The file's contents, nil on failure (a protected file while locked).
  public func contents(atPath path: String) -> Data? {
    onDevice(path) ? protected.contents(atPath: path) : plain.contents(atPath: path)
  }

  /// The item's attributes, with `.protectionKey` on the device.
  public func attributesOfItem(atPath path: String) throws -> [FileAttributeKey: Any] {
    onDevice(path) ? try protected.attributesOfItem(atPath: path) : try plain.attributesOfItem(atPath: path)
  }

  /// Sets attributes; `.protectionKey` sets the class.
  public func setAttributes(_ attributes: [FileAttributeKey: Any], ofItemAtPath path: String) throws {
    onDevice(path)
      ? try protected.setAttributes(attributes, ofItemAtPath: path)
      : try plain.setAttributes(attributes, ofItemAtPath: path)
  }

  /// Moves an item; on the device it keeps its class.
  public func moveItem(atPath source: String, toPath destination: String) throws {
    if onDevice(source) && onDevice(destination) {
      try protected.moveItem(atPath: source, toPath: destination)
    } else {
      try plain.moveItem(atPath: source, toPath: destination)
    }
  }

  /// URL form of `moveItem(atPath:toPath:)`.
  public func moveItem(at source: URL, to destination: URL) throws {
    try moveItem(atPath: source.path, toPath: destination.path)
  }

  /// Copies an item; on the device the copy keeps the source's class.
  public func copyItem(atPath source: String, toPath destination: String) throws {
    if onDevice(source) && onDevice(destination) {
      try protected.copyItem(atPath: source, toPath: destination)
    } else {
      try plain.copyItem(atPath: source, toPath: destination)
    }
  }

  /// URL form of `copyItem(atPath:toPath:)`.
  public func copyItem(at source: URL, to destination: URL) throws {
    try copyItem(atPath: source.path, toPath: destination.path)
  }

  /// Removes an item and everything below it.
  public func removeItem(atPath path: String) throws {
    onDevice(path) ? try protected.removeItem(atPath: path) : try plain.removeItem(atPath: path)
  }

  /// URL form of `removeItem(atPath:)`.
  public func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }

  /// The names in a directory.
  public func contentsOfDirectory(atPath path: String) throws -> [String] {
    try plain.contentsOfDirectory(atPath: path)
  }

  /// The URLs in a directory.
  public func contentsOfDirectory(
    at url: URL, includingPropertiesForKeys keys: [URLResourceKey]?, options mask: DirectoryEnumerationOptions = []
  ) throws -> [URL] {
    try plain.contentsOfDirectory(at: url, includingPropertiesForKeys: keys, options: mask)
  }
}
