import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// One domain's rows made into its container, as they are read: each file, directory and
/// symlink at its path with its mode and time, the app user's, files and directories with their
/// own class. The directories along the last entry's path stay open (the rows come in the order of
/// their paths, so most entries reuse them); a file's attributes are set through its own
/// descriptor, never by name. On a sealed device every file is written sealed (`ImportedContents`).
struct ContainerBuilder {
  /// The mode bits an imported item keeps (`rwxr-xr-x` at most): what an iOS container holds.
  static let containerModeMask: mode_t = 0o755

  /// The domain being read.
  let domain: String
  /// Its container's place in the report.
  let index: Int
  /// What has been done so far.
  private(set) var report: BackupImport.ContainerReport
  /// The container's root, in staging.
  let root: DirectoryHandle
  let manifest: BackupManifest
  let metadataOnly: Bool
  /// The sealed device's keys; nil for an unsealed device.
  let sealed: SealedFiles?
  /// The class the device hands down to its containers (its root's and `Containers/`'s own).
  let deviceClass: ProtectionClass?
  /// Who the entries are given to (nil when protfs cannot give files away).
  let owner: AppUser? = AppUser.canAssume ? AppUser.standard : nil
  /// The directories open below the root along the last entry's path.
  private var open: [(name: String, handle: DirectoryHandle)] = []
  /// The directories made, with their times: set when the domain is done, since making their
  /// entries changes them.
  private var directoryTimes: [([String], Int64)] = []

  init(
    domain: String, index: Int, report: BackupImport.ContainerReport, root: DirectoryHandle,
    manifest: BackupManifest, metadataOnly: Bool, sealed: SealedFiles? = nil, deviceClass: ProtectionClass? = nil
  ) {
    self.domain = domain
    self.index = index
    self.report = report
    self.root = root
    self.manifest = manifest
    self.metadataOnly = metadataOnly
    self.sealed = sealed
    self.deviceClass = deviceClass
  }

  /// Adds `entry` to the container; an entry's own problem skips it (listed), the device's ends the
  /// import.
  mutating func add(_ entry: BackupManifest.Entry) throws(ProtFSError) {
    guard let parts = BackupImport.components(entry.relativePath) else {
      report.skipped.append("\(entry.relativePath): not a relative path inside the container")
      return
    }
    if parts.isEmpty {
      // The domain's own directory: the container root.
      if let known = entry.metadata.knownClass { try root.setProtectionClass(known, of: nil as String?) }
      directoryTimes.append(([], entry.metadata.lastModified))
      return
    }
    do throws(ProtFSError) {
      let directory = try parent(of: parts, making: true)
      let leaf = parts[parts.count - 1]
      // The backup is anyone's to write: only what an iOS container holds is applied, never a
      // set-user-ID, set-group-ID or sticky bit, nor a write bit for group or others.
      let mode = mode_t(entry.metadata.mode) & Self.containerModeMask
      switch entry.kind {
      case .directory:
        if !(try directory.makeDirectory(leaf, permissions: FilePermissions(rawValue: 0o700))) {
          guard try directory.status(leaf).kind == .directory else {
            throw ProtFSError(.alreadyExists, "an item of that name is in the way")
          }
        }
        if let owner { try directory.handOver(leaf, to: owner) }
        try directory.setPermissions(FilePermissions(rawValue: UInt32(mode)), of: leaf)
        if let known = label(entry) { try directory.setProtectionClass(known, of: leaf) }
        directoryTimes.append((parts, entry.metadata.lastModified))
        report.directories += 1
      case .file:
        try writeFile(entry, leaf, in: directory, mode: mode)
        report.files += 1
      case .symlink:
        guard let target = entry.metadata.target, !target.isEmpty, !target.utf8.contains(0) else {
          throw ProtFSError(.malformed, "the symlink has no target")
        }
        _ = try Kernel.symlinkat(target, directory.fd, leaf).orThrow(
          "create the symlink", path: directory.pathOf(leaf))
        if let owner { try directory.handOver(leaf, to: owner) }
        BackupImport.setTimes(directory, leaf, entry.metadata.lastModified)
        report.symlinks += 1
      }
    } catch {
      // The disk, not the entry: the whole import fails, and nothing of it stays. So does a class
      // whose key is evicted: the device must be unlocked for the import.
      if let code = error.errno, BackupImport.fatalErrnos.contains(code) { throw error }
      if error.remedy?.action == .unlock { throw error }
      report.skipped.append("\(entry.relativePath): \(error.message)")
    }
  }

  /// The domain done: its directories get their times, deepest first. The container's report.
  mutating func finish() throws(ProtFSError) -> BackupImport.ContainerReport {
    for (parts, time) in directoryTimes.reversed() {
      if parts.isEmpty {
        BackupImport.setTimes(root, ".", time)
      } else if let directory = try? parent(of: parts, making: false) {
        BackupImport.setTimes(directory, parts[parts.count - 1], time)
      }
    }
    open = []
    return report
  }

  /// The directory that holds `parts`' last component, opened without following a symlink from
  /// the directories already open; missing ones are made (0755, the app user's) when `making`.
  private mutating func parent(of parts: [String], making: Bool) throws(ProtFSError) -> DirectoryHandle {
    let wanted = parts.count - 1
    var common = 0
    while common < open.count, common < wanted, open[common].name == parts[common] { common += 1 }
    open.removeLast(open.count - common)
    var current = open.last?.handle ?? root
    for part in parts[common..<wanted] {
      if making, try current.makeDirectory(part, permissions: FilePermissions(rawValue: 0o755)), let owner {
        try current.handOver(part, to: owner)
      }
      current = try current.openDirectory(part)
      open.append((part, current))
    }
    return current
  }

  /// The class `entry` gets, or nil (a number that names none is listed, for files and for
  /// directories that have a number at all: iOS records 0 for directories without a class).
  private mutating func label(_ entry: BackupManifest.Entry) -> ProtectionClass? {
    guard let known = entry.metadata.knownClass else {
      if entry.kind == .file || entry.metadata.protectionClass != 0 {
        report.unknownClasses.append("\(entry.relativePath): \(entry.metadata.protectionClass)")
      }
      return nil
    }
    if entry.kind == .file { report.classes[known.name, default: 0] += 1 }
    return known
  }

  /// Writes the file `name`: its contents from the store (decrypted with the file's own key in an
  /// encrypted backup), when they have the manifest's digest where it records one; otherwise a
  /// sparse file of its size. Its class, owner, mode and times through its descriptor. On a sealed
  /// device it is sealed for its class before anything is written.
  private mutating func writeFile(
    _ entry: BackupManifest.Entry, _ name: String, in directory: DirectoryHandle, mode: mode_t
  )
    throws(ProtFSError)
  {
    let path = directory.pathOf(name)
    let fd = try directory.openFile(
      name, flags: O_RDWR | O_CREAT | O_EXCL, permissions: FilePermissions(rawValue: 0o600))
    defer { closeDescriptor(fd) }
    let known = label(entry)
    let contents = try sealedContents(entry, fd, path: path, own: known)
    let copied = metadataOnly ? false : try copyContents(entry, into: contents)
    if !copied { try contents.resize(to: entry.metadata.size) }
    if let known {
      try known.write(toDescriptor: fd, path: path)
    }
    // Owner before mode: a change of owner clears the set-user-ID and set-group-ID bits.
    if let owner {
      _ = try Kernel.fchown(fd, owner.uid, owner.gid).orThrow(
        "give the app user \(owner)", path: path)
    }
    _ = try Kernel.fchmod(fd, mode).orThrow("set the mode of", path: path)
    let seconds = Int(entry.metadata.lastModified)
    var times = [timespec(tv_sec: seconds, tv_nsec: 0), timespec(tv_sec: seconds, tv_nsec: 0)]
    _ = Kernel.futimens(fd, &times)
  }

  /// The contents of the new file `fd`: on a sealed device, sealed for the class the file gets (its
  /// own, `own`, else the one it inherits), a class whose key is evicted refused for the whole
  /// import (EPERM, naming the file: the device is locked, and no file of that class can be made).
  private func sealedContents(
    _ entry: BackupManifest.Entry, _ fd: Int32, path: String, own: ProtectionClass?
  ) throws(ProtFSError) -> ImportedContents {
    guard let sealed else { return ImportedContents(fd: fd, path: path) }
    let cls: ProtectionClass
    if let own { cls = own } else { cls = try inheritedClass() }
    do throws(SealError) {
      return try ImportedContents(fd: fd, path: path, sealing: cls, with: sealed)
    } catch .classKeyUnavailable(let code) {
      let shown = "\(BackupImport.containerID(ofDomain: domain) ?? domain)/\(entry.relativePath)"
      let why = "the key of its class (\(code), \(cls.name)) is evicted while the device is locked"
      throw ProtFSError(
        .permissionDenied,
        "Cannot import '\(shown)' into the sealed device: \(why), so the file cannot be made: Operation not permitted.",
        path: shown, errno: EPERM, remedy: .unlock)
    } catch {
      throw error.protfsError(path: path)
    }
  }

  /// The class a file without one of its own gets where it is made (the last of `open`): the
  /// nearest own class of its directories up to the container root, else the device's, else the
  /// container's default (docs/semantics.md §2). The rows come in the order of their paths, so a
  /// directory has its class before its files are made.
  private func inheritedClass() throws(ProtFSError) -> ProtectionClass {
    for (_, handle) in open.reversed() {
      if let own = try handle.protectionClass() { return own }
    }
    let inheritance = ClassInheritance(
      ancestor: try root.protectionClass() ?? deviceClass, containerDefault: try root.defaultClass())
    return inheritance.effectiveClass(own: nil)
  }

  /// Copies `entry`'s contents from the store into `contents` (empty), when they are there, may be
  /// taken and have the manifest's digest; lists the file as missing, refused, mismatched or
  /// undecryptable (and leaves it empty) when not. Whether it copied them.
  private mutating func copyContents(_ entry: BackupManifest.Entry, into contents: ImportedContents)
    throws(ProtFSError) -> Bool
  {
    guard let stored = manifest.storeName(entry) else {
      report.missingContents.append(entry.relativePath)
      return false
    }
    // The store's file beneath the folder the manifest holds open, never through a link (a
    // hostile backup's symlinked `xx/` or file, or the folder swapped for a link meanwhile, would
    // have root copy what it points to into the app's container), a regular file of one link (a
    // hard link to a file of root's in a folder its writer owns is root's file), and no larger
    // than the manifest's `Size` (or, encrypted, its last block and padding): the bytes copied
    // are bounded by what the manifest records, not by what the store's writer made.
    let size = entry.metadata.size
    let allowed = manifest.keys == nil ? size : (size / 16 + 1) * 16
    let storedLength: Int64
    let file: FileDescriptor
    switch manifest.folder.openFile(stored.bucket + "/" + stored.name) {
    case .success(let (opened, status)) where Int64(status.st_size) <= allowed:
      (file, storedLength) = (opened, Int64(status.st_size))
    case .success(let (_, status)):
      report.refusedContents.append(
        "\(entry.relativePath): it holds \(status.st_size) bytes, more than the \(allowed) its manifest allows")
      return false
    case .failure(.absent):
      report.missingContents.append(entry.relativePath)
      return false
    case .failure(let refusal):
      report.refusedContents.append("\(entry.relativePath): \(refusal.reason)")
      return false
    }
    guard let keys = manifest.keys else {
      if let digest = entry.metadata.digest, ContentDigest.matches(file.rawValue, digest, length: storedLength) == false
      {
        report.mismatchedContents.append(entry.relativePath)
        return false
      }
      // Holes stay holes: a sparse file of its own size takes no more blocks in the container.
      try contents.copy(from: file.rawValue, length: storedLength)
      return true
    }
    return try decryptContents(entry, file, length: storedLength, keys: keys, into: contents)
  }

  /// Decrypts `entry`'s stored contents from `file` (`length` bytes) into `fd`; lists the file as
  /// undecryptable or mismatched (and leaves `fd` empty) when it cannot. Whether it copied them.
  private mutating func decryptContents(
    _ entry: BackupManifest.Entry, _ file: FileDescriptor, length storedLength: Int64, keys: BackupKeys,
    into contents: ImportedContents
  ) throws(ProtFSError) -> Bool {
    // Encrypted: the file's own key, the contents decrypted and cut to the recorded size (the
    // rest is padding). Which bytes the phone's digest covers is not documented: the decrypted
    // contents or the stored ones may have it.
    guard let wrapped = entry.metadata.encryptionKey, let key = keys.key(wrapped) else {
      report.undecryptableContents.append(entry.relativePath)
      return false
    }
    // Written as they are decrypted: encrypted again with the file's own key on a sealed device.
    let decrypted = BackupCipher.decrypt(file.rawValue, key: key, path: contents.path, limit: storedLength) {
      (plain, offset) throws(ProtFSError) in try contents.write(plain, at: offset)
    }
    switch decrypted {
    case .success(let length) where length >= entry.metadata.size && length - Int(entry.metadata.size) <= 16:
      try contents.resize(to: entry.metadata.size)
      if let digest = entry.metadata.digest, contents.matches(digest) == false,
        ContentDigest.matches(file.rawValue, digest, length: storedLength) == false
      {
        try empty(contents)
        report.mismatchedContents.append(entry.relativePath)
        return false
      }
      return true
    case .success, .failure(.notWholeBlocks):
      try empty(contents)
      report.undecryptableContents.append(entry.relativePath)
      return false
    case .failure(.failed(let error)):
      throw error
    }
  }

  /// `contents` emptied (its key record, if sealed, kept).
  private func empty(_ contents: ImportedContents) throws(ProtFSError) {
    _ = try Kernel.ftruncate(contents.fd, 0).orThrow("empty", path: contents.path)
  }
}
