extension Keybag {
  /// The keybag's bytes, signed with a key derived from `deviceKey`.
  package func encoded(deviceKey: SecretBytes) throws(SealError) -> [UInt8] {
    var data = TLVWriter()
    data.append("VERS", Self.version)
    data.append("TYPE", 0)  // a system keybag, as a phone's
    data.append("UUID", uuid)
    data.append("WRAP", hasPasscode ? 3 : 1)
    data.append("SALT", salt)
    data.append("ITER", iterations)
    for entry in entries {
      data.append("UUID", entry.uuid)
      data.append("CLAS", UInt32(entry.code.rawValue))
      data.append("WRAP", entry.wrap)
      data.append("KTYP", entry.keyType)
      data.append("WPKY", entry.wrappedKey)
      if !entry.publicKey.isEmpty { data.append("PBKY", entry.publicKey) }
    }
    var bag = TLVWriter()
    bag.append("DATA", data.bytes)
    bag.append("SIGN", try Self.signature(of: data.bytes, deviceKey: deviceKey))
    return bag.bytes
  }

  /// The keybag in `bytes`, whose signature must verify with `deviceKey` before anything in it is
  /// believed; ``SealError/damagedKeybag(_:)`` says what is wrong otherwise.
  package init(decoding bytes: [UInt8], deviceKey: SecretBytes) throws(SealError) {
    guard bytes.count <= Self.maximumSize else { throw .damagedKeybag("it holds \(bytes.count) bytes") }
    var outer = TLVReader(bytes)
    let data = try outer.value("DATA")
    let signature = try outer.value("SIGN")
    guard outer.isAtEnd else { throw .damagedKeybag("bytes follow its signature") }
    let expected = try Self.signature(of: data, deviceKey: deviceKey)
    let valid = signature.withUnsafeBytes { a in expected.withUnsafeBytes { b in SealCrypto.constantTimeEqual(a, b) } }
    guard valid else { throw .damagedKeybag("its signature does not verify with this device's key") }
    try self.init(signedData: data)
  }

  /// The UUID of the keybag in `bytes`, its signature not checked: it names the keybag's keys in the
  /// keyring, which is all that evicting them needs (no key, and not libcrypto). Nothing else in an
  /// unverified keybag is used.
  package static func unverifiedUUID(in bytes: [UInt8]) throws(SealError) -> [UInt8] {
    guard bytes.count <= Self.maximumSize else { throw .damagedKeybag("it holds \(bytes.count) bytes") }
    var outer = TLVReader(bytes)
    var reader = TLVReader(try outer.value("DATA"))
    _ = try reader.number("VERS")
    _ = try reader.number("TYPE")
    return try reader.value("UUID", count: 16)
  }

  private init(signedData data: [UInt8]) throws(SealError) {
    var reader = TLVReader(data)
    guard try reader.number("VERS") == Self.version else { throw .damagedKeybag("its version is not 1") }
    _ = try reader.number("TYPE")
    uuid = try reader.value("UUID", count: 16)
    let wrap = try reader.number("WRAP")
    guard wrap == 1 || wrap == 3 else { throw .damagedKeybag("its WRAP is \(wrap)") }
    hasPasscode = wrap == 3
    salt = try reader.value("SALT", count: 16)
    iterations = try reader.number("ITER")
    guard (1_000...100_000_000).contains(iterations) else { throw .damagedKeybag("its ITER is \(iterations)") }
    entries = []
    for code in ProtectionClassCode.allCases {
      let id = try reader.value("UUID", count: 16)
      guard try reader.number("CLAS") == UInt32(code.rawValue) else {
        throw .damagedKeybag("class \(code) is missing or out of order")
      }
      let entryWrap = try reader.number("WRAP")
      let expectedWrap: UInt32 = hasPasscode && code.needsPasscode ? 3 : 1
      guard entryWrap == expectedWrap else { throw .damagedKeybag("class \(code)'s WRAP is \(entryWrap)") }
      let keyType = try reader.number("KTYP")
      guard keyType == (code == .b ? 1 : 0) else { throw .damagedKeybag("class \(code)'s KTYP is \(keyType)") }
      let wrapped = try reader.value("WPKY", count: 40)
      let publicKey = code == .b ? try reader.value("PBKY", count: 32) : []
      entries.append(
        Entry(code: code, uuid: id, wrap: entryWrap, keyType: keyType, wrappedKey: wrapped, publicKey: publicKey))
    }
    guard reader.isAtEnd else { throw .damagedKeybag("it has items after class CX") }
  }

  private static func signature(of data: [UInt8], deviceKey: SecretBytes) throws(SealError) -> [UInt8] {
    let mac = try SealCrypto.hmac(try signingKey(deviceKey), label: "", context: data)
    return mac.withUnsafeBytes { Array($0) }  // a signature is public
  }
}

/// Writes tag-length-value items: a four-letter ASCII tag, a big-endian 32-bit length, the value.
struct TLVWriter {
  private(set) var bytes: [UInt8] = []

  mutating func append(_ tag: StaticString, _ value: [UInt8]) {
    precondition(tag.utf8CodeUnitCount == 4)
    bytes += UnsafeBufferPointer(start: tag.utf8Start, count: 4)
    bytes += bigEndian(UInt32(value.count))
    bytes += value
  }

  mutating func append(_ tag: StaticString, _ value: UInt32) { append(tag, bigEndian(value)) }

  private func bigEndian(_ value: UInt32) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (24 - 8 * $0)) }
  }
}

/// Reads the items ``TLVWriter`` writes, in the order the caller expects them.
struct TLVReader {
  private let bytes: [UInt8]
  private var offset = 0

  init(_ bytes: [UInt8]) { self.bytes = bytes }

  var isAtEnd: Bool { offset == bytes.count }

  /// The next item's value, which must be tagged `tag` (and be `count` bytes long when given).
  mutating func value(_ tag: String, count: Int? = nil) throws(SealError) -> [UInt8] {
    guard bytes.count - offset >= 8 else { throw .damagedKeybag("it ends where \(tag) should be") }
    let found = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
    guard found == tag else { throw .damagedKeybag("\(tag) expected, \(printable(found)) found") }
    let length = bytes[offset + 4..<offset + 8].reduce(0) { $0 << 8 | Int($1) }
    guard length <= bytes.count - offset - 8 else { throw .damagedKeybag("\(tag)'s length runs past its end") }
    if let count, length != count { throw .damagedKeybag("\(tag) holds \(length) bytes, not \(count)") }
    defer { offset += 8 + length }
    return Array(bytes[offset + 8..<offset + 8 + length])
  }

  /// The next item's value as a big-endian 32-bit number.
  mutating func number(_ tag: String) throws(SealError) -> UInt32 {
    try value(tag, count: 4).reduce(0) { $0 << 8 | UInt32($1) }
  }

  private func printable(_ tag: String) -> String {
    tag.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7f } ? "'\(tag)'" : "a garbled tag"
  }
}
