import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import Synchronization

/// A sealed file's key as an open handle holds it. A state that withdraws the file's class takes
/// it from the handle (``OpenFileKeys/evict(_:)``), as iOS discards a complete file's key at a
/// lock even while the file is open; the handle's next I/O the state allows again unwraps it anew
/// from the file's record. Class B's keys stay with their handles: an open file of that class
/// stays readable and writable while locked (`NSFileProtectionCompleteUnlessOpen`).
final class HandleKey: Sendable {
  /// The class the file's key is wrapped with.
  let code: ProtectionClassCode
  private let seal: MountSeal
  private let held: Mutex<FileCipher?>

  fileprivate init(_ cipher: FileCipher, code: ProtectionClassCode, seal: MountSeal) {
    self.code = code
    self.seal = seal
    held = Mutex(cipher)
  }

  /// The cipher of the file `fd` holds: the one held, else unwrapped again now (EPERM while its
  /// class key is evicted). Unwrapped under the lock an eviction takes: a key unwrapped with keys
  /// that are withdrawn meanwhile is not kept.
  func cipher(_ fd: Int32) throws(Errno) -> FileCipher {
    try held.withLock { (held) throws(Errno) -> FileCipher in
      if let held { return held }
      let cipher = try seal.cipher(of: fd)
      held = cipher
      return cipher
    }
  }

  /// Whether the key is held now.
  var isHeld: Bool { held.withLock { $0 != nil } }

  fileprivate func drop() { held.withLock { $0 = nil } }
}

/// The keys the open handles of a sealed mount hold, by class: a state change drops those of the
/// classes it withdraws. A handle's key leaves the registry with the handle.
final class OpenFileKeys: Sendable {
  private let keys = Mutex<[ObjectIdentifier: WeakKey]>([:])

  /// A key for a handle being opened, registered until the handle goes.
  func register(_ cipher: FileCipher, code: ProtectionClassCode, seal: MountSeal) -> HandleKey {
    let key = HandleKey(cipher, code: code, seal: seal)
    keys.withLock { $0[ObjectIdentifier(key)] = WeakKey(key: key) }
    return key
  }

  /// A handle closed: its key is no longer held.
  func remove(_ key: HandleKey) { _ = keys.withLock { $0.removeValue(forKey: ObjectIdentifier(key)) } }

  /// Drops the keys of open files of the classes in `codes` (after the mount's class keys were).
  func evict(_ codes: Set<ProtectionClassCode>) {
    let open = keys.withLock { $0.values.compactMap(\.key) }
    for key in open where codes.contains(key.code) { key.drop() }
  }

  /// How many open handles hold their file's key now, by class name: the value of
  /// `user.protfs.mount-file-keys` on the mount's root.
  func heldCounts() -> [String: Int] {
    let open = keys.withLock { $0.values.compactMap(\.key) }
    var counts: [String: Int] = [:]
    for key in open where key.isHeld { counts[key.code.protectionClass.name, default: 0] += 1 }
    return counts
  }
}

/// A registry entry: the registry does not keep a handle's key alive.
private struct WeakKey {
  weak var key: HandleKey?
}
