import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// The keys of a sealed device (docs/sealed.md) as the mount holds them: the class keys the device's
/// state allows, in memory only, and each file's key unwrapped at its open.
///
/// The mount is the only way to a sealed file's plaintext. At each change of state it takes the keys
/// `unlock` left in root's kernel keyring and drops those the state withdraws: class A's key and
/// class B's private key at a lock, all but class D's at a reboot. A file whose class key is gone
/// cannot be opened (EPERM, root included); a file whose key record is missing, damaged, or made for
/// another file or class fails with EIO, and nothing is decrypted with a wrong key.
final class MountSeal: Sendable {
  /// Class D's key and class B's public key: what every state has.
  private let base: ClassKeys
  private let keyring: ClassKeyring
  /// The keys the state last applied allows.
  private let keys: Mutex<ClassKeys>

  /// The seal of `device`, or nil when the device is not sealed.
  init?(device: Device) throws(ProtFSError) {
    let store = SealStore(device: device)
    guard try store.isSealed() else { return nil }
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    do { base = try bag.deviceOnlyKeys(deviceKey: deviceKey) } catch {
      throw error.protfsError(path: device.stateDirectory)
    }
    keyring = ClassKeyring(keybagUUID: bag.uuid)
    keys = Mutex(base)
  }

  /// Keeps the keys `state` allows: those in the keyring for the classes whose closed files it
  /// lets be read (class B's public key and class D's key always).
  func apply(_ state: ProtectionState) {
    let loaded = (try? keyring.load(onto: base)) ?? base  // an unreadable keyring allows least
    let withdrawn = Set(ProtectionClassCode.allCases.filter { !state.allows($0.protectionClass, .read) })
    keys.withLock { $0 = loaded.evicting(withdrawn.subtracting([.d])) }
  }

  /// The cipher of the sealed file `fd` holds, from its key record.
  func cipher(of fd: Int32) throws(Errno) -> FileCipher {
    var record = [UInt8](repeating: 0, count: 256)
    let length = try record.withUnsafeMutableBytes { buffer in
      Kernel.getAttribute(ofDescriptor: fd, attribute: FileKeyRecord.attributeName, into: buffer)
    }.mapError { $0 == .noData || $0.rawValue == ERANGE ? Errno(EIO) : $0 }.get()  // none, or no record
    let current = keys.withLock { $0 }
    do {
      let parsed = try FileKeyRecord(decoding: Array(record[..<length]))
      return FileCipher(key: try parsed.unwrap(inode: try Self.inode(fd), keys: current))
    } catch .classKeyUnavailable {
      throw .notPermitted
    } catch {
      throw Errno(EIO)
    }
  }

  /// A fresh key for the new file `fd` of class `cls`, written beside its class; its cipher.
  func seal(_ fd: Int32, class cls: ProtectionClass) throws(Errno) -> FileCipher {
    let current = keys.withLock { $0 }
    let made: (FileKeyRecord, SecretBytes)
    do {
      made = try FileKeyRecord.make(for: ProtectionClassCode(cls), inode: try Self.inode(fd), keys: current)
    } catch .classKeyUnavailable {
      throw .notPermitted
    } catch {
      throw Errno(EIO)
    }
    try made.0.encoded.withUnsafeBytes { value in
      Kernel.setAttribute(.descriptor(fd, pathOnly: false), attribute: FileKeyRecord.attributeName, value: value)
    }.get()
    return FileCipher(key: made.1)
  }

  private static func inode(_ fd: Int32) throws(SealError) -> UInt64 {
    var s = stat()
    guard case .success = Kernel.fstat(fd, &s) else { throw .crypto("fstat failed") }
    return UInt64(s.st_ino)
  }
}
