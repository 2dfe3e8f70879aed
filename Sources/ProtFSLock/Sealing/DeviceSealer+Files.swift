import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// The files of a `protfs seal`: found with their effective classes (the lock's walk, so the rule is
/// the one the lock and the mount apply), checked, then each replaced by its sealed copy.
extension LockController {
  /// The regular files of `Containers/` with their effective classes; a sealed copy that an
  /// interrupted run named but did not rename is removed (its plaintext original is still there).
  func filesToSeal() throws(ProtFSError) -> [WalkEntry] {
    let walker = DeviceWalker(device: device, readsClasses: true, threads: 1)
    let (found, summary) = try walker.walk(make: { FilesFound() }) { found, entry in
      guard entry.kind == .file else { return }
      if let error = entry.classError, error.code != .corruptAttribute {
        found.failures.append(error)
      } else if entry.name.text?.hasPrefix(Self.sealingCopyPrefix) == true,
        case .success(.some) = entry.parent.attributeResult(FileKeyRecord.attributeName, of: entry.name)
      {
        found.copies.append(entry)
      } else {
        found.files.append(entry)
      }
    }
    if let failure = (found.flatMap(\.failures) + summary.failures).first { throw failure }
    if isBeingSealed {
      for copy in found.flatMap(\.copies) {
        _ = try copy.name.withCString { Kernel.unlinkat(copy.parent.fd, $0, 0) }.orThrow("remove", path: copy.path)
      }
    }
    return found.flatMap(\.files)
  }

  /// Refuses, naming the first, the files that are not sealed yet and have more than one link or
  /// are held open by a process.
  func refuseUnsealable(_ files: [WalkEntry]) throws(ProtFSError) {
    var holders: [[UInt64]: OpenFile] = [:]
    for file in device.openFiles() {
      var status = stat()
      guard case .success = Kernel.stat(file.path, &status) else { continue }
      holders[[UInt64(status.st_dev), UInt64(status.st_ino)]] = file
    }
    for file in files {
      guard case .success(nil) = file.parent.attributeResult(FileKeyRecord.attributeName, of: file.name) else {
        continue
      }
      var status = stat()
      _ = try file.name.withCString { Kernel.fstatat(file.parent.fd, $0, &status, AT_SYMLINK_NOFOLLOW) }
        .orThrow("inspect", path: file.path)
      if status.st_nlink > 1 {
        throw ProtFSError(
          .invalidArgument,
          "Cannot seal '\(file.path)': it has \(status.st_nlink) links, and its other names (one may be "
            + "outside the device) would keep its plaintext. Nothing was changed.", path: file.path,
          remedy: .advice("copy it instead of linking it, then seal the device again"))
      }
      if let holder = holders[[UInt64(status.st_dev), UInt64(status.st_ino)]] {
        throw ProtFSError(
          .invalidArgument,
          "Cannot seal '\(file.path)': process \(holder.pid) (\(holder.command)) holds it open, and its "
            + "writes would go to the plaintext the sealed copy replaces. Nothing was changed.", path: file.path,
          errno: EBUSY,
          remedy: .advice("end that process or have it close the file, then seal the device again"))
      }
    }
  }

  /// Replaces the file `file` names by a sealed copy (key, contents, attributes, owner, mode and
  /// times); false when it was sealed already. The copy is made without a name (`O_TMPFILE`) beside
  /// it, synced, named, then renamed over it: a kill leaves the old file or the new one.
  static func seal(_ file: WalkEntry, with sealed: SealedFiles) throws(ProtFSError) -> Bool {
    let (parent, path) = (file.parent, file.path)
    let source = FileDescriptor(
      owning: try file.name.withCString {
        Kernel.openat(parent.fd, $0, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
      }.orThrow("open", path: path))
    guard !SealedFiles.hasRecord(source.rawValue) else { return false }
    var status = stat()
    _ = try Kernel.fstat(source.rawValue, &status).orThrow("inspect", path: path)
    guard status.st_mode & S_IFMT == S_IFREG else { return false }
    let copy = FileDescriptor(
      owning: try Kernel.openTmpfile(parent.fd, 0o600).orThrow("make a file beside", path: path))
    _ = try Kernel.attr_copy_fd(path, source.rawValue, path, copy.rawValue)
      .orThrow("copy the extended attributes of", path: path)
    // The owner before the mode: a chown clears the set-id bits.
    _ = try Kernel.fchown(copy.rawValue, status.st_uid, status.st_gid).orThrow("give the owner of", path: path)
    _ = try Kernel.fchmod(copy.rawValue, status.st_mode & 0o7777).orThrow("give the mode of", path: path)
    let cipher: FileCipher
    do { cipher = try sealed.seal(copy.rawValue, class: file.protectionClass ?? .complete) } catch {
      throw error.protfsError(path: path)
    }
    try copyPlaintext(from: source.rawValue, to: SealedFileIO(fd: copy.rawValue, cipher: cipher, path: path))
    let times = [status.st_atim, status.st_mtim]
    _ = try Kernel.futimens(copy.rawValue, times).orThrow("give the times of", path: path)
    _ = try Kernel.fsync(copy.rawValue).orThrow("sync the sealed copy of", path: path)
    let temporary = sealingCopyPrefix + String(UInt64.random(in: 0...UInt64.max), radix: 16)
    _ = try Kernel.linkTmpfile(copy.rawValue, parent.fd, temporary).orThrow("name the sealed copy of", path: path)
    let renamed = file.name.withCString { Kernel.renameat(parent.fd, temporary, parent.fd, $0) }
    if case .failure(let e) = renamed {
      _ = Kernel.unlinkat(parent.fd, temporary, 0)  // the plaintext stays; the error says why
      throw ProtFSError.system("replace with its sealed copy", path: path, errno: e)
    }
    return true
  }

  /// Encrypts everything `source` holds into `destination`, a megabyte at a time.
  private static func copyPlaintext(from source: Int32, to destination: SealedFileIO) throws(ProtFSError) {
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    var offset = 0
    while true {
      let count = try buffer.withUnsafeMutableBytes { raw in
        Kernel.pread(source, raw.baseAddress, raw.count, off_t(offset))
      }.orThrow("read", path: destination.path)
      guard count > 0 else { return }
      try destination.write(Array(buffer[..<count]), at: offset)
      offset += count
    }
  }
}

/// What the walk of `filesToSeal` gathers on each thread.
private struct FilesFound: Sendable {
  /// Regular files, sealed or not.
  var files: [WalkEntry] = []
  /// Sealed copies an interrupted run left beside their originals.
  var copies: [WalkEntry] = []
  /// Classes that could not be read.
  var failures: [ProtFSError] = []
}
