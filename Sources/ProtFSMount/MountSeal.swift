import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem

/// The keys of a sealed device (docs/sealed.md) as the mount holds them: ``SealedFiles``, whose
/// errors become the kernel's. The mount is the only way to a sealed file's plaintext: a file whose
/// class key is gone cannot be opened (EPERM, root included); a file whose key record is missing,
/// damaged, or made for another file or class fails with EIO.
final class MountSeal: Sendable {
  private let files: SealedFiles
  /// The sealed files whose pages a state change drops.
  let pages = SealedPages()
  /// The keys open handles hold, which a state change drops with the class keys.
  let openKeys = OpenFileKeys()

  /// The seal of `device`, or nil when the device is not sealed.
  init?(device: Device) throws(ProtFSError) {
    guard let files = try SealedFiles(device: device) else { return nil }
    self.files = files
  }

  /// Keeps the keys `state` allows, and drops those of open files of the classes it withdraws
  /// (but class B's, whose open files stay usable while locked).
  func apply(_ state: ProtectionState) {
    files.apply(state)
    let withdrawn = ProtectionClassCode.allCases.filter { !state.allows($0.protectionClass, .read) }
    openKeys.evict(Set(withdrawn).subtracting([.b, .d]))
  }

  /// The cipher of the sealed file `fd` holds, from its key record.
  func cipher(of fd: Int32) throws(Errno) -> FileCipher {
    do { return try files.cipher(of: fd) } catch { throw Self.errno(error) }
  }

  /// The key of the sealed file `fd` holds, for a handle opened on it (registered in ``openKeys``).
  func handleKey(of fd: Int32) throws(Errno) -> HandleKey {
    do {
      let (cipher, code) = try files.cipherAndClass(of: fd)
      return openKeys.register(cipher, code: code, seal: self)
    } catch {
      throw Self.errno(error)
    }
  }

  /// A fresh key for the new file `fd` of class `cls`, written beside its class, for the handle
  /// that creates it.
  func seal(_ fd: Int32, class cls: ProtectionClass) throws(Errno) -> HandleKey {
    do {
      return openKeys.register(try files.seal(fd, class: cls), code: ProtectionClassCode(cls), seal: self)
    } catch {
      throw Self.errno(error)
    }
  }

  /// A class change to `cls` of what `fd` (open for reading) holds: a sealed file's key is wrapped
  /// anew with `cls`'s key; for a directory, the keys of the sealed files below it that inherit the
  /// class. EPERM, and nothing changed, when a key it needs is evicted.
  func rewrap(_ fd: Int32, to cls: ProtectionClass) throws(Errno) {
    var s = stat()
    try Kernel.fstat(fd, &s).get()
    guard s.st_mode & S_IFMT == S_IFDIR else {
      guard SealedFiles.hasRecord(fd) else { return }
      do { return try files.rewrap(fd, to: cls) } catch { throw Self.errno(error) }
    }
    do {
      let directory = DirectoryHandle(
        fd: try Kernel.openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC).orThrow("open", path: "(a directory)"),
        path: "(a directory)")
      let rewraps = try SealedFiles.rewraps(of: nil, in: directory, to: cls, recursive: false)
      try files.requireKeys(for: rewraps)
      try files.perform(rewraps)
    } catch {
      throw Errno(error.errno ?? EIO)
    }
  }

  /// What the kernel says for `error`: EPERM for an evicted key, the call's own error, else EIO.
  private static func errno(_ error: SealError) -> Errno {
    switch error {
    case .classKeyUnavailable: .notPermitted
    case .system(_, let e): e
    default: Errno(EIO)
    }
  }
}
