import Foundation
import ProtFS
import ProtFSSeal
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
///
/// On a sealed device (docs/sealed.md) every file is sealed in staging, its key record made for
/// its class before a byte of it is written, so a kill at any point leaves no plaintext of it on
/// disk; the rename into `Containers/` keeps its inode, to which the record is bound. A file of a
/// class whose key is evicted (class A while the device is locked) ends the import with EPERM,
/// naming the file: nothing is imported.
package struct BackupImport {
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
    /// Files whose stored contents protfs does not take, each with why (`path: why`): a store file
    /// that is not a regular file, has more than one link, is reached through a symbolic link, or
    /// holds more bytes than the manifest's `Size` allows. Made sparse, as missing ones are.
    package var refusedContents: [String] = []
    /// Files of an encrypted backup whose contents cannot be decrypted (no key of their class, a
    /// key that does not unwrap, contents that are not whole blocks or shorter than their size):
    /// made sparse (paths).
    package var undecryptableContents: [String] = []
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
  /// What gives the built containers the device's protection state and moves them in.
  let admission: any ContainerAdmission

  /// An import of `manifest` into `device`, whose containers join it through `admission` (the
  /// lock simulator's: a locked device's class-A files are out of reach once imported, as they
  /// would be had they been there at the lock).
  package init(device: Device, manifest: BackupManifest, admission: any ContainerAdmission) {
    self.device = device
    self.manifest = manifest
    self.admission = admission
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
    var report = Report()
    // An unencrypted backup's domains are known before anything is written; an encrypted one's
    // once its database is decrypted, into staging.
    var plan = manifest.keys == nil ? try plan(only: only, &report) : nil
    // Contents' digests and encrypted backups are read through libcrypto: missing, it is one
    // error before anything is written.
    if !metadataOnly || manifest.keys != nil { try ProtFSError.requireLibcrypto() }
    try device.initialize()
    // A sealed device's keys, as its keyring holds them now; and the class its root and
    // `Containers/` hand down, which a file without a class of its own may inherit.
    let sealed = try SealedFiles(device: device)
    let deviceClass = sealed == nil ? nil : try device.classInheritance(below: Device.containersPath).ancestor
    let staging = try device.openStaging()
    let work = AtomicFile.temporaryName(for: "import")
    try staging.makeDirectory(work, permissions: FilePermissions(rawValue: 0o700))
    do throws(ProtFSError) {
      let built = try staging.openDirectory(work)
      if plan == nil {
        // A name no container has: bundle ids do not start with a dot.
        try manifest.open(decryptingInto: built, name: ".Manifest.db")
        plan = try self.plan(only: only, &report)
      }
      let containers = plan ?? []
      // Refused before anything is built: an existing container stays unless --replace.
      if !replace {
        for bundleID in containers where device.container(bundleID).exists {
          throw ProtFSError(
            .alreadyExists, "The container \(bundleID) exists on the device; the import would replace it.",
            path: device.container(bundleID).absolutePath, remedy: .advice("give --replace to replace it"))
        }
      }
      try build(
        containers, in: built, metadataOnly: metadataOnly, sealed: sealed, deviceClass: deviceClass, &report)
      report.unreadable = manifest.unreadable
      let target = try moveIntoPlace(built, replace: replace, &report)
      _ = Kernel.fsync(target.fd)
      try staging.removeTree(work)
    } catch {
      try? staging.removeTree(work)  // the import's own error is the one to report
      throw error
    }
    return report
  }

  /// Builds `containers` in `built` from the backup's rows, one domain at a time, into `report`;
  /// sealed with `sealed`'s keys on a sealed device, where the device hands down `deviceClass`.
  private func build(
    _ containers: [BundleID], in built: DirectoryHandle, metadataOnly: Bool,
    sealed: SealedFiles?, deviceClass: ProtectionClass?, _ report: inout Report
  ) throws(ProtFSError) {
    var builders: [String: Int] = [:]
    for bundleID in containers {
      builders[bundleID.rawValue] = report.containers.count
      report.containers.append(ContainerReport(bundleID: bundleID.rawValue, domain: ""))
      try makeRoot(bundleID, in: built)
    }
    var current: ContainerBuilder?
    try manifest.forEachEntry(
      including: { domain in Self.containerID(ofDomain: domain).map { builders[$0] != nil } ?? false }
    ) { entry throws(ProtFSError) in
      if current?.domain != entry.domain {
        if var finished = current { report.containers[finished.index] = try finished.finish() }
        let id = Self.containerID(ofDomain: entry.domain) ?? ""
        let index = builders[id] ?? 0
        var container = report.containers[index]
        if container.domain.isEmpty { container.domain = entry.domain }
        current = ContainerBuilder(
          domain: entry.domain, index: index, report: container, root: try built.openDirectory(id),
          manifest: manifest, metadataOnly: metadataOnly, sealed: sealed, deviceClass: deviceClass)
      }
      try current?.add(entry)
    }
    if var finished = current { report.containers[finished.index] = try finished.finish() }
  }

  /// Moves the containers built in `built` into the device's containers directory, under the
  /// device's lock state (swapping with one there when `replace`); returns that directory.
  private func moveIntoPlace(_ built: DirectoryHandle, replace: Bool, _ report: inout Report) throws(ProtFSError)
    -> DirectoryHandle
  {
    let target = try device.openDirectory(Device.containersPath)
    // The device's lock state first, as the items already there have it; then into place, with
    // no transition in between.
    try admission.admit(built) { () throws(ProtFSError) in
      for index in report.containers.indices {
        let name = report.containers[index].bundleID
        switch Kernel.renameat2(built.fd, name, target.fd, name, .noReplace) {
        case .success: break
        case .failure(let e) where replace && (e == .exists || e == Errno(ENOTEMPTY)):
          _ = try Kernel.renameat2(built.fd, name, target.fd, name, .exchange)
            .orThrow("replace the container", path: target.pathOf(name))
          try built.removeTree(name)
          report.containers[index].replaced = true
        case .failure(let e):
          throw ProtFSError.system("move the imported container into place", path: target.pathOf(name), errno: e)
        }
      }
    }
    return target
  }

  /// The containers to make, in the order of their ids, from the backup's domains; the domains
  /// left out are counted in `report`. Throws when an id of `only` has no domain.
  private func plan(only: Set<String>, _ report: inout Report) throws(ProtFSError) -> [BundleID] {
    var ids: Set<String> = []
    var chosen: [BundleID] = []
    for (domain, rows) in try manifest.domains() {
      guard let id = Self.containerID(ofDomain: domain), only.isEmpty || only.contains(id),
        let bundleID = try? BundleID(id)
      else {
        report.skippedDomains[domain, default: 0] += rows
        continue
      }
      // AppDomain-, AppDomainGroup- and AppDomainPlugin- of one id share its container.
      if ids.insert(id).inserted { chosen.append(bundleID) }
    }
    for id in only.sorted() where !ids.contains(id) {
      throw ProtFSError(
        .notFound, "The backup '\(manifest.path)' holds no app domain for '\(id)'.", path: manifest.path,
        remedy: .advice("run protfs import-backup without --bundle to see which apps it holds"))
    }
    return chosen.sorted { $0.rawValue < $1.rawValue }
  }

  /// Makes the root of the container `bundleID` in `parent`: the container's default class, the
  /// app user's.
  private func makeRoot(_ bundleID: BundleID, in parent: DirectoryHandle) throws(ProtFSError) {
    let name = bundleID.rawValue
    try parent.makeDirectory(name, permissions: FilePermissions(rawValue: 0o755))
    let root = try parent.openDirectory(name)
    try root.setAttribute(AttributeName.defaultClass, to: ProtectionClass.containerDefault.attributeValue)
    if AppUser.canAssume { try root.handOver(nil, to: AppUser.standard) }
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
    _ = Kernel.utimensat(directory.fd, name, &times, AT_SYMLINK_NOFOLLOW)
  }
}
