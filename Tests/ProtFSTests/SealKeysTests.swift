import Foundation
import ProtFSSeal
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Sealed devices' keys and cipher (ProtFSSeal), against the standards' test vectors where there are
/// some, and every way a key, a record or a keybag can be swapped, damaged or cut short.
@Suite struct SealKeysTests {
  static let iterations: UInt32 = 1_000  // the floor; tests need no slowness

  static func hex(_ text: String) -> [UInt8] {
    stride(from: 0, to: text.count, by: 2).map {
      let start = text.index(text.startIndex, offsetBy: $0)
      return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
    }
  }

  static func secret(_ text: String) -> SecretBytes {
    hex(text).withUnsafeBytes { SecretBytes(copying: $0) }
  }

  static func bytes(_ secret: SecretBytes) -> [UInt8] { secret.withUnsafeBytes { Array($0) } }

  @Test func keyWrapMatchesRFC3394() throws {
    // RFC 3394 §4.6: 256 bits of key data wrapped with a 256-bit KEK.
    let kek = Self.secret("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F")
    let key = Self.secret("00112233445566778899AABBCCDDEEFF000102030405060708090A0B0C0D0E0F")
    let wrapped = try SealCrypto.wrap(key, with: kek)
    #expect(wrapped == Self.hex("28C9F404C4B810F4CBCCB35CFB87F8263F5786E2D80ED326CBC7F0E71A99F43BFB988B9B7A02DD21"))
    #expect(Self.bytes(try SealCrypto.unwrap(wrapped, with: kek)) == Self.bytes(key))
    var changed = wrapped
    changed[5] ^= 1
    #expect(throws: SealError.keyMismatch) { try SealCrypto.unwrap(changed, with: kek) }
  }

  @Test func x25519MatchesRFC7748() throws {
    // RFC 7748 §6.1.
    let alice = Self.secret("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    let bobPublic = Self.hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    #expect(
      try SealCrypto.x25519PublicKey(of: alice)
        == Self.hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
    #expect(
      Self.bytes(try SealCrypto.x25519(alice, bobPublic))
        == Self.hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"))
    // A public key of small order (zero) gives no shared secret.
    #expect(throws: SealError.keyMismatch) { try SealCrypto.x25519(alice, [UInt8](repeating: 0, count: 32)) }
  }

  @Test func xtsMatchesIEEE1619() throws {
    // IEEE 1619 vector 10: XTS-AES-256, data unit 0xff, 512 bytes counting up.
    let key = Self.secret(
      "2718281828459045235360287471352662497757247093699959574966967627"
        + "3141592653589793238462643383279502884197169399375105820974944592")
    var data = (0..<512).map { UInt8($0 % 256) }
    let cipher = FileCipher(key: key)
    try data.withUnsafeMutableBytes { try cipher.encrypt($0, at: 255 * UInt64(FileCipher.blockSize)) }
    #expect(
      Array(data[..<64])
        == Self.hex(
          "1c3b3a102f770386e4836c99e370cf9bea00803f5e482357a4ae12d414a3e63b"
            + "5d31e276f8fe4a8d66b317f9ac683f44680a86ac35adfc3345befecb4bb188fd"))
    try data.withUnsafeMutableBytes { try cipher.decrypt($0, at: 255 * UInt64(FileCipher.blockSize)) }
    #expect(data == (0..<512).map { UInt8($0 % 256) })
  }

  @Test(arguments: [0, 1, 15, 16, 17, 4095, 4096, 4097, 4111, 4112, 3 * 4096 + 7])
  func everyLengthRoundTripsAndKeepsItsLength(count: Int) throws {
    let cipher = FileCipher(key: try SecretBytes.random(count: FileKeyRecord.fileKeyLength))
    let plain = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
    var data = plain
    try data.withUnsafeMutableBytes { try cipher.encrypt($0, at: 8192) }
    #expect(data.count == count)
    if count > 0 { #expect(data != plain) }
    try data.withUnsafeMutableBytes { try cipher.decrypt($0, at: 8192) }
    #expect(data == plain)
  }

  @Test func blocksAtOtherOffsetsEncryptDifferently() throws {
    let cipher = FileCipher(key: try SecretBytes.random(count: FileKeyRecord.fileKeyLength))
    var first = [UInt8](repeating: 0x41, count: 4096)
    var second = first
    try first.withUnsafeMutableBytes { try cipher.encrypt($0, at: 0) }
    try second.withUnsafeMutableBytes { try cipher.encrypt($0, at: 4096) }
    #expect(first != second)
    // A whole file encrypted at once equals its blocks encrypted one by one.
    var whole = [UInt8](repeating: 0x41, count: 8192)
    try whole.withUnsafeMutableBytes { try cipher.encrypt($0, at: 0) }
    #expect(whole == first + second)
  }

  @Test func aKeybagUnlocksWithItsPasscodeOnly() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (bag, keys) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    let decoded = try Keybag(decoding: try bag.encoded(deviceKey: deviceKey), deviceKey: deviceKey)
    #expect(decoded == bag)
    let unlocked = try decoded.unlock(deviceKey: deviceKey, passcode: "1234")
    for code in ProtectionClassCode.allCases {
      #expect(unlocked.key(code)!.isEqual(to: keys.key(code)!), "class \(code)")
    }
    #expect(throws: SealError.wrongPasscode) { try decoded.unlock(deviceKey: deviceKey, passcode: "1235") }
    #expect(throws: SealError.wrongPasscode) { try decoded.unlock(deviceKey: deviceKey, passcode: nil) }
    // Before the first unlock only class D's key is there.
    let boot = try decoded.deviceOnlyKeys(deviceKey: deviceKey)
    #expect(boot.available == [.d])
    #expect(boot.key(.d)!.isEqual(to: keys.key(.d)!))
    #expect(boot.classBPublicKey == keys.classBPublicKey)
  }

  @Test func anotherDevicesKeyOpensNothing() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (bag, _) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    let other = try SecretBytes.random(count: 32)
    #expect(throws: SealError.damagedKeybag("its signature does not verify with this device's key")) {
      try Keybag(decoding: try bag.encoded(deviceKey: deviceKey), deviceKey: other)
    }
    // Even past the signature, the passcode key is tangled with the device key.
    #expect(throws: SealError.wrongPasscode) { try bag.unlock(deviceKey: other, passcode: "1234") }
  }

  @Test func changingThePasscodeRewrapsTheSameClassKeys() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (bag, keys) = try Keybag.create(deviceKey: deviceKey, passcode: nil, iterations: Self.iterations)
    #expect(!bag.hasPasscode)
    #expect(try bag.unlock(deviceKey: deviceKey, passcode: nil).available.count == 5)
    let withPasscode = try bag.rewrapped(keys, deviceKey: deviceKey, newPasscode: "0000", iterations: Self.iterations)
    #expect(withPasscode.hasPasscode)
    #expect(withPasscode.salt != bag.salt)
    let again = try withPasscode.unlock(deviceKey: deviceKey, passcode: "0000")
    #expect(again.key(.a)!.isEqual(to: keys.key(.a)!))
    #expect(again.classBPublicKey == keys.classBPublicKey)
    #expect(throws: SealError.wrongPasscode) { try withPasscode.unlock(deviceKey: deviceKey, passcode: nil) }
  }

  @Test func aDamagedKeybagIsRefusedSayingWhere() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (bag, _) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    let bytes = try bag.encoded(deviceKey: deviceKey)
    // Any flipped byte: the signature fails, or the outer layout does.
    for index in stride(from: 0, to: bytes.count, by: 7) {
      var damaged = bytes
      damaged[index] ^= 0x20
      #expect(throws: SealError.self) { try Keybag(decoding: damaged, deviceKey: deviceKey) }
    }
    // Cut short anywhere, or grown.
    for length in [0, 3, 8, 100, bytes.count - 1] {
      #expect(throws: SealError.self) { try Keybag(decoding: Array(bytes[..<length]), deviceKey: deviceKey) }
    }
    #expect(throws: SealError.damagedKeybag("bytes follow its signature")) {
      try Keybag(decoding: bytes + [0], deviceKey: deviceKey)
    }
    #expect(throws: SealError.damagedKeybag("it holds 4097 bytes")) {
      try Keybag(decoding: [UInt8](repeating: 0, count: 4097), deviceKey: deviceKey)
    }
    // A huge length in a tag does not read past the end.
    #expect(throws: SealError.damagedKeybag("DATA's length runs past its end")) {
      try Keybag(decoding: Array("DATA".utf8) + [0xff, 0xff, 0xff, 0xff], deviceKey: deviceKey)
    }
  }

  @Test(arguments: ProtectionClassCode.allCases)
  func aFileKeyUnwrapsForItsFileAndClassOnly(code: ProtectionClassCode) throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (_, keys) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    let (record, fileKey) = try FileKeyRecord.make(for: code, inode: 42, keys: keys)
    let decoded = try FileKeyRecord(decoding: record.encoded)
    #expect(decoded == record)
    #expect(try decoded.unwrap(inode: 42, keys: keys).isEqual(to: fileKey))
    // Copied onto another file.
    #expect(throws: SealError.keyMismatch) { try decoded.unwrap(inode: 43, keys: keys) }
    // Relabelled as another class.
    for other in ProtectionClassCode.allCases where other != code && (other == .b) == (code == .b) {
      var bytes = record.encoded
      bytes[1] = other.rawValue
      #expect(throws: SealError.keyMismatch) { try FileKeyRecord(decoding: bytes).unwrap(inode: 42, keys: keys) }
    }
    // Wrapped by another device's class keys.
    let (_, strangers) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    #expect(throws: SealError.keyMismatch) { try decoded.unwrap(inode: 42, keys: strangers) }
  }

  @Test func aLockedDeviceCreatesClassBFilesItCannotReopen() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (_, keys) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: Self.iterations)
    let locked = keys.evicting([.a, .b])
    let (record, _) = try FileKeyRecord.make(for: .b, inode: 7, keys: locked)
    #expect(throws: SealError.classKeyUnavailable(.b)) { try record.unwrap(inode: 7, keys: locked) }
    #expect(throws: SealError.classKeyUnavailable(.a)) { try FileKeyRecord.make(for: .a, inode: 8, keys: locked) }
    // Unlocked again, the file opens.
    _ = try record.unwrap(inode: 7, keys: keys)
  }

  @Test func damagedRecordsSayWhatIsWrong() throws {
    #expect(throws: SealError.damagedFileKey("its record holds 0 bytes")) { try FileKeyRecord(decoding: []) }
    #expect(throws: SealError.damagedFileKey("its record is of version 9")) { try FileKeyRecord(decoding: [9, 1]) }
    #expect(throws: SealError.damagedFileKey("its record names class 7")) { try FileKeyRecord(decoding: [1, 7]) }
    #expect(throws: SealError.damagedFileKey("its record holds 81 bytes, not 82")) {
      try FileKeyRecord(decoding: [1, 1] + [UInt8](repeating: 0, count: 79))
    }
    #expect(throws: SealError.damagedFileKey("its record holds 82 bytes, not 114")) {
      try FileKeyRecord(decoding: [1, 2] + [UInt8](repeating: 0, count: 80))
    }
  }

  @Test func anErasedSecretHoldsZeros() throws {
    let key = try SecretBytes.random(count: 32)
    #expect(Self.bytes(key) != [UInt8](repeating: 0, count: 32))
    key.erase()
    #expect(Self.bytes(key) == [UInt8](repeating: 0, count: 32))
  }

  @Test func errorsNameTheFile() {
    let error = SealError.keyMismatch.protfsError(path: "Containers/a/Documents/x")
    #expect(error.path == "Containers/a/Documents/x")
    #expect(error.message.contains("'Containers/a/Documents/x'"))
  }
}

/// The device key and keybag on a device.
@Suite struct SealStoreTests {
  @Test func aSealedDeviceKeepsItsKeysClosedAndUnlocksWithItsPasscode() throws {
    let device = try TestDevice()
    let store = SealStore(device: device.device)
    #expect(try !store.isSealed())
    let keys = try store.create(passcode: "1234", iterations: 1_000)
    #expect(try store.isSealed())
    let deviceKey = try store.deviceKey()
    let unlocked = try store.keybag(deviceKey: deviceKey).unlock(deviceKey: deviceKey, passcode: "1234")
    #expect(unlocked.key(.a)!.isEqual(to: keys.key(.a)!))
    // Sealing again would orphan every file key: refused, the keybag unchanged.
    let error = try #require(throws: ProtFSError.self) { try store.create(passcode: nil, iterations: 1_000) }
    #expect(error.code == .alreadyExists)
    #expect(try store.keybag(deviceKey: deviceKey).hasPasscode)
    let keyFile = device.device.stateDirectory + "/seal/device.key"
    let attributes = try FileManager.default.attributesOfItem(atPath: keyFile)
    #expect((attributes[.posixPermissions] as? Int) == 0o400)
    #expect((attributes[.size] as? Int) == 32)
  }

  @Test func aDeviceKeyOthersCanReadOrOfTheWrongSizeIsRefused() throws {
    let device = try TestDevice()
    let store = SealStore(device: device.device)
    _ = try store.create(passcode: nil, iterations: 1_000)
    let keyFile = device.device.stateDirectory + "/seal/device.key"
    chmod(keyFile, 0o444)
    #expect(throws: ProtFSError.self) { try store.deviceKey() }
    chmod(keyFile, 0o600)
    let handle = try #require(FileHandle(forWritingAtPath: keyFile))
    try handle.seekToEnd()
    try handle.write(contentsOf: Data([1]))
    try handle.close()
    let error = try #require(throws: ProtFSError.self) { try store.deviceKey() }
    #expect(error.message.contains("holds 33 bytes, not the 32"))
  }

  @Test func aPasscodeChangeReplacesTheKeybagAtomically() throws {
    let device = try TestDevice()
    let store = SealStore(device: device.device)
    let keys = try store.create(passcode: "1111", iterations: 1_000)
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    try store.replaceKeybag(
      try bag.rewrapped(keys, deviceKey: deviceKey, newPasscode: "2222", iterations: 1_000), deviceKey: deviceKey)
    let again = try store.keybag(deviceKey: deviceKey)
    #expect(throws: SealError.wrongPasscode) { try again.unlock(deviceKey: deviceKey, passcode: "1111") }
    #expect(try again.unlock(deviceKey: deviceKey, passcode: "2222").key(.c)!.isEqual(to: keys.key(.c)!))
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: device.device.stateDirectory + "/seal")
    #expect(Set(leftovers) == ["device.key", "keybag"])
  }

  @Test func calibrationLandsWithinBounds() throws {
    let iterations = try Keybag.calibratedIterations(target: 0.01)
    #expect((10_000...10_000_000).contains(iterations))
  }
}

/// Class keys handed between processes through the kernel keyring.
@Suite struct ClassKeyringTests {
  @Test func unlockedKeysPassThroughTheKeyringAndALockEvictsThem() throws {
    let deviceKey = try SecretBytes.random(count: 32)
    let (bag, keys) = try Keybag.create(deviceKey: deviceKey, passcode: "1234", iterations: 1_000)
    let keyring = ClassKeyring(keybagUUID: bag.uuid)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys; gone either way
    let boot = try bag.deviceOnlyKeys(deviceKey: deviceKey)
    #expect(try keyring.load(onto: boot).available == [.d])
    try keyring.store(keys)
    let loaded = try keyring.load(onto: boot)
    #expect(loaded.available == Set(ProtectionClassCode.allCases))
    for code in ProtectionClassCode.allCases { #expect(loaded.key(code)!.isEqual(to: keys.key(code)!)) }
    try keyring.evict([.a, .b])
    #expect(try keyring.load(onto: boot).available == [.c, .d, .cx])
    try keyring.evict([.a, .b])  // again: nothing left to evict is no error
    // Another keybag's keyring holds none of them.
    #expect(try ClassKeyring(keybagUUID: [UInt8](repeating: 7, count: 16)).load(onto: boot).available == [.d])
  }
}
