import Foundation
import Glibc
import ProtFS
import ProtFSSystem
import Synchronization

/// A sealed device's files as a process reads and writes them (docs/sealed.md): the mount, and every
/// command that writes container files outside it (downloads, uploads, `import-backup`, the cache
/// commands, `seal`). It holds the class keys the device's state allows, in memory only, and gives
/// each file the cipher of its own key.
///
/// A file whose class key is evicted cannot be opened (``SealError/classKeyUnavailable(_:)``, EPERM,
/// root included); a file whose key record is missing, damaged, or made for another file or class
/// fails (EIO through the mount), and nothing is decrypted with a wrong key.
package final class SealedFiles: Sendable {
  /// The device.
  package let device: Device
  /// Class D's key and class B's public key: what every state has.
  private let base: ClassKeys
  private let keyring: ClassKeyring
  /// The keys the state last applied allows.
  private let keys: Mutex<ClassKeys>

  /// The files of `device` with the keys its keyring holds now that its recorded state allows, or nil
  /// when the device is not sealed.
  package init?(device: Device) throws(ProtFSError) {
    let store = SealStore(device: device)
    guard try store.isSealed() else { return nil }
    self.device = device
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    do { base = try bag.deviceOnlyKeys(deviceKey: deviceKey) } catch {
      throw error.protfsError(path: device.stateDirectory + "/seal/keybag")
    }
    keyring = ClassKeyring(keybagUUID: bag.uuid)
    keys = Mutex(base)
    // The keyring and the state record can disagree for a moment (an unlock killed between putting
    // the keys there and committing): the state recorded decides, as it does for the mount.
    apply(try LockStore(device).record(now: Date()).protection)
  }

  /// With `keys` as they are (a device being sealed, whose keys are all at hand).
  package init(device: Device, keys: ClassKeys, keybagUUID: [UInt8]) {
    self.device = device
    base = keys
    keyring = ClassKeyring(keybagUUID: keybagUUID)
    self.keys = Mutex(keys)
  }

  /// Keeps the keys `state` allows: those in the keyring for the classes whose closed files it lets
  /// be read (class B's public key and class D's key always). The mount calls it at each change.
  /// Returns the classes `state` withdraws.
  @discardableResult
  package func apply(_ state: ProtectionState) -> Set<ProtectionClassCode> {
    let loaded = (try? keyring.load(onto: base)) ?? base  // an unreadable keyring allows least
    let withdrawn = Set(ProtectionClassCode.allCases.filter { !state.allows($0.protectionClass, .read) })
    keys.withLock { $0 = loaded.evicting(withdrawn.subtracting([.d])) }
    return withdrawn
  }

  /// The classes whose keys are held now.
  package var available: Set<ProtectionClassCode> { keys.withLock { $0.available } }

  /// The key record of the file `fd` holds; ``SealError/damagedFileKey(_:)`` when it has none.
  package static func record(of fd: Int32) throws(SealError) -> FileKeyRecord {
    var bytes = [UInt8](repeating: 0, count: 256)
    let result = bytes.withUnsafeMutableBytes { buffer in
      Kernel.getAttribute(ofDescriptor: fd, attribute: FileKeyRecord.attributeName, into: buffer)
    }
    switch result {
    case .success(let length): return try FileKeyRecord(decoding: Array(bytes[..<length]))
    case .failure(.noData): throw .damagedFileKey("it has no key record (\(FileKeyRecord.attributeName))")
    case .failure(Errno(ERANGE)): throw .damagedFileKey("its key record is longer than any protfs makes")
    case .failure(let e): throw .system("read the key record of", e)
    }
  }

  /// The file key of the sealed file `fd` holds, unwrapped with its class key.
  package func fileKey(of fd: Int32) throws(SealError) -> SecretBytes {
    try fileKeyAndClass(of: fd).key
  }

  /// The file key of the sealed file `fd` holds, and the class its key record says wraps it.
  private func fileKeyAndClass(of fd: Int32) throws(SealError) -> (key: SecretBytes, code: ProtectionClassCode) {
    let record = try Self.record(of: fd)
    return (try record.unwrap(inode: try Self.inode(fd), keys: keys.withLock { $0 }), record.code)
  }

  /// Unwraps `record` for the file numbered `inode` with the keys held now, and drops the key at
  /// once: whether a record belongs to its file and class, without opening the file (the audit's
  /// check). Throws what ``fileKey(of:)`` would.
  package func verify(_ record: FileKeyRecord, inode: UInt64) throws(SealError) {
    _ = try record.unwrap(inode: inode, keys: keys.withLock { $0 })
  }

  /// The cipher of the sealed file `fd` holds, from its key record.
  package func cipher(of fd: Int32) throws(SealError) -> FileCipher {
    FileCipher(key: try fileKey(of: fd))
  }

  /// The cipher of the sealed file `fd` holds, and the class its key is wrapped with.
  package func cipherAndClass(of fd: Int32) throws(SealError) -> (FileCipher, ProtectionClassCode) {
    let (key, code) = try fileKeyAndClass(of: fd)
    return (FileCipher(key: key), code)
  }

  /// A fresh key for the new, empty file `fd` of class `cls`, written beside its class; its cipher.
  /// Class B needs only its public key, so a locked device can make such files; class A cannot.
  package func seal(_ fd: Int32, class cls: ProtectionClass) throws(SealError) -> FileCipher {
    let (record, key) = try FileKeyRecord.make(
      for: ProtectionClassCode(cls), inode: try Self.inode(fd), keys: keys.withLock { $0 })
    try Self.write(record, to: fd)
    return FileCipher(key: key)
  }

  /// Wraps the key of the sealed file `fd` with class `cls`'s key instead of its own: a class change.
  /// Contents are not touched; both class keys are needed (class B's public key suffices to wrap).
  package func rewrap(_ fd: Int32, to cls: ProtectionClass) throws(SealError) {
    let record = try Self.record(of: fd)
    let code = ProtectionClassCode(cls)
    guard record.code != code else { return }
    let inode = try Self.inode(fd)
    let current = keys.withLock { $0 }
    let key = try record.unwrap(inode: inode, keys: current)
    try Self.write(try FileKeyRecord.wrap(key, for: code, inode: inode, keys: current), to: fd)
  }

  /// Gives the new file `fd`, a byte-for-byte copy (or clone) of the sealed file `source`, the key of
  /// `source` wrapped for its own inode with class `cls`'s key: the copy's ciphertext is the
  /// source's, so it decrypts with the same key. A key record copied with the other attributes is
  /// replaced (it names the source's inode and would not unwrap).
  package func adopt(_ fd: Int32, keyOf source: Int32, class cls: ProtectionClass) throws(SealError) {
    let key = try fileKey(of: source)
    let record = try FileKeyRecord.wrap(
      key, for: ProtectionClassCode(cls), inode: try Self.inode(fd), keys: keys.withLock { $0 })
    try Self.write(record, to: fd)
  }

  /// Whether `fd`'s file has a key record (is sealed, or is meant to be).
  package static func hasRecord(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    let result = withUnsafeMutableBytes(of: &byte) { buffer in
      Kernel.getAttribute(ofDescriptor: fd, attribute: FileKeyRecord.attributeName, into: buffer)
    }
    switch result {
    case .success, .failure(Errno(ERANGE)): return true
    case .failure: return false
    }
  }

  private static func write(_ record: FileKeyRecord, to fd: Int32) throws(SealError) {
    let result = record.encoded.withUnsafeBytes { value in
      Kernel.setAttribute(.descriptor(fd, pathOnly: false), attribute: FileKeyRecord.attributeName, value: value)
    }
    if case .failure(let e) = result { throw .system("write the key record of", e) }
  }

  static func inode(_ fd: Int32) throws(SealError) -> UInt64 {
    var s = stat()
    if case .failure(let e) = Kernel.fstat(fd, &s) { throw .system("inspect", e) }
    return UInt64(s.st_ino)
  }
}
