import Foundation
import ProtFS
import ProtFSSystem

/// Turns an iOS backup into containers on a device (docs/import-backup.md): one per app domain
/// (`AppDomain-`, `AppDomainGroup-`, `AppDomainPlugin-`), every file, directory and symlink at
/// its path with its mode, times and, for files and directories, its own `user.protfs.class`
/// from the backup's `ProtectionClass`. Contents come from the file store; a file whose contents
/// are absent (or every file, `metadataOnly`) is a sparse file of its recorded size.
///
/// Atomic: the containers are built under `.protfs/staging/` and renamed into `Containers/` once
/// all are complete; a container that exists is refused unless `replace`. Nothing is created,
/// written or changed outside the device, and no path of the backup is followed out of its
/// container.
package struct BackupImport: Sendable {
  /// What the import did for one container.
  package struct ContainerReport: Codable, Sendable, Equatable {
    /// The container's id.
    package var bundleID: String
    /// The domain it came from.
    package var domain: String
    /// The files made.
    package var files = 0
    /// The directories made.
    package var directories = 0
    /// The symlinks made.
    package var symlinks = 0
    /// Files made sparse because the backup holds no contents for them (paths).
    package var missingContents: [String] = []
    /// Files whose contents in the file store do not have the manifest's digest (a damaged or
    /// altered backup): made sparse, as the contents cannot be trusted (paths).
    package var mismatchedContents: [String] = []
    /// Files and directories whose class number names no class, with it (`path: number`).
    package var unknownClasses: [String] = []
    /// Entries left out, each with why (a hostile path, an item in the way).
    package var skipped: [String] = []
    /// Files by the class they got, by class name.
    package var classes: [String: Int] = [:]
    /// Whether an existing container was replaced.
    package var replaced = false
  }

  /// The whole import's outcome.
  package struct Report: Codable, Sendable, Equatable {
    /// The containers made.
    package var containers: [ContainerReport] = []
    /// The domains left out (not app domains, or not asked for), with their entry counts.
    package var skippedDomains: [String: Int] = [:]
    /// Rows of the manifest that could not be read.
    package var unreadable: [String] = []
  }

  /// Errors of the device rather than of an entry (a full disk, an I/O error): they end the import.
  static let fatalErrnos: Set<Int32> = [ENOSPC, EDQUOT, EIO, EROFS, ENOMEM]

  /// The domain prefixes that become containers.
  package static let appDomainPrefixes = ["AppDomain-", "AppDomainGroup-", "AppDomainPlugin-"]

  let device: Device
  let manifest: BackupManifest

  /// An import of `manifest` into `device`.
  package init(device: Device, manifest: BackupManifest) {
    self.device = device
    self.manifest = manifest
  }

  /// The container id of an app domain, or nil for another domain.
  package static func containerID(ofDomain domain: String) -> String? {
    for prefix in appDomainPrefixes where domain.hasPrefix(prefix) { return String(domain.dropFirst(prefix.count)) }
    return nil
  }

  /// Imports the app domains whose container ids are in `only` (every one when empty).
  package func run(only: Set<String> = [], metadataOnly: Bool = false, replace: Bool = false) throws(ProtFSError)
    -> Report
  {
    var report = Report(unreadable: manifest.unreadable)
    var byContainer: [String: [BackupManifest.Entry]] = [:]
    var domains: [String: String] = [:]
    for entry in manifest.entries {
      guard let id = Self.containerID(ofDomain: entry.domain), only.isEmpty || only.contains(id) else {
        report.skippedDomains[entry.domain, default: 0] += 1
        continue
      }
      byContainer[id, default: []].append(entry)
      domains[id] = entry.domain
    }
    for id in only where byContainer[id] == nil {
      throw ProtFSError(
        .notFound, "The backup '\(manifest.path)' holds no app domain for '\(id)'.", path: manifest.path,
        remedy: .advice("run protfs import-backup without --bundle to see which apps it holds"))
    }
    var bundleIDs: [(String, BundleID)] = []
    for id in byContainer.keys.sorted() {
      do {
        bundleIDs.append((id, try BundleID(id)))
      } catch {
        report.skippedDomains[domains[id] ?? id, default: 0] += byContainer[id]?.count ?? 0
      }
    }
    // The digests are checked through libcrypto: missing, it is one error before anything is written.
    if !metadataOnly, manifest.entries.contains(where: { $0.metadata.digest != nil }) {
      try ProtFSError.requireLibcrypto()
    }
    try device.initialize()
    // Refused before anything is built: an existing container stays unless --replace.
    if !replace {
      for (_, bundleID) in bundleIDs where device.container(bundleID).exists {
        throw ProtFSError(
          .alreadyExists, "The container \(bundleID) exists on the device; the import would replace it.",
          path: device.container(bundleID).absolutePath, remedy: .advice("give --replace to replace it"))
      }
    }
    let staging = try device.openStaging()
    let work = AtomicFile.temporaryName(for: "import")
    try staging.makeDirectory(work, permissions: FilePermissions(rawValue: 0o700))
    do throws(ProtFSError) {
      let built = try staging.openDirectory(work)
      for (id, bundleID) in bundleIDs {
        var container = ContainerReport(bundleID: bundleID.rawValue, domain: domains[id] ?? "")
        try build(bundleID, entries: byContainer[id] ?? [], in: built, metadataOnly: metadataOnly, &container)
        report.containers.append(container)
      }
      let containers = try device.openDirectory(Device.containersPath)
      for index in report.containers.indices {
        let name = report.containers[index].bundleID
        switch valueOrErrno(.rename, { Kernel.renameNoReplace(built.fd, name, containers.fd, name) }) {
        case .success: break
        case .failure(let e) where replace && (e == .exists || e == Errno(ENOTEMPTY)):
          _ = try valueOrErrno(.rename) { Kernel.rename(built.fd, name, containers.fd, name, flags: 1 << 1) }
            .orThrow("replace the container", path: containers.pathOf(name))
          try built.removeTree(name)
          report.containers[index].replaced = true
        case .failure(let e):
          throw ProtFSError.system("move the imported container into place", path: containers.pathOf(name), errno: e)
        }
      }
      _ = valueOrErrno(.fsync) { fsync(containers.fd) }
      try staging.removeTree(work)
    } catch {
      try? staging.removeTree(work)
      throw error
    }
    return report
  }

  /// Builds the container `bundleID` from `entries` in `parent`.
  private func build(
    _ bundleID: BundleID, entries: [BackupManifest.Entry], in parent: DirectoryHandle, metadataOnly: Bool,
    _ report: inout ContainerReport
  ) throws(ProtFSError) {
    let name = bundleID.rawValue
    try parent.makeDirectory(name, permissions: FilePermissions(rawValue: 0o755))
    let root = try parent.openDirectory(name)
    try root.setAttribute(AttributeName.defaultClass, to: ProtectionClass.containerDefault.attributeValue)
    let owner = AppUser.canAssume ? AppUser.standard : nil
    if let owner { try root.handOver(nil, to: owner) }
    // Directories' times are set last: making their entries changes them.
    var directoryTimes: [(DirectoryHandle, String, Int64)] = []
    for entry in entries {
      guard let parts = Self.components(entry.relativePath) else {
        report.skipped.append("\(entry.relativePath): not a relative path inside the container")
        continue
      }
      if parts.isEmpty {
        // The domain's own directory: the container root.
        if let known = entry.metadata.knownClass { try root.setProtectionClass(known, of: nil as String?) }
        directoryTimes.append((root, ".", entry.metadata.lastModified))
        continue
      }
      let directory: DirectoryHandle
      do {
        directory = try openDirectories(parts.dropLast(), in: root, owner: owner)
      } catch {
        if let code = error.errno, Self.fatalErrnos.contains(code) { throw error }
        report.skipped.append("\(entry.relativePath): \(error.message)")
        continue
      }
      let leaf = parts.last!
      let mode = mode_t(entry.metadata.mode & 0o7777)
      do throws(ProtFSError) {
        switch entry.kind {
        case .directory:
          if !(try directory.makeDirectory(leaf, permissions: FilePermissions(rawValue: 0o700))) {
            guard try directory.status(leaf).kind == .directory else {
              throw ProtFSError(.alreadyExists, "an item of that name is in the way")
            }
          }
          try directory.setPermissions(FilePermissions(rawValue: UInt32(mode)), of: leaf)
          try label(entry, leaf, in: directory, &report)
          if let owner {
            try directory.handOver(leaf, to: owner)
          }
          directoryTimes.append((directory, leaf, entry.metadata.lastModified))
          report.directories += 1
        case .file:
          try writeFile(entry, leaf, in: directory, mode: mode, metadataOnly: metadataOnly, &report)
          try label(entry, leaf, in: directory, &report)
          if let owner {
            try directory.handOver(leaf, to: owner)
          }
          Self.setTimes(directory, leaf, entry.metadata.lastModified)
          report.files += 1
        case .symlink:
          guard let target = entry.metadata.target, !target.isEmpty, !target.utf8.contains(0) else {
            throw ProtFSError(.malformed, "the symlink has no target")
          }
          _ = try valueOrErrno(.symlink) { symlinkat(target, directory.fd, leaf) }.orThrow(
            "create the symlink", path: directory.pathOf(leaf))
          if let owner {
            try directory.handOver(leaf, to: owner)
          }
          Self.setTimes(directory, leaf, entry.metadata.lastModified)
          report.symlinks += 1
        }
      } catch {
        // The disk, not the entry: the whole import fails, and nothing of it stays.
        if let code = error.errno, Self.fatalErrnos.contains(code) { throw error }
        report.skipped.append("\(entry.relativePath): \(error.message)")
      }
    }
    for (directory, name, time) in directoryTimes.reversed() { Self.setTimes(directory, name, time) }
  }

  /// Opens (making them as needed, 0755, the app user's) the directories `parts` below `root`,
  /// never following a symlink.
  private func openDirectories(_ parts: ArraySlice<String>, in root: DirectoryHandle, owner: AppUser?)
    throws(ProtFSError)
    -> DirectoryHandle
  {
    var current = root
    for part in parts {
      if try current.makeDirectory(part, permissions: FilePermissions(rawValue: 0o755)), let owner {
        try current.handOver(part, to: owner)
      }
      current = try current.openDirectory(part)
    }
    return current
  }

  /// Writes the file `name`: its contents from the store, when they have the manifest's digest
  /// (where it records one); otherwise a sparse file of its size.
  private func writeFile(
    _ entry: BackupManifest.Entry, _ name: String, in directory: DirectoryHandle, mode: mode_t, metadataOnly: Bool,
    _ report: inout ContainerReport
  ) throws(ProtFSError) {
    let fd = try directory.openFile(
      name, flags: O_WRONLY | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o600))
    defer { closeDescriptor(fd) }
    var copied = false
    var mismatched = false
    // The store's file through descriptors opened without following links: a hostile backup's
    // symlinked `xx/` or file would have root copy what it points to into the app's container.
    if !metadataOnly, let stored = manifest.storeName(entry), let store = try? DirectoryHandle(path: manifest.path),
      let bucket = try? store.openDirectory(stored.bucket),
      let input = try? bucket.openFile(stored.name, flags: O_RDONLY)
    {
      defer { closeDescriptor(input) }
      var status = stat()
      if case .success = valueOrErrno(.stat, { fstat(input, &status) }), status.st_mode & S_IFMT == S_IFREG {
        if let digest = entry.metadata.digest, ContentDigest.matches(input, digest) == false {
          report.mismatchedContents.append(entry.relativePath)
          mismatched = true
        } else {
          try ItemCopier.copyContents(from: input, to: fd, path: directory.pathOf(name))
          copied = true
        }
      }
    }
    if !copied {
      _ = try valueOrErrno(.truncate) { ftruncate(fd, off_t(entry.metadata.size)) }.orThrow(
        "make the sparse file", path: directory.pathOf(name))
      if !metadataOnly && !mismatched { report.missingContents.append(entry.relativePath) }
    }
    _ = try valueOrErrno(.chmod) { fchmod(fd, mode) }.orThrow("set the mode of", path: directory.pathOf(name))
  }

  /// Gives `name` its own class from the backup, or reports a number that names none.
  private func label(
    _ entry: BackupManifest.Entry, _ name: String, in directory: DirectoryHandle, _ report: inout ContainerReport
  ) throws(ProtFSError) {
    guard let known = entry.metadata.knownClass else {
      // iOS records 0 for directories that have no class of their own; only files are reported.
      if entry.kind == .file || entry.metadata.protectionClass != 0 {
        report.unknownClasses.append("\(entry.relativePath): \(entry.metadata.protectionClass)")
      }
      return
    }
    try directory.setProtectionClass(known, of: name)
    if entry.kind == .file { report.classes[known.name, default: 0] += 1 }
  }

  /// The components of `path`, or nil when it is not a plain relative path (absolute, `.`, `..`,
  /// empty components, NUL, a component over 255 bytes).
  static func components(_ path: String) -> [String]? {
    if path.isEmpty { return [] }
    guard !path.hasPrefix("/"), !path.utf8.contains(0), path.utf8.count <= 4096 else { return nil }
    let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
    guard parts.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." && $0.utf8.count <= 255 }) else { return nil }
    return parts
  }

  /// Sets the access and modification times of `name` to `seconds` since 1970, never following it.
  static func setTimes(_ directory: DirectoryHandle, _ name: String, _ seconds: Int64) {
    var times = [timespec(tv_sec: Int(seconds), tv_nsec: 0), timespec(tv_sec: Int(seconds), tv_nsec: 0)]
    _ = valueOrErrno(.utimens) { utimensat(directory.fd, name, &times, AT_SYMLINK_NOFOLLOW) }
  }
}
