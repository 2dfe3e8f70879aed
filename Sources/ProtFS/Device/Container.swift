import Foundation
import ProtFSSystem

/// An app's container on a device: `<device>/Containers/<bundle-id>/`.
public struct Container: Sendable, Hashable {
  /// The device it lives on.
  public let device: Device
  /// The app it belongs to.
  public let bundleID: BundleID

  /// The directories every container has, parents before children.
  public static let standardDirectories = [
    "Documents", "Library", "Library/Caches", "Library/Application Support", "Library/Preferences", "tmp",
  ]

  /// The container's path on the device.
  public var path: DevicePath { Device.containersPath.appending(bundleID.rawValue) }

  /// The container's absolute path.
  public var absolutePath: String { device.absolutePath(path) }

  /// Whether the container exists.
  public var exists: Bool { (try? device.status(path))?.kind == .directory }

  /// The nsurlsessiond temp directory that background downloads of `session` write into:
  /// `Library/Caches/com.apple.nsurlsessiond/Downloads/<bundle-id>`.
  public var downloadsPath: DevicePath {
    path.appending("Library").appending("Caches").appending("com.apple.nsurlsessiond").appending("Downloads")
      .appending(bundleID.rawValue)
  }

  /// The nsurlsessiond directory where background upload tasks keep the snapshot of the file they
  /// send: `Library/Caches/com.apple.nsurlsessiond/Uploads/<bundle-id>`, the Downloads directory's sibling.
  public var uploadsPath: DevicePath {
    path.appending("Library").appending("Caches").appending("com.apple.nsurlsessiond").appending("Uploads")
      .appending(bundleID.rawValue)
  }

  /// The path of `relative` (such as `Documents/a.txt`) inside the container.
  public func path(_ relative: String) throws(ProtFSError) -> DevicePath { try path.appending(path: relative) }

  /// The container's default class, or nil when none was stored (class C then applies).
  public func defaultClass() throws(ProtFSError) -> ProtectionClass? {
    try device.openDirectory(path).defaultClass()
  }

  /// The device path of `userPath` read in this container: a relative path from the container's
  /// root, an absolute one as it stands. Throws when the path leaves the container.
  ///
  /// `..` is resolved by the words alone, as `Device.resolve` does, since opening the path walks its
  /// components without following a link: "Documents/link/.." is Documents, whatever the link names.
  public func resolve(_ userPath: String) throws(ProtFSError) -> DevicePath {
    try resolve(bytes: Array(userPath.utf8))
  }

  /// As `resolve(_:)`, for a path given as bytes, which may not be UTF-8 (a command-line
  /// argument): its names stay as they are. Messages show it escaped.
  public func resolve(bytes userPath: [UInt8]) throws(ProtFSError) -> DevicePath {
    var resolved = path
    var leaves = false
    if userPath.first == UInt8(ascii: "/") {
      if let inside = try? device.resolve(bytes: userPath), inside.hasPrefix(path) {
        resolved = inside
      } else {
        leaves = true
      }
    } else {
      var names = path.names
      for part in userPath.split(separator: UInt8(ascii: "/")) where !part.elementsEqual(".".utf8) {
        if !part.elementsEqual("..".utf8) {
          names.append(FileName(bytes: part))
        } else if names.count > path.count {
          names.removeLast()
        } else {
          leaves = true
          break
        }
      }
      resolved = DevicePath(names: names)
    }
    guard !leaves else {
      let shown = DisplayText.escaping(userPath)
      throw ProtFSError(
        .outsideDevice,
        "The path '\(shown)' is outside the container of \(bundleID) ('\(absolutePath)').", path: shown,
        remedy: .advice("give a path inside the container"))
    }
    return resolved
  }

  /// Throws a clear error when the container does not exist: one that names the device, and the
  /// device's container the bundle id was likely meant to be, or its containers when they are few.
  /// Something else at the container's name (a symbolic link, a file) is named as what it is.
  public func requireExists() throws(ProtFSError) {
    if let status = try? device.status(path) {
      guard status.kind != .directory else { return }
      let isLink = status.kind == .symlink
      throw ProtFSError(
        isLink ? .symlink : .invalidArgument,
        "'\(absolutePath)' is \(isLink ? "a symbolic link" : "a \(status.kind.rawValue)"), not a container"
          + (isLink ? ": protfs does not follow it." : "."),
        path: absolutePath, remedy: .advice("remove it, then create the container"))
    }
    var message = "The app \(bundleID) has no container on the device '\(device.root)'."
    let others = (try? device.containers().map(\.bundleID)) ?? []
    if let near = device.nearestContainer(to: bundleID, among: others) {
      message += " Did you mean \(near)?"
    } else if others.isEmpty {
      message = "The app \(bundleID) has no container on the device '\(device.root)', which has none yet."
    } else if others.count == 1 {
      message = "The app \(bundleID) has no container on the device '\(device.root)', whose only one is \(others[0])."
    } else if others.count <= Container.fewContainers {
      let list = others.dropLast().map(\.rawValue).joined(separator: ", ") + " and \(others.last!)"
      message = "The app \(bundleID) has no container on the device '\(device.root)', whose containers are \(list)."
    }
    throw ProtFSError(
      .notFound, message, path: absolutePath, remedy: .createContainer(bundleID: bundleID.rawValue))
  }

  /// Up to how many containers a "has no container" error lists.
  static let fewContainers = 5
}

extension Device {
  /// The container among `candidates` (default: the device's) that `bundleID` is most likely a
  /// mistyped or shortened spelling of: the same letters in another case, the start or the end of
  /// just one ("com.example" or "example.app" for "com.example.app"), or the nearest within two
  /// edits. Bundle ids share long prefixes (com.example.), so a looser distance would offer an
  /// unrelated app.
  public func nearestContainer(to bundleID: BundleID, among candidates: [BundleID]? = nil) -> BundleID? {
    let others = (candidates ?? (try? containers().map(\.bundleID)) ?? []).filter { $0 != bundleID }
    let word = bundleID.rawValue.lowercased()
    func only(_ matches: (String) -> Bool) -> BundleID? {
      let found = others.filter { matches($0.rawValue.lowercased()) }
      return found.count == 1 ? found[0] : nil
    }
    if let same = only({ $0 == word }) { return same }
    if let part = only({ $0.hasPrefix(word + ".") || $0.hasSuffix("." + word) }) { return part }
    let distances = others.map { ($0, Suggestion.editDistance(word, $0.rawValue.lowercased())) }
    guard let best = distances.min(by: { $0.1 < $1.1 }), best.1 <= 2 else { return nil }
    return best.0
  }
}

/// What `Device.createContainer` did.
public struct ContainerCreation: Sendable, Equatable {
  /// Whether the container was new.
  public var created: Bool
  /// The default class before, when it changed on an existing container.
  public var previousDefault: ProtectionClass?
  /// The default class now.
  public var defaultClass: ProtectionClass
}

/// What `Device.initCache` did.
public struct CacheInitialization: Sendable, Equatable {
  /// The Downloads directory's absolute path.
  public var path: String
  /// Whether the container had to be created.
  public var containerCreated: Bool
  /// Whether the Downloads directory was new.
  public var created: Bool
  /// Its effective class before, when it existed with another class.
  public var previousClass: EffectiveClass?
  /// Its class now.
  public var protectionClass: ProtectionClass
  /// The effective class the `Downloads` directory above it had, when init-cache gave it the new
  /// class because that one was too strong for background downloads.
  public var downloadsParentPreviousClass: EffectiveClass? = nil
}

extension Device {
  /// Creates the container of `bundleID` with its standard directories and default class.
  ///
  /// The container is built under `.protfs/staging/` and renamed into `Containers/` in one step,
  /// so a crash leaves either no container or a whole one. Created by root, the container root and
  /// its standard directories belong to the app user (`AppUser.standard`), so a program under
  /// `protfs exec` can read and write its own container while its data is available. On an existing container, a different
  /// `defaultClass` replaces the stored default.
  @discardableResult
  public func createContainer(_ bundleID: BundleID, defaultClass: ProtectionClass? = nil) throws(ProtFSError)
    -> ContainerCreation
  {
    try initialize()
    let container = self.container(bundleID)
    if container.exists {
      let directory = try openDirectory(container.path)
      let stored = try directory.defaultClass()
      let current = stored ?? .containerDefault
      if let wanted = defaultClass, wanted != current || stored == nil {
        try directory.setAttribute(AttributeName.defaultClass, to: wanted.attributeValue)
        return ContainerCreation(
          created: false, previousDefault: wanted == current ? nil : current, defaultClass: wanted)
      }
      return ContainerCreation(created: false, previousDefault: nil, defaultClass: current)
    }
    let chosen = defaultClass ?? .containerDefault
    let staging = try openStaging()
    let temporary = AtomicFile.temporaryName(for: bundleID.rawValue)
    try staging.makeDirectory(temporary)
    do throws(ProtFSError) {
      let root = try staging.openDirectory(temporary)
      try root.setAttribute(AttributeName.defaultClass, to: chosen.attributeValue)
      let owner = AppUser.canAssume ? AppUser.standard : nil
      if let owner { try root.handOver(nil, to: owner) }
      for relative in Container.standardDirectories {
        let parts = relative.split(separator: "/").map(String.init)
        var parent = root
        for part in parts.dropLast() { parent = try parent.openDirectory(part) }
        try parent.makeDirectory(parts.last!)
        try parent.setProtectionClass(chosen, of: parts.last!)
        if let owner { try parent.handOver(parts.last!, to: owner) }
      }
      let containers = try openDirectory(Device.containersPath)
      switch Kernel.renameat2(staging.fd, temporary, containers.fd, bundleID.rawValue, .noReplace)
      {
      case .success:
        _ = Kernel.fsync(containers.fd)
        return ContainerCreation(created: true, previousDefault: nil, defaultClass: chosen)
      case .failure(let e) where e == .exists || e == Errno(ENOTEMPTY):
        // Another protfs process created it first: theirs stands. Something else at its name (a
        // symbolic link) is refused, never taken for a container nor tried again.
        try staging.removeTree(temporary)
        try container.requireExists()
        return try createContainer(bundleID, defaultClass: defaultClass)
      case .failure(let e):
        throw ProtFSError.system("create the container", path: container.absolutePath, errno: e)
      }
    } catch {
      try? staging.removeTree(temporary)  // the creation's own error is the one to report
      throw error
    }
  }

  /// Creates (if needed) the container and its nsurlsessiond Downloads directory with `protectionClass`
  /// (`none` by default): the fix for background downloads that die while the device is locked.
  public func initCache(_ bundleID: BundleID, protectionClass: ProtectionClass = .none) throws(ProtFSError)
    -> CacheInitialization
  {
    let creation = try createContainer(bundleID)
    let container = self.container(bundleID)
    let target = container.downloadsPath
    // Made for the app, as the container's own directories are: the app user may write in them.
    let owner = AppUser.canAssume ? AppUser.standard : nil
    // nsurlsessiond's Downloads directory holds only session directories: made with the class
    // given, or given it when the one it has makes background downloads fail while locked (more
    // than until-first-auth, what the default policy's DP005 allows).
    try createDirectories(target.parent, protectionClass: protectionClass, owner: owner)
    var parentPrevious: EffectiveClass?
    let parentClass = try effectiveClass(of: target.parent)
    if protectionClass <= .completeUntilFirstUserAuthentication,
      parentClass.protectionClass > .completeUntilFirstUserAuthentication
    {
      parentPrevious = parentClass
      try setClass(protectionClass, of: target.parent)
    }
    var previous: EffectiveClass?
    let created = try createDirectory(target, protectionClass: protectionClass, owner: owner)
    if !created {
      let before = try effectiveClass(of: target)
      if before.protectionClass != protectionClass || before.source != .own {
        previous = before
        try setClass(protectionClass, of: target)
      }
    }
    return CacheInitialization(
      path: absolutePath(target), containerCreated: creation.created, created: created, previousClass: previous,
      protectionClass: protectionClass, downloadsParentPreviousClass: parentPrevious)
  }

  /// Opens `.protfs/staging/`, first removing what crashed protfs processes left there.
  package func openStaging() throws(ProtFSError) -> DirectoryHandle {
    let state = try openDirectory(DevicePath(validated: [Device.stateDirectoryName]))
    try state.makeDirectory("staging", permissions: FilePermissions(rawValue: 0o700))
    let staging = try state.openDirectory("staging")
    for (name, _) in try staging.entries() {
      let parts = name.split(separator: ".")
      guard parts.count >= 3, let pid = Int32(parts[parts.count - 2]) else { continue }
      // Best effort: what is left is tried again at the next cleanup.
      if !ProcessIdentity.isRunning(pid) { try? staging.removeTree(name) }
    }
    return staging
  }
}

extension DirectoryHandle {
  /// Gives `name` (this directory when nil) to `user`, never following a symlink. By name only
  /// inside the root-only staging directory, where nobody else can swap the item; elsewhere through
  /// a descriptor of the item (`nil`).
  ///
  /// The corresponding C calls are `fchownat(2)` and `fchown(2)`.
  package func handOver(_ name: String?, to user: AppUser) throws(ProtFSError) {
    if let name {
      _ = try Kernel.fchownat(fd, name, user.uid, user.gid, AT_SYMLINK_NOFOLLOW).orThrow(
        "give the app user \(user)", path: pathOf(name))
    } else {
      _ = try Kernel.fchown(fd, user.uid, user.gid).orThrow("give the app user \(user)", path: path)
    }
  }
}
