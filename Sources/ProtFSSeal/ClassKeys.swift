/// The class keys a device holds in memory: those its lock state allows, never written anywhere.
///
/// Class B is a key pair: its public key is always here (new class-B files are wrapped to it while
/// locked), its private key only while unlocked. Evicting a class drops this value's reference to
/// its key; ``SecretBytes`` zeroes the bytes when the last holder (an operation in flight) lets go.
package struct ClassKeys: Sendable {
  private var keys: [ProtectionClassCode: SecretBytes]
  /// Class B's X25519 public key.
  package let classBPublicKey: [UInt8]

  /// Keys for the classes in `keys`, with class B's public key.
  package init(_ keys: [ProtectionClassCode: SecretBytes], classBPublicKey: [UInt8]) {
    self.keys = keys
    self.classBPublicKey = classBPublicKey
  }

  /// The key of `code` (for class B, its private key), or nil when it is evicted.
  package func key(_ code: ProtectionClassCode) -> SecretBytes? { keys[code] }

  /// The key of `code`, or ``SealError/classKeyUnavailable(_:)``.
  package func require(_ code: ProtectionClassCode) throws(SealError) -> SecretBytes {
    guard let key = keys[code] else { throw .classKeyUnavailable(code) }
    return key
  }

  /// The classes whose keys are here.
  package var available: Set<ProtectionClassCode> { Set(keys.keys) }

  /// Drops the keys of `codes`; each is zeroed once no operation holds it.
  package mutating func evict(_ codes: Set<ProtectionClassCode>) {
    for code in codes { keys[code] = nil }
  }

  /// These keys without those of `codes`.
  package func evicting(_ codes: Set<ProtectionClassCode>) -> ClassKeys {
    var copy = self
    copy.evict(codes)
    return copy
  }
}
