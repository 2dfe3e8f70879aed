import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// A session on a device: every directory is opened from the device root with `openat2`
/// (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), or component by component with `O_NOFOLLOW` where the
/// kernel lacks it; every file gets its directory's effective class, and, when protfs runs as root,
/// the container owner's uid and gid so that the app can rewrite what it downloaded.
///
/// On a sealed device (docs/sealed.md) every file it makes gets a key for its class
/// (`SealingDownloadFileSystem`), and a file placed where another class applies has its key rewrapped
/// with the label.
public final class DeviceDownloadFileSystem: DownloadFileSystem, SealingDownloadFileSystem {
  /// The device.
  public let device: Device
  /// Whether to try `openat2` first; off, every directory is opened by the component walk, as on a
  /// kernel without it (the tests exercise both).
  package let usesOpenat2: Bool
  /// The device root, opened on first use and held for the session: every directory is opened
  /// beneath it, thousands of times a run.
  private let heldRoot = Mutex<DirectoryHandle?>(nil)
  /// Each container's owner, looked up once per session: every file a download makes is handed
  /// to it, and opening the container root for each file cost a third of a small file's opens.
  /// A container given to another owner while a session runs gets its files at the next session.
  private let containerOwners = Mutex<[DevicePath: (uid: UInt32, gid: UInt32)]>([:])
  /// The device paths of the plain absolute paths below the root resolved so far: a session
  /// resolves the same few directories several times per file, and for such a path the answer
  /// depends on the text alone.
  private let resolved = Mutex<[String: Resolved]>([:])
  /// Whether protfs runs as root (and so hands files to their container's owner), read once.
  private let runsAsRoot = Kernel.geteuid() == 0
  /// The device's sealed files, looked for once per session: nil until then, `.some(nil)` on a
  /// device that is not sealed.
  private let sealed = Mutex<SealedFiles??>(nil)

  /// The file system of `device`.
  public convenience init(device: Device) { self.init(device: device, usesOpenat2: true) }

  package init(device: Device, usesOpenat2: Bool) {
    self.device = device
    self.usesOpenat2 = usesOpenat2
  }

  /// A path resolved on the device, with the path of the container it is in (if any).
  private struct Resolved {
    /// `device.resolve(path)`.
    var location: DevicePath
    /// The path of the container holding `location`, whose owner gets the files made there.
    var container: DevicePath?
    /// `location` relative to the device root, as `openat2` takes it.
    var relative: String
    /// `location`'s absolute path, for the handle and messages.
    var absolute: String

    /// `location` on `device`, with its container when `withContainer`.
    init(_ location: DevicePath, on device: Device, withContainer: Bool) {
      self.location = location
      container = withContainer ? device.containerContaining(location)?.path : nil
      relative = location.components.joined(separator: "/")
      absolute = device.absolutePath(location)
    }
  }

  /// `device.resolve(path)` and its container, remembered for an absolute path below the device
  /// root without `.`, `..` or empty components (which resolves the same way every time).
  private func resolve(_ path: String) throws(ProtFSError) -> Resolved {
    if let known = resolved.withLock({ $0[path] }) { return known }
    let location = Resolved(try device.resolve(path), on: device, withContainer: true)
    let below = device.root.hasSuffix("/") ? device.root : device.root + "/"
    let plain = path.dropFirst(below.count).split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
      !$0.isEmpty && $0 != "." && $0 != ".."
    }
    if path.hasPrefix(below), plain {
      resolved.withLock { cache in
        if cache.count < 256 { cache[path] = location }
      }
    }
    return location
  }

  private func root() throws(ProtFSError) -> DirectoryHandle {
    if let root = heldRoot.withLock({ $0 }) { return root }
    let root = try device.openRoot()
    heldRoot.withLock { $0 = root }
    return root
  }

  /// Opens the directory at `path`, which must be inside the device, following no symbolic link.
  public func openDirectory(_ path: String, creating: Bool) throws(ProtFSError) -> DirectoryHandle {
    let resolved = try resolve(path)
    do {
      return try open(resolved)
    } catch  where creating && error.errno == ENOENT {
      try device.createDirectories(resolved.location)
      return try open(resolved)
    }
  }

  /// Opens the directory at `location` beneath the held root, following no symbolic link.
  private func open(_ location: DevicePath) throws(ProtFSError) -> DirectoryHandle {
    try open(Resolved(location, on: device, withContainer: false))
  }

  /// Opens the directory `resolved` names beneath the held root, following no symbolic link.
  private func open(_ resolved: Resolved) throws(ProtFSError) -> DirectoryHandle {
    let location = resolved.location
    guard usesOpenat2 else { return try device.openDirectory(location) }
    let root = try root()
    if location.isRoot { return try root.duplicate() }
    let relative = resolved.relative
    let absolute = resolved.absolute
    let resolve: Kernel.Resolve = [.beneath, .noSymlinks, .noMagicLinks]
    switch Kernel.openat2(root.fd, relative, O_RDONLY | O_DIRECTORY | O_CLOEXEC, resolve: resolve)
    {
    case .success(let fd):
      return DirectoryHandle(fd: fd, path: absolute)
    case .failure(let e) where e == .noSystemCall || e.rawValue == E2BIG || e == .notPermitted:
      // No openat2 (or a seccomp filter refusing it): the component walk is as strict, if slower.
      return try device.openDirectory(location)
    case .failure(let e) where e == .tooManySymlinks || e == .notDirectory || e == .crossDevice:
      // The walk names the component that is a link or not a directory.
      _ = try device.openDirectory(location)
      throw ProtFSError(
        .symlink, "Cannot open '\(absolute)': it passes through a symbolic link, which protfs does not follow.",
        path: absolute, errno: ELOOP)
    case .failure(let e):
      throw ProtFSError.system("open the directory", path: absolute, errno: e)
    }
  }

  /// Opens the file through the device's held directories (`Device.openFile`) and reads its class
  /// from what was opened.
  public func openSource(_ path: String) throws(ProtFSError) -> (FileDescriptor, ProtectionClass?) {
    let (file, effective) = try device.openFile(try device.resolve(path)) { directory, name throws(ProtFSError) in
      try directory.openSourceFile(name)
    }
    return (file, effective.protectionClass)
  }

  /// Opens (creating) the Uploads directory and gives it the Downloads directory's own class when
  /// that has one and the Uploads directory's differs.
  public func openUploadsDirectory(_ path: String, like downloads: String) throws(ProtFSError) -> DirectoryHandle {
    let uploads = try openDirectory(path, creating: true)
    guard let wanted = try? openDirectory(downloads, creating: false).protectionClass(),
      (try uploads.protectionClass()) != wanted
    else { return uploads }
    try device.setClass(wanted, of: try device.resolve(uploads.path))
    return uploads
  }

  /// The device's sealed files with the keys its state allows now; nil when it is not sealed. Whether
  /// it is sealed is read once per session; the keys at each call (the state changes meanwhile).
  package func sealedFiles() throws(ProtFSError) -> SealedFiles? {
    let files: SealedFiles?
    if let known = sealed.withLock({ $0 }) {
      files = known
    } else {
      files = try SealedFiles(device: device)
      sealed.withLock { $0 = .some(files) }
    }
    guard let files else { return nil }
    files.apply(try device.protectionState())
    return files
  }

  /// The class `labelNew(file:for:)` gives a file made in `directory` now.
  package func newFileClass(in directory: DirectoryHandle) throws(ProtFSError) -> ProtectionClass {
    try labelling(for: directory).value
  }

  /// Writes `directory`'s effective class as the file's own, and hands it to the container's owner
  /// when protfs runs as root.
  public func label(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError) {
    let (value, owner) = try labelling(for: directory)
    // Its owner and group matter only where it is handed to the container's owner.
    var status = stat()
    if owner != nil {
      _ = try Kernel.fstat(fd, &status).orThrow("read a new file in", path: directory.path)
    }
    try Self.relabel(fd, status: status, value: value, owner: owner, path: directory.path, sealed: sealing())
  }

  /// Labels the file as `label(file:for:)` does, with its owner and group from `status`.
  public func label(file fd: Int32, status: stat, for directory: DirectoryHandle) throws(ProtFSError) {
    let (value, owner) = try labelling(for: directory)
    try Self.relabel(fd, status: status, value: value, owner: owner, path: directory.path, sealed: sealing())
  }

  /// Labels a file this process has just made without reading its label (it has none) or its
  /// owner (this process): two calls fewer for each file a download makes.
  public func labelNew(file fd: Int32, for directory: DirectoryHandle) throws(ProtFSError) {
    let (value, owner) = try labelling(for: directory)
    try Self.write(value, owner: owner, to: fd, path: directory.path)
  }

  /// Compares the file's own label (and, as root, its owner) with what `labelNew(file:for:)`
  /// would give a file made in `directory` now.
  public func isLabelledAsNew(file fd: Int32, status: stat, in directory: DirectoryHandle) -> Bool {
    guard let (value, owner) = try? labelling(for: directory) else { return false }
    if let owner, status.st_uid != owner.uid || status.st_gid != owner.gid { return false }
    return withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer in
      let read = Kernel.getAttribute(dirfd: fd, name: nil, attribute: AttributeName.protectionClass, into: buffer)
      guard case .success(let count) = read else { return false }
      return ProtectionClass(attributeBytes: UnsafeRawBufferPointer(rebasing: buffer[..<count])) == value
    }
  }

  /// Reads what each file in `directory` gets once, and gives it to every file it is handed.
  public func labels(for directory: DirectoryHandle) throws(ProtFSError) -> FileLabels {
    let (value, owner) = try labelling(for: directory)
    let path = directory.path
    let sealed = try sealing()
    return FileLabels(
      new: { fd throws(ProtFSError) in try Self.write(value, owner: owner, to: fd, path: path) },
      placed: { fd, status throws(ProtFSError) in
        try Self.relabel(fd, status: status, value: value, owner: owner, path: path, sealed: sealed)
      })
  }

  /// The class files in `directory` get, and the owner they are handed to (when protfs runs as
  /// root and the directory is in a container).
  private func labelling(for directory: DirectoryHandle) throws(ProtFSError)
    -> (value: ProtectionClass, owner: (uid: UInt32, gid: UInt32)?)
  {
    let resolved = try resolve(directory.path)
    // The directory's own class, read through the held descriptor, is its effective one; only an
    // unlabelled directory needs the walk up its ancestors (one call per file instead of a dozen).
    var protectionClass = try directory.protectionClass()
    if protectionClass == nil { protectionClass = try device.effectiveClass(of: resolved.location).protectionClass }
    let value = protectionClass!
    guard runsAsRoot, let container = resolved.container else { return (value, nil) }
    if let known = containerOwners.withLock({ $0[container] }) { return (value, known) }
    let status = try open(container).status()
    let owner = (status.uid, status.gid)
    containerOwners.withLock { $0[container] = owner }
    return (value, owner)
  }

  /// Writes the label `value` to the new file `fd` in the directory at `path`, and hands it to
  /// `owner`.
  private static func write(
    _ value: ProtectionClass, owner: (uid: UInt32, gid: UInt32)?, to fd: Int32, path: String
  ) throws(ProtFSError) {
    try value.write(to: .descriptor(fd, pathOnly: false)).orThrow(
      "set the protection class of a new file in", path: path)
    guard let owner else { return }
    _ = try Kernel.fchown(fd, owner.uid, owner.gid).orThrow(
      "give the container's owner a new file in", path: path)
  }

  /// Gives the file `fd` (read as `status`) the label `value` unless it has it, and hands it to
  /// `owner` unless it is theirs. On a sealed device (`sealed`) a sealed file's key is rewrapped for
  /// `value` first: a class change that cannot rewrap (its key evicted) changes nothing.
  private static func relabel(
    _ fd: Int32, status: stat, value: ProtectionClass, owner: (uid: UInt32, gid: UInt32)?, path: String,
    sealed: SealedFiles?
  ) throws(ProtFSError) {
    // A file placed where its temp directory's class also applies has its label already: reading
    // it is cheaper than writing it again (a journalled inode change per file).
    let labelled =
      withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer in
        let read = Kernel.getAttribute(dirfd: fd, name: nil, attribute: AttributeName.protectionClass, into: buffer)
        guard case .success(let count) = read else { return false }
        return ProtectionClass(attributeBytes: UnsafeRawBufferPointer(rebasing: buffer[..<count])) == value
      }
    if !labelled {
      if let sealed, SealedFiles.hasRecord(fd) {
        do { try sealed.rewrap(fd, to: value) } catch { throw error.protfsError(path: path) }
      }
      try value.write(to: .descriptor(fd, pathOnly: false)).orThrow(
        "set the protection class of a new file in", path: path)
    }
    guard let owner, status.st_uid != owner.uid || status.st_gid != owner.gid else { return }
    _ = try Kernel.fchown(fd, owner.uid, owner.gid).orThrow(
      "give the container's owner a new file in", path: path)
  }
}
