import Foundation
import ProtFSSystem

/// A simulated iOS device: a directory whose `Containers/` holds app containers and whose
/// `.protfs/` holds protfs's own state.
public struct Device: Sendable, Hashable {
  /// The device directory, absolute and lexically normalised.
  public let root: String

  /// Where protfs keeps its own state, relative to the root.
  public static let stateDirectoryName = ".protfs"
  /// Where app containers live, relative to the root.
  public static let containersDirectoryName = "Containers"
  /// The marker file whose presence means the device was initialised.
  package static let markerName = "device.json"

  /// A device rooted at `path`; a relative path is taken from the current directory.
  public init(root path: String) {
    root = Device.normalize(path, relativeTo: FileManager.default.currentDirectoryPath)
  }

  /// The device directory a command uses: `--device`, else `PROTFS_DEVICE`, else
  /// `$XDG_DATA_HOME/protfs/device`, else `~/.local/share/protfs/device`.
  public static func locate(explicit: String?, environment: [String: String]) -> Device {
    if let explicit, !explicit.isEmpty { return Device(root: explicit) }
    if let fromEnvironment = environment["PROTFS_DEVICE"], !fromEnvironment.isEmpty {
      return Device(root: fromEnvironment)
    }
    if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
      return Device(root: dataHome + "/protfs/device")
    }
    let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    return Device(root: home + "/.local/share/protfs/device")
  }

  /// `path` made absolute against `base`, with `.`, `..` and repeated slashes resolved lexically.
  public static func normalize(_ path: String, relativeTo base: String) -> String {
    let absolute = path.hasPrefix("/") ? path : base + "/" + path
    if absolute.utf8.withContiguousStorageIfAvailable(isNormalAbsolute) == true { return absolute }
    return String(decoding: normalize(bytes: Array(absolute.utf8), relativeTo: []), as: UTF8.self)
  }

  /// `path`, bytes that may not be UTF-8, made absolute against `base` and resolved lexically as
  /// `normalize(_:relativeTo:)` does.
  public static func normalize(bytes path: [UInt8], relativeTo base: [UInt8]) -> [UInt8] {
    let slash = UInt8(ascii: "/")
    let absolute = path.first == slash ? path : base + [slash] + path
    if absolute.withUnsafeBufferPointer(isNormalAbsolute) { return absolute }
    var parts: [ArraySlice<UInt8>] = []
    for part in absolute.split(separator: slash) {
      if part.elementsEqual(".".utf8) { continue }
      if part.elementsEqual("..".utf8) {
        _ = parts.popLast()
      } else {
        parts.append(part)
      }
    }
    return [slash] + Array(parts.joined(separator: [slash]))
  }

  /// Whether `bytes` (a path starting with "/") have no empty, `.` or `..` component and no
  /// trailing slash, so that `normalize` would return them unchanged: one pass.
  private static func isNormalAbsolute(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard bytes.count > 1 else { return true }
    var componentStart = 1
    for i in 1...bytes.count where i == bytes.count || bytes[i] == UInt8(ascii: "/") {
      let length = i - componentStart
      if length == 0 { return false }
      if length <= 2 && bytes[componentStart] == UInt8(ascii: ".")
        && (length == 1 || bytes[componentStart + 1] == UInt8(ascii: "."))
      {
        return false
      }
      componentStart = i + 1
    }
    return true
  }

  // MARK: Paths

  /// The absolute path of `path`.
  public func absolutePath(_ path: DevicePath) -> String {
    path.isRoot ? root : (root == "/" ? "" : root) + "/" + path.components.joined(separator: "/")
  }

  /// The absolute path of `path` as bytes, its names as they are (UTF-8 or not).
  public func absolutePathBytes(_ path: DevicePath) -> [UInt8] {
    var bytes = Array(root.utf8)
    for name in path.names {
      if bytes.last != UInt8(ascii: "/") { bytes.append(UInt8(ascii: "/")) }
      bytes += name.bytes
    }
    return bytes
  }

  /// The device path of a user-supplied path (absolute, or relative to `currentDirectory`).
  ///
  /// Throws when the path, once `..` is resolved, is not inside the device.
  public func resolve(_ userPath: String, currentDirectory: String? = nil) throws(ProtFSError) -> DevicePath {
    try resolve(bytes: Array(userPath.utf8), currentDirectory: currentDirectory)
  }

  /// The device path of a user-supplied path given as bytes, which may not be UTF-8 (a
  /// command-line argument): its names stay as they are. Messages show it escaped.
  public func resolve(bytes userPath: [UInt8], currentDirectory: String? = nil) throws(ProtFSError) -> DevicePath {
    // The current directory and the canonical root cost system calls: ask only when needed.
    let isAbsolute = userPath.first == UInt8(ascii: "/")
    let base = isAbsolute ? [] : Array((currentDirectory ?? FileManager.default.currentDirectoryPath).utf8)
    let absolute = Device.normalize(bytes: userPath, relativeTo: base)
    if let path = Device.relative(absolute, to: root) { return path }
    let canonical = canonicalRoot
    if canonical != root, let path = Device.relative(absolute, to: canonical) { return path }
    let shown = DisplayText.escaping(userPath)
    throw ProtFSError(
      .outsideDevice, "The path '\(shown)' is outside the device '\(root)'.", path: shown,
      remedy: .advice("give a path inside the device, or choose the device with --device DIR"))
  }

  /// Whether the absolute path `path`, once `..` is resolved, is the root or inside it: what
  /// `resolve` checks, without building the device path.
  public func contains(_ path: String) -> Bool {
    let absolute = Device.normalize(path, relativeTo: "/")
    if Device.isWithin(absolute, root) { return true }
    let canonical = canonicalRoot
    return canonical != root && Device.isWithin(absolute, canonical)
  }

  /// Whether the normalised absolute path `absolute` is `root` or below it (compared as bytes).
  private static func isWithin(_ absolute: String, _ root: String) -> Bool { isWithin(absolute.utf8, root) }

  /// As `isWithin(_:_:)`, for a path given as bytes.
  private static func isWithin(_ path: some Collection<UInt8>, _ root: String) -> Bool {
    let prefix = root.utf8
    guard prefix.count > 1 else { return true }  // the root is "/"
    return path.starts(with: prefix)
      && (path.count == prefix.count || path.dropFirst(prefix.count).first == UInt8(ascii: "/"))
  }

  /// The device path of the normalised absolute path `absolute` (bytes) under `root`, if it is there.
  private static func relative(_ absolute: [UInt8], to root: String) -> DevicePath? {
    guard isWithin(absolute, root) else { return nil }
    let prefix = root == "/" ? 1 : root.utf8.count + 1
    guard absolute.count > prefix else { return .root }
    return DevicePath(names: absolute.dropFirst(prefix).split(separator: UInt8(ascii: "/")).map(FileName.init(bytes:)))
  }

  /// The root with its own symlinks resolved, for recognising paths that came through `realpath`.
  package var canonicalRoot: String {
    guard let resolved = Kernel.realpath(root, nil) else { return root }
    defer { free(resolved) }
    return String(cString: resolved)
  }

  /// The path of the state directory.
  public var stateDirectory: String { absolutePath(DevicePath(validated: [Device.stateDirectoryName])) }

  /// The device path of `Containers/`.
  public static let containersPath = DevicePath(validated: [containersDirectoryName])

  // MARK: Life cycle

  /// Whether `init` has run on this device.
  public var isInitialized: Bool {
    FileManager.default.fileExists(atPath: stateDirectory + "/" + Device.markerName)
  }

  /// Where a sealed device keeps its device key and keybag, below `.protfs/`.
  package static let sealDirectoryName = "seal"
  /// The keybag's name in `sealDirectoryName`: a device is sealed when it is there.
  package static let keybagName = "keybag"

  /// Whether the device is sealed (docs/sealed.md): its files' contents are ciphertext outside the
  /// mount. One `lstat`; false where `.protfs/` cannot be read.
  public var isSealed: Bool {
    var status = stat()
    let path = stateDirectory + "/" + Device.sealDirectoryName + "/" + Device.keybagName
    guard case .success = Kernel.lstat(path, &status) else { return false }
    return true
  }

  /// Throws a "not initialised" error naming the device and how to fix it.
  public func requireInitialized() throws(ProtFSError) {
    // A user kept out of `.protfs/` (the app user under `protfs exec`) is told so, not that the
    // device is new.
    var status = stat()
    if case .failure(.accessDenied) = Kernel.stat(stateDirectory + "/" + Device.markerName, &status) {
      throw ProtFSError(
        .permissionDenied, "Cannot read the state of the device '\(root)': permission denied.", path: stateDirectory,
        errno: EACCES, remedy: .runAsDeviceOwner)
    }
    try requireDirectoryOrNothing()
    guard isInitialized else {
      throw ProtFSError(
        .notInitialized, "The device '\(root)' has not been initialised.", path: root,
        remedy: .initializeDevice(root: root))
    }
  }

  /// Creates the device directory, `.protfs/` and `Containers/` if needed. Idempotent.
  ///
  /// Refuses a filesystem without user extended attributes before anything else is written.
  public func initialize() throws(ProtFSError) {
    try requireDirectoryOrNothing()
    try Device.makeDirectories(root)
    let top = try DirectoryHandle(path: root)
    try Device.checkExtendedAttributes(top)
    try top.makeDirectory(Device.stateDirectoryName, permissions: FilePermissions(rawValue: 0o700))
    // Containers/ stays root's and closed to writes by others, whatever the umask: the app user
    // owns its own container but must not add or swap others.
    if try top.makeDirectory(Device.containersDirectoryName) {
      try top.setPermissions(FilePermissions(rawValue: 0o755), of: Device.containersDirectoryName)
    }
    let state = try top.openDirectory(Device.stateDirectoryName)
    if (try? state.status(Device.markerName)) == nil {
      let marker = #"{"format":1,"kind":"protfs-device"}"# + "\n"
      try AtomicFile.write(Array(marker.utf8), named: Device.markerName, in: state)
    }
  }

  /// Throws when the device's path names something other than a directory (a regular file, a
  /// device node): neither `init` nor any other command can make a device of it.
  public func requireDirectoryOrNothing() throws(ProtFSError) {
    var status = stat()
    guard case .success = Kernel.stat(root, &status), status.st_mode & S_IFMT != S_IFDIR else {
      return
    }
    let kind = status.st_mode & S_IFMT == S_IFREG ? "a file" : "not a directory"
    throw ProtFSError(
      .invalidArgument, "The device path '\(root)' is \(kind), not a device directory.", path: root, errno: ENOTDIR,
      remedy: .advice("give --device a directory, or a path that does not exist yet, which init makes"))
  }

  /// Makes the directory `path` and its missing parents (`mkdir -p`), with strerror(3)'s words
  /// when one cannot be made: a parent that is a file, or one the caller may not write.
  private static func makeDirectories(_ path: String) throws(ProtFSError) {
    var status = stat()
    switch Kernel.stat(path, &status) {
    case .success: return
    case .failure(let error) where error == .noSuchFile:
      let parent = (path as NSString).deletingLastPathComponent
      if !parent.isEmpty, parent != path { try makeDirectories(parent) }
      switch Kernel.mkdir(path, 0o755) {
      case .success, .failure(.exists): return
      case .failure(let error): throw ProtFSError.system("create the device directory", path: path, errno: error)
      }
    case .failure(let error): throw ProtFSError.system("create the device directory", path: path, errno: error)
    }
  }

  /// Throws `xattrUnsupported` naming the directory when its filesystem lacks user xattrs.
  package static func checkExtendedAttributes(_ directory: DirectoryHandle) throws(ProtFSError) {
    let probe = "user.protfs.probe"
    if case .failure(let e) = directory.attributeResult(probe), e == .notSupported {
      throw ProtFSError.system("use", path: directory.path, errno: e)
    }
    do {
      try directory.setAttribute(probe, to: [0x31])
      try directory.removeAttribute(probe)
    } catch let error where error.code == .xattrUnsupported {
      throw ProtFSError(
        .xattrUnsupported,
        "The filesystem of '\(directory.path)' does not support user extended attributes, where protfs stores protection classes.",
        path: directory.path, errno: error.errno,
        remedy: .advice("put the device on a filesystem with user xattrs (ext4, xfs, btrfs, tmpfs)"))
    }
  }

  /// Why a Foundation call failed, in protfs's words (`FailureReason`).
  package static func reason(_ error: any Error) -> String { FailureReason.of(error) }

  // MARK: Walking

  /// Opens the device root.
  public func openRoot() throws(ProtFSError) -> DirectoryHandle {
    try DirectoryHandle(path: root)
  }

  /// Opens the directory at `path`, walking each component without following a symlink.
  public func openDirectory(_ path: DevicePath) throws(ProtFSError) -> DirectoryHandle {
    var current = try openRoot()
    for name in path.names { current = try current.openDirectory(name) }
    return current
  }

  /// Opens the parent directory of `path` and returns it with the final name (nil for the root),
  /// as text for the calls that take a `String`; throws for a name that is not UTF-8, which those
  /// calls would not find (`openParentEntry` gives it as it is).
  public func openParent(_ path: DevicePath) throws(ProtFSError) -> (DirectoryHandle, String?) {
    let name = try textName(of: path)
    return (try openDirectory(path.parent), name)
  }

  /// The last name of `path` as text (nil for the root), for the calls that take a `String`;
  /// throws for a name that is not UTF-8, which those calls would not find.
  package func textName(of path: DevicePath) throws(ProtFSError) -> String? {
    guard let name = path.fileName else { return nil }
    guard let text = name.text else {
      throw ProtFSError(
        .invalidArgument, "The name '\(name)' of '\(absolutePath(path))' is not UTF-8, which this operation needs.",
        path: absolutePath(path), errno: EILSEQ, remedy: .advice("rename the item to a UTF-8 name"))
    }
    return text
  }

  /// Opens the parent directory of `path` and returns it with the final name as the kernel has it
  /// (nil for the root).
  public func openParentEntry(_ path: DevicePath) throws(ProtFSError) -> (DirectoryHandle, FileName?) {
    guard let name = path.fileName else { return (try openRoot(), nil) }
    return (try openDirectory(path.parent), name)
  }

  /// The status of the item at `path`, never following a symlink.
  public func status(_ path: DevicePath) throws(ProtFSError) -> FileStatus {
    let (parent, name) = try openParentEntry(path)
    guard let name else { return try parent.status() }
    return try parent.status(name)
  }

  // MARK: Containers

  /// The container of `bundleID` (which may not exist yet).
  public func container(_ bundleID: BundleID) -> Container { Container(device: self, bundleID: bundleID) }

  /// The existing containers (`ContainersEntry.isContainer`), sorted by bundle id; other entries of
  /// `Containers/` are left out.
  public func containers() throws(ProtFSError) -> [Container] {
    try openDirectory(Device.containersPath).containersEntries().compactMap { entry in
      entry.isContainer ? entry.bundleID.map(container) : nil
    }.sorted { $0.bundleID < $1.bundleID }
  }

  /// The container that `path` lies in, if any.
  public func containerContaining(_ path: DevicePath) -> Container? {
    guard path.count >= 2, path.names[0] == FileName(Device.containersDirectoryName),
      let name = path.names[1].text, let id = try? BundleID(name)
    else { return nil }
    return container(id)
  }
}

extension Device {
  /// `path` with every symlink in it resolved, for callers that ask to follow links.
  ///
  /// Link targets are interpreted as the kernel would (absolute ones from the host root, relative
  /// ones from the link's directory), but a target that leaves the device is refused rather than
  /// followed, and more than 40 links is a loop.
  public func resolvingSymlinks(_ path: DevicePath) throws(ProtFSError) -> DevicePath {
    var pending = path.names[...]
    var resolved: [FileName] = []
    var hops = 0
    while let component = pending.popFirst() {
      let parent = try openDirectory(DevicePath(names: resolved))
      let status = try parent.status(component)
      guard status.kind == .symlink else {
        resolved.append(component)
        continue
      }
      hops += 1
      if hops > 40 {
        throw ProtFSError(
          .symlink, "Cannot resolve '\(absolutePath(path))': too many levels of symbolic links (a loop?).",
          path: absolutePath(path), errno: ELOOP)
      }
      var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
      let cName = component.cString
      let count = try Kernel.readlinkat(parent.fd, cName, &buffer, Int(PATH_MAX)).orThrow(
        "read the link", path: parent.pathOf(component))
      let target = buffer[0..<count].map { UInt8(bitPattern: $0) }
      let base = absolutePathBytes(DevicePath(names: resolved))
      let inside: DevicePath
      do {
        inside = try resolve(bytes: Device.normalize(bytes: target, relativeTo: base))
      } catch {
        throw ProtFSError(
          .outsideDevice,
          "The symbolic link '\(parent.pathOf(component))' points to '\(DisplayText.escaping(target))', outside the device; protfs does not follow it.",
          path: parent.pathOf(component))
      }
      pending = (inside.names + pending)[...]
      resolved = []
    }
    return DevicePath(names: resolved)
  }
}
