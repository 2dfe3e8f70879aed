/// A device's keybag: its five class keys, each wrapped, in Apple's tag-length-value layout.
///
/// Layout (every integer big-endian): a `DATA` item holding the header (`VERS`, `TYPE`, `UUID`,
/// `WRAP`, `SALT`, `ITER`) and, per class, `UUID`, `CLAS`, `WRAP`, `KTYP`, `WPKY` (and `PBKY`, class
/// B's public key), then `SIGN`, an HMAC-SHA256 of `DATA`'s value under a key derived from the
/// device key. An item is a four-letter tag, a 4-byte length and the value.
///
/// Class D's key is wrapped by a key derived from the device key alone; the others by the passcode
/// key: PBKDF2-HMAC-SHA256 of the passcode with `SALT` and `ITER` rounds, tangled with the device key
/// by HMAC-SHA256 (on a phone the hardware UID does the tangling, so that guesses run on the device
/// only). Without a passcode every class is wrapped by the device key alone: data protection is
/// inactive, as on iOS.
package struct Keybag: Sendable, Equatable {
  /// The layout's version.
  package static let version: UInt32 = 1
  /// The most bytes a keybag may hold; anything longer is refused before it is parsed.
  package static let maximumSize = 4096

  /// One class's entry.
  package struct Entry: Sendable, Equatable {
    /// The class.
    package var code: ProtectionClassCode
    /// The key's identifier.
    package var uuid: [UInt8]
    /// 1: wrapped by the device key alone; 3: by the device key and the passcode.
    package var wrap: UInt32
    /// 0: an AES-256 key; 1: an X25519 private key (class B).
    package var keyType: UInt32
    /// The key, wrapped (AES key wrap): 40 bytes.
    package var wrappedKey: [UInt8]
    /// Class B's public key; empty for the others.
    package var publicKey: [UInt8]
  }

  /// The keybag's identifier.
  package var uuid: [UInt8]
  /// Whether a passcode wraps the class keys (`WRAP` 3) or the device key alone (1).
  package var hasPasscode: Bool
  /// The passcode derivation's salt.
  package var salt: [UInt8]
  /// The passcode derivation's rounds.
  package var iterations: UInt32
  /// One entry per class, in the order of ``ProtectionClassCode``.
  package var entries: [Entry]

  /// Class B's public key.
  package var classBPublicKey: [UInt8] { entries.first { $0.code == .b }?.publicKey ?? [] }

  /// A new keybag with fresh class keys, wrapped with `passcode` (or the device key alone when nil);
  /// also returns the keys, all available, as a device is right after its owner sets it up.
  package static func create(
    deviceKey: SecretBytes, passcode: String?, iterations: UInt32
  ) throws(SealError) -> (Keybag, ClassKeys) {
    var keys: [ProtectionClassCode: SecretBytes] = [:]
    for code in ProtectionClassCode.allCases { keys[code] = try SecretBytes.random(count: 32) }
    let publicKey = try SealCrypto.x25519PublicKey(of: keys[.b]!)
    let classKeys = ClassKeys(keys, classBPublicKey: publicKey)
    var bag = Keybag(
      uuid: try SealCrypto.randomBytes(16), hasPasscode: false, salt: [], iterations: iterations, entries: [])
    try bag.wrap(classKeys, deviceKey: deviceKey, passcode: passcode)
    return (bag, classKeys)
  }

  /// The class keys, unwrapped with `passcode` (nil when the keybag has none); a wrong passcode
  /// throws ``SealError/wrongPasscode``.
  package func unlock(deviceKey: SecretBytes, passcode: String?) throws(SealError) -> ClassKeys {
    let passcodeKey = try hasPasscode ? Self.passcodeKey(passcode ?? "", salt, iterations, deviceKey) : nil
    let deviceOnly = try Self.deviceWrappingKey(deviceKey)
    var keys: [ProtectionClassCode: SecretBytes] = [:]
    for entry in entries {
      let kek = entry.wrap == 3 ? passcodeKey : deviceOnly
      guard let kek else { throw .damagedKeybag("class \(entry.code) needs a passcode the keybag does not have") }
      do {
        keys[entry.code] = try SealCrypto.unwrap(entry.wrappedKey, with: kek)
      } catch .keyMismatch {
        throw entry.wrap == 3 ? .wrongPasscode : .damagedKeybag("class \(entry.code)'s key does not unwrap")
      }
    }
    try checkPublicKey(keys[.b])
    return ClassKeys(keys, classBPublicKey: classBPublicKey)
  }

  /// Class D's key alone (and class B's public key): what a device has before its first unlock.
  package func deviceOnlyKeys(deviceKey: SecretBytes) throws(SealError) -> ClassKeys {
    guard let entry = entries.first(where: { $0.code == .d }) else { throw .damagedKeybag("no class D") }
    let key = try SealCrypto.unwrap(entry.wrappedKey, with: Self.deviceWrappingKey(deviceKey))
    return ClassKeys([.d: key], classBPublicKey: classBPublicKey)
  }

  /// This keybag with the same class keys wrapped with `newPasscode` (nil removes the passcode):
  /// files are never touched. `keys` must hold every class (unlock first).
  package func rewrapped(
    _ keys: ClassKeys, deviceKey: SecretBytes, newPasscode: String?, iterations: UInt32
  ) throws(SealError) -> Keybag {
    var bag = self
    bag.iterations = iterations
    try bag.wrap(keys, deviceKey: deviceKey, passcode: newPasscode)
    return bag
  }

  private mutating func wrap(_ keys: ClassKeys, deviceKey: SecretBytes, passcode: String?) throws(SealError) {
    salt = try SealCrypto.randomBytes(16)
    hasPasscode = passcode != nil
    let passcodeKey = try passcode.map { (p) throws(SealError) in try Self.passcodeKey(p, salt, iterations, deviceKey) }
    let deviceOnly = try Self.deviceWrappingKey(deviceKey)
    var wrapped: [Entry] = []
    for code in ProtectionClassCode.allCases {
      let usesPasscode = passcodeKey != nil && code.needsPasscode
      wrapped.append(
        Entry(
          code: code, uuid: try SealCrypto.randomBytes(16), wrap: usesPasscode ? 3 : 1, keyType: code == .b ? 1 : 0,
          wrappedKey: try SealCrypto.wrap(try keys.require(code), with: usesPasscode ? passcodeKey! : deviceOnly),
          publicKey: code == .b ? keys.classBPublicKey : []))
    }
    entries = wrapped
  }

  /// Class B's private key must match the public key the keybag gives to writers while locked.
  private func checkPublicKey(_ privateKey: SecretBytes?) throws(SealError) {
    guard let privateKey else { throw .damagedKeybag("no class B") }
    let derived = try SealCrypto.x25519PublicKey(of: privateKey)
    guard derived == classBPublicKey else {
      throw .damagedKeybag("class B's private key does not give its stored key")
    }
  }

  /// The key that wraps class keys with the passcode: PBKDF2 of it, tangled with the device key.
  static func passcodeKey(
    _ passcode: String, _ salt: [UInt8], _ iterations: UInt32, _ deviceKey: SecretBytes
  ) throws(SealError) -> SecretBytes {
    let derived = try SealCrypto.pbkdf2(passcode, salt: salt, iterations: Int(iterations))
    return try SealCrypto.hmac(deviceKey, label: "protfs passcode", secret: derived)
  }

  /// The key that wraps class D's key (and every class's without a passcode): the device key's alone.
  static func deviceWrappingKey(_ deviceKey: SecretBytes) throws(SealError) -> SecretBytes {
    try SealCrypto.hmac(deviceKey, label: "protfs class key wrap")
  }

  /// The key the keybag's signature is made with.
  static func signingKey(_ deviceKey: SecretBytes) throws(SealError) -> SecretBytes {
    try SealCrypto.hmac(deviceKey, label: "protfs keybag signature")
  }
}
