import Glibc
import ProtFSSystem

/// A sealed device's unlocked class keys between processes, in the kernel keyring of root: `unlock`
/// puts them there, the mount and every command that writes container files take them from there,
/// and a lock invalidates those it evicts, for every process at once.
///
/// The keyring is the stand-in for the phone's Secure Enclave holding the unwrapped class keys: kernel
/// memory, never swapped, readable by root's processes only (the app user's keyring is another),
/// cleared when invalidated. Class D is never put there: its key comes from the device key alone.
/// Keys are named by the keybag's UUID and the class, `protfs:<uuid>:A`, so two devices never mix.
package struct ClassKeyring: Sendable {
  /// The keybag whose keys these are.
  package let keybagUUID: [UInt8]

  /// The keyring of the keybag `uuid`.
  package init(keybagUUID: [UInt8]) { self.keybagUUID = keybagUUID }

  private func name(_ code: ProtectionClassCode) -> String {
    "protfs:" + keybagUUID.map { String($0, radix: 16).leftPadded(to: 2) }.joined() + ":\(code)"
  }

  /// Puts every key of `keys` but class D's in the keyring (replacing what is there).
  package func store(_ keys: ClassKeys) throws(ProtFSError) {
    for code in keys.available where code != .d {
      let key = keys.key(code)!
      let result = key.withUnsafeBytes { payload in Kernel.add_key(name(code), payload) }
      _ = try result.orThrow("keep the class key in the kernel keyring as", path: name(code))
    }
  }

  /// `base` (class D's key and class B's public key) with every class key the keyring holds.
  package func load(onto base: ClassKeys) throws(ProtFSError) -> ClassKeys {
    var keys: [ProtectionClassCode: SecretBytes] = [:]
    for code in ProtectionClassCode.allCases {
      if let key = base.key(code) {
        keys[code] = key
        continue
      }
      guard let serial = try serial(code) else { continue }
      let key = SecretBytes(count: 32)
      let length = try key.withUnsafeMutableBytes { buffer in
        Kernel.keyctlRead(serial, into: buffer)
      }.orThrow("read the class key from the kernel keyring as", path: name(code))
      guard length == 32 else {
        throw ProtFSError(
          .malformed, "The kernel keyring's key '\(name(code))' holds \(length) bytes, not 32.", path: name(code))
      }
      keys[code] = key
    }
    return ClassKeys(keys, classBPublicKey: base.classBPublicKey)
  }

  /// Invalidates the keys of `codes` (those a lock or a reboot evicts); a key already gone is fine.
  package func evict(_ codes: Set<ProtectionClassCode>) throws(ProtFSError) {
    for code in codes where code != .d {
      guard let serial = try serial(code) else { continue }
      switch Kernel.keyctlInvalidate(serial) {
      case .success, .failure(Errno(ENOKEY)), .failure(Errno(EKEYREVOKED)), .failure(Errno(EKEYEXPIRED)): break
      case .failure(let e):
        throw ProtFSError.system("evict the class key from the kernel keyring as", path: name(code), errno: e)
      }
    }
  }

  /// The serial of the key of `code`, or nil when the keyring holds none.
  private func serial(_ code: ProtectionClassCode) throws(ProtFSError) -> Int? {
    switch Kernel.keyctlSearch(name(code)) {
    case .success(let serial): return serial
    case .failure(Errno(ENOKEY)), .failure(Errno(EKEYREVOKED)), .failure(Errno(EKEYEXPIRED)): return nil
    case .failure(let e):
      throw ProtFSError.system("find the class key in the kernel keyring as", path: name(code), errno: e)
    }
  }
}

extension String {
  fileprivate func leftPadded(to width: Int) -> String {
    count >= width ? self : String(repeating: "0", count: width - count) + self
  }
}
