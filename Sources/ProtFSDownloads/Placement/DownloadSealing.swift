import Glibc
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// A download file system on a device that may be sealed (docs/sealed.md): every file a session
/// makes there gets a key of its own, for the class it is labelled with, and its bytes are written
/// and read through that key; a file placed where another class applies has its key rewrapped.
package protocol SealingDownloadFileSystem: DownloadFileSystem {
  /// The device's files with the class keys its state allows now; nil when it is not sealed.
  func sealedFiles() throws(ProtFSError) -> SealedFiles?

  /// The class a file made in `directory` now is labelled with (`labelNew(file:for:)`).
  func newFileClass(in directory: DirectoryHandle) throws(ProtFSError) -> ProtectionClass
}

extension DownloadFileSystem {
  /// The device's sealed files (their keys as the state allows now), or nil where nothing is sealed:
  /// a file system outside a device, or an unsealed device.
  package func sealing() throws(ProtFSError) -> SealedFiles? {
    guard let sealing = self as? any SealingDownloadFileSystem else { return nil }
    return try sealing.sealedFiles()
  }

  /// Gives the new, empty file `fd` in `directory` (labelled already) a key for its class and returns
  /// its cipher; nil where nothing is sealed. A class whose key is evicted (class A while locked)
  /// fails with EPERM, as creating the file does on a locked phone.
  package func sealNew(_ fd: Int32, in directory: DirectoryHandle) throws(ProtFSError) -> FileCipher? {
    guard let sealing = self as? any SealingDownloadFileSystem, let sealed = try sealing.sealedFiles() else {
      return nil
    }
    let protectionClass = try sealing.newFileClass(in: directory)
    do {
      return try sealed.seal(fd, class: protectionClass)
    } catch {
      throw error.downloadError(creatingIn: directory.path)
    }
  }

  /// Gives the new file `fd` in `directory`, a byte-for-byte copy or clone of `source`, the key of
  /// `source` (when it is sealed) wrapped for its own inode and the class files in `directory` get:
  /// the copy holds the same ciphertext. Nothing where nothing is sealed.
  package func adoptKey(_ fd: Int32, of source: Int32, in directory: DirectoryHandle) throws(ProtFSError) {
    guard SealedFiles.hasRecord(source), let sealing = self as? any SealingDownloadFileSystem,
      let sealed = try sealing.sealedFiles()
    else { return }
    let protectionClass = try sealing.newFileClass(in: directory)
    do {
      try sealed.adopt(fd, keyOf: source, class: protectionClass)
    } catch {
      throw error.downloadError(creatingIn: directory.path)
    }
  }

  /// The cipher of the existing file `fd` (at `path`), whose bytes a session reads or continues;
  /// nil where nothing is sealed or the file has no key record (a file is sealed iff it has one).
  package func cipher(of fd: Int32, path: String) throws(ProtFSError) -> FileCipher? {
    guard SealedFiles.hasRecord(fd), let sealed = try sealing() else { return nil }
    do {
      return try sealed.cipher(of: fd)
    } catch {
      throw error.protfsError(path: path)
    }
  }
}

extension SealError {
  /// The error of making a key for a new file in the directory at `path`: an evicted class key is the
  /// lock's "Operation not permitted", as creating the file is refused on a locked phone.
  package func downloadError(creatingIn path: String) -> ProtFSError {
    guard case .classKeyUnavailable(let code) = self else { return protfsError(path: path) }
    return ProtFSError(
      .protectedDataUnavailable,
      "Cannot create a file in '\(path)': Operation not permitted (the key of class \(code) is evicted while the "
        + "device is locked).", path: path, errno: EPERM)
  }
}
