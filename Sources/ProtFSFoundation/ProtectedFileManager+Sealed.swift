import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// A sealed device's files (docs/sealed.md), written and read by the manager through their keys.
///
/// The manager works on the backing files, where a sealed file is ciphertext: as root it writes and
/// reads them through their keys, as the mount does. The keys are root's alone (the device key,
/// and the class keys in root's kernel keyring), so another user, such as an app's user (uid 501)
/// under `protfs app launch --no-mount`, cannot seal what it writes nor open what it reads: each
/// such call fails with an error naming the file and saying that an app reaches its container
/// through the mount (`protfs app launch` without `--no-mount`), whose daemon holds the keys. A
/// container seen through a mount (FUSE) is written and read as it is: the daemon seals it.
extension ProtectedFileManager {
  /// The device's files with the keys its state allows now, for a backing file in `directory`
  /// (`path` names it in errors); nil when the device is not sealed or `directory` is on a mount,
  /// whose daemon seals what passes through it.
  func sealedFiles(for directory: DirectoryHandle, path: String) throws(ProtFSError) -> SealedFiles? {
    if case .success(true) = ConfinedLaunch.isOnFUSE(directory.fd) { return nil }
    let files: SealedFiles?
    do {
      files = try SealedFiles(device: device)
    } catch  where Kernel.geteuid() != 0 {
      throw ProtFSError(
        .permissionDenied,
        "Cannot reach '\(path)': the device '\(device.root)' is sealed, and only root holds its keys "
          + "(\(error.message.hasSuffix(".") ? String(error.message.dropLast()) : error.message)).",
        path: path, errno: EACCES,
        remedy: .advice(
          "an app reaches its container through the mount: run it with `protfs app launch` "
            + "without --no-mount"))
    }
    guard let files else { return nil }
    files.apply(try device.protectionState())
    return files
  }

  /// Writes `data` to the new or emptied file `fd` (at `path`) of class `protectionClass`: through
  /// its key on a sealed device (`sealed`), as it is otherwise.
  func writeContents(
    _ data: Data, to fd: Int32, path: String, _ protectionClass: ProtectionClass, _ existing: Bool,
    _ sealed: SealedFiles?
  ) throws(ProtFSError) {
    guard let sealed else { return try AtomicFile.writeAll(fd, data, path: path) }
    try writeSealed(data, to: fd, path: path, protectionClass: protectionClass, existing: existing, sealed: sealed)
  }

  /// The contents of the file `name` in `parent` (at `path`): decrypted on a sealed device.
  func readContents(_ name: String, in parent: DirectoryHandle, path: String) throws(ProtFSError) -> [UInt8] {
    guard let sealed = try sealedFiles(for: parent, path: path) else {
      return try AtomicFile.read(named: name, in: parent, limit: Int.max)
    }
    return try readSealed(name, in: parent, path: path, sealed: sealed)
  }

  /// Moves `name` in `source` to `destinationName` in `destination` on another filesystem: copied
  /// whole (`ItemCopier`), its sealed files given their keys for their new inodes, then the source
  /// removed.
  func moveAcrossFileSystems(
    _ name: String, in source: DirectoryHandle, to destinationName: String, in destination: DirectoryHandle
  ) throws(ProtFSError) {
    guard try sealedFiles(for: destination, path: destination.pathOf(destinationName)) != nil else {
      return try ItemCopier.move(name, in: source, to: destinationName, in: destination)
    }
    try ItemCopier.copy(name, in: source, to: destinationName, in: destination)
    try adoptCopiedKeys(of: name, in: source, copy: destinationName, in: destination, requested: nil)
    try source.removeTree(name)
  }

  /// On a sealed device, gives the copy `copyName` in `copyParent` of `name` in `source` the keys of
  /// its sealed files (`adoptKeys`); nothing otherwise.
  func adoptCopiedKeys(
    of name: String, in source: DirectoryHandle, copy copyName: String, in copyParent: DirectoryHandle,
    requested: ProtectionClass?
  ) throws(ProtFSError) {
    guard let sealed = try sealedFiles(for: copyParent, path: copyParent.pathOf(copyName)) else { return }
    do throws(ProtFSError) {
      try adoptKeys(of: name, in: source, copy: copyName, in: copyParent, requested: requested, sealed: sealed)
    } catch {
      // A copy whose keys are wrong would read as noise: it is not left behind.
      try? copyParent.removeTree(copyName)  // the key's error is the one to report
      throw error
    }
  }

  /// Writes `data` from byte 0 of the new or emptied file `fd` (at `path`) of class
  /// `protectionClass` through its key: a new file (or one without a key record, whose old bytes are
  /// gone) gets a key; an existing sealed file keeps its own, rewrapped when its class changes.
  func writeSealed(
    _ data: Data, to fd: Int32, path: String, protectionClass: ProtectionClass, existing: Bool,
    sealed: SealedFiles
  ) throws(ProtFSError) {
    let cipher: FileCipher
    do {
      if existing && SealedFiles.hasRecord(fd) {
        try sealed.rewrap(fd, to: protectionClass)
        cipher = try sealed.cipher(of: fd)
      } else {
        cipher = try sealed.seal(fd, class: protectionClass)
      }
    } catch {
      throw error.protfsError(path: path)
    }
    try SealedFileIO(fd: fd, cipher: cipher, path: path).write([UInt8](data), at: 0)
  }

  /// The plaintext of the file `name` in `parent` (at `path`): decrypted when it has a key record.
  func readSealed(_ name: String, in parent: DirectoryHandle, path: String, sealed: SealedFiles) throws(ProtFSError)
    -> [UInt8]
  {
    let file = try parent.openDescriptor(name, flags: O_RDONLY | O_NOFOLLOW)
    defer { file.close() }
    guard SealedFiles.hasRecord(file.rawValue) else {
      return try AtomicFile.read(named: name, in: parent, limit: Int.max)
    }
    let cipher: FileCipher
    do { cipher = try sealed.cipher(of: file.rawValue) } catch { throw error.protfsError(path: path) }
    let io = SealedFileIO(fd: file.rawValue, cipher: cipher, path: path)
    return try io.read(at: 0, count: try io.size())
  }

  /// Gives every sealed file of the copy `copyName` in `copyParent` (a file or a tree) the key of
  /// its original in `source`, wrapped for its own inode, with `requested` as its class when given
  /// (else its original's): a copy holds the ciphertext its attributes came with, whose key record
  /// names the original's inode.
  func adoptKeys(
    of name: String, in source: DirectoryHandle, copy copyName: String, in copyParent: DirectoryHandle,
    requested: ProtectionClass?, sealed: SealedFiles
  ) throws(ProtFSError) {
    let status = try source.status(name)
    switch status.kind {
    case .file:
      let original = try source.openDescriptor(name, flags: O_RDONLY | O_NOFOLLOW)
      defer { original.close() }
      guard SealedFiles.hasRecord(original.rawValue) else { return }
      let copy = try copyParent.openDescriptor(copyName, flags: O_RDONLY | O_NOFOLLOW)
      defer { copy.close() }
      let path = copyParent.pathOf(copyName)
      do {
        let own = try SealedFiles.record(of: original.rawValue).code.protectionClass
        try sealed.adopt(copy.rawValue, keyOf: original.rawValue, class: requested ?? own)
      } catch {
        throw error.protfsError(path: path)
      }
    case .directory:
      let from = try source.openDirectory(name)
      let to = try copyParent.openDirectory(copyName)
      for entry in try from.entries() where entry.kind == .file || entry.kind == .directory {
        try adoptKeys(of: entry.name, in: from, copy: entry.name, in: to, requested: requested, sealed: sealed)
      }
    default:
      return
    }
  }
}
