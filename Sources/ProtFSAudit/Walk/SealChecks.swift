import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// A sealed device's keys as the audit checks its files' key records against them (docs/sealed.md).
package struct AuditSeal: Sendable {
  /// The keys root's keyring holds now; nil when they cannot be read, and the records are then
  /// checked against their files' classes only.
  package let files: SealedFiles?
}

extension AuditTarget {
  /// Whether a container of the target is on a sealed device (one whose state cannot be read is
  /// reported by the walk of its containers).
  package var hasSealedDevice: Bool {
    units.contains { unit in unit.device.map { (try? SealStore(device: $0).isSealed()) == true } ?? false }
  }
}

/// The checks of a sealed device's files: each regular file's key record (`user.protfs.key`)
/// against its class and, when the key of that class is held, against the file itself. No key, and
/// no byte of a record, is ever part of a finding.
extension Worker {
  /// Checks the key record of the regular file `name` in `dirfd`, whose effective class is
  /// `effective`: a non-empty file without one is plaintext at rest (PFS018); a record that is
  /// damaged, of another class, or made for another file is PFS019.
  package mutating func checkSeal(
    dirfd: Int32, name: UnsafePointer<CChar>, _ effective: ProtectionClass, _ seal: AuditSeal
  ) {
    var bytes = [UInt8](repeating: 0, count: 256)
    let read = bytes.withUnsafeMutableBytes { buffer in
      FileKeyRecord.attributeName.withCString { attribute in
        Kernel.getAttribute(dirfd: dirfd, rawName: name, attribute: attribute, into: buffer)
      }
    }
    let record: FileKeyRecord
    switch read {
    case .success(let length):
      do {
        record = try FileKeyRecord(decoding: Array(bytes[..<length]))
      } catch {
        return reportKeyMismatch(error, effective)
      }
    case .failure(.noData):
      return checkPlaintext(dirfd: dirfd, name: name)
    case .failure(.range):
      return reportKeyMismatch(.damagedFileKey("its key record is longer than any protfs makes"), effective)
    case .failure(let e) where e.rawValue == ENOENT:
      return
    case .failure(let e):
      return unreadable("read the key record of", errno: e.rawValue)
    }
    let code = ProtectionClassCode(effective)
    guard record.code == code else {
      return emit(
        .sealedKeyMismatch,
        "The file's key record is wrapped for class \(record.code) (\(record.code.protectionClass.shortName)) but "
          + "the file's class is \(code) (\(effective.shortName)): its contents are as available as the record's "
          + "class, or cannot be read.",
        expected: "a key record of class \(code)", actual: "a key record of class \(record.code)")
    }
    guard let files = seal.files else { return }
    var status = stat()
    switch Kernel.fstatat(dirfd, name, &status, AT_SYMLINK_NOFOLLOW) {
    case .success: break
    case .failure(let e) where e.rawValue == ENOENT: return
    case .failure(let e): return unreadable("inspect", errno: e.rawValue)
    }
    do {
      try files.verify(record, inode: UInt64(status.st_ino))
    } catch .classKeyUnavailable {
      return  // evicted while the device is locked: checked against its class alone
    } catch .system(_, let e) {
      unreadable("unwrap the key record of", errno: e.rawValue)
    } catch .crypto(let why) {
      summary.incomplete = true
      emit(.unreadable, "Cannot check the key record of '\(DisplayPath.text(prefix + path))': \(why).")
    } catch {
      reportKeyMismatch(error, effective)
    }
  }

  /// Reports the file `name` in `dirfd`, which has no key record, when it is a regular file that
  /// holds bytes: plaintext inside a sealed device's container.
  private mutating func checkPlaintext(dirfd: Int32, name: UnsafePointer<CChar>) {
    var status = stat()
    switch Kernel.fstatat(dirfd, name, &status, AT_SYMLINK_NOFOLLOW) {
    case .success: break
    case .failure(let e) where e.rawValue == ENOENT: return
    case .failure(let e): return unreadable("inspect", errno: e.rawValue)
    }
    guard status.st_mode & S_IFMT == S_IFREG, status.st_size > 0 else { return }
    emit(
      .plaintextInSealedContainer,
      "The file has no key record (\(FileKeyRecord.attributeName)) on a sealed device: its \(status.st_size) bytes "
        + "are plaintext at rest, readable from the backing file even while the device is locked.",
      expected: "a sealed file", actual: "plaintext")
  }

  /// Reports a key record that does not belong to its file: `error` says why (never with key bytes).
  private mutating func reportKeyMismatch(_ error: SealError, _ effective: ProtectionClass) {
    let why =
      switch error {
      case .damagedFileKey(let what): "the record is damaged: \(what)"
      case .keyMismatch:
        "it does not unwrap with its class key for this file: it was copied from another file, or changed"
      default: error.protfsError(path: DisplayPath.text(prefix + path)).message
      }
    emit(
      .sealedKeyMismatch,
      "The file's key record does not match it (\(why)); the mount refuses the file (EIO) and nothing is "
        + "decrypted with that key.",
      expected: "a key record of class \(ProtectionClassCode(effective)) made for this file",
      actual: "a mismatched record")
  }
}
