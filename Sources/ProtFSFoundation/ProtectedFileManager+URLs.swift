import Foundation
import ProtFS
import ProtFSSystem

/// The `FileManager` calls iOS code makes with URLs and search-path directories, so that such code
/// ports by changing the manager it calls.
extension ProtectedFileManager {
  /// The app's directories as iOS gives them (`.documentDirectory` is `<container>/Documents`,
  /// `.libraryDirectory` `Library`, `.cachesDirectory` `Library/Caches`,
  /// `.applicationSupportDirectory` `Library/Application Support`); empty for other directories,
  /// other domains, or when no app is known (no `bundleID` and not run by `protfs app`).
  public func urls(for directory: FileManager.SearchPathDirectory, in domainMask: FileManager.SearchPathDomainMask)
    -> [URL]
  {
    guard domainMask.contains(.userDomainMask), let app = appBundleID else { return [] }
    let relative: String
    switch directory {
    case .documentDirectory: relative = "Documents"
    case .libraryDirectory: relative = "Library"
    case .cachesDirectory: relative = "Library/Caches"
    case .applicationSupportDirectory: relative = "Library/Application Support"
    default: return []
    }
    let root = device.container(app).absolutePath
    return [URL(fileURLWithPath: root + "/" + relative, isDirectory: true)]
  }

  /// The bundle id `urls(for:in:)` answers for.
  private var appBundleID: BundleID? {
    if let bundleID { return bundleID }
    return ProcessEnvironment.value("PROTFS_APP_BUNDLE").flatMap { try? BundleID($0) }
  }

  /// As `removeItem(atPath:)`, for a file URL.
  public func removeItem(at url: URL) throws { try removeItem(atPath: url.path) }

  /// As `copyItem(atPath:toPath:protection:)`, for file URLs; the copy keeps the source's class.
  public func copyItem(at source: URL, to destination: URL) throws {
    try copyItem(atPath: source.path, toPath: destination.path)
  }

  /// Whether the caller may execute the item at `path`, as Apple's `access(2)` with `X_OK`: a
  /// regular file it may run, or a directory it may search (which iOS code tests before writing
  /// into one). Never follows a symlink; false for anything outside the device.
  public func isExecutableFile(atPath path: String) -> Bool {
    guard let item = try? device.resolve(path), let name = item.name,
      let parent = try? device.openDirectory(item.parent),
      let kind = (try? parent.status(name))?.kind, kind == .file || kind == .directory
    else { return false }
    return (try? Kernel.faccessat(parent.fd, name, X_OK, AT_SYMLINK_NOFOLLOW).get()) != nil
  }
}
