import ProtFSSystem

/// What the embedded code signature of one Mach-O slice says: the signing identifier, the team,
/// and the entitlements signed into it.
///
/// The signature is the SuperBlob that `LC_CODE_SIGNATURE` points at (xnu's
/// `osfmk/kern/cs_blobs.h`): big-endian, `magic` `CSMAGIC_EMBEDDED_SIGNATURE`, `length`, `count`,
/// then `count` `CS_BlobIndex` entries (`type`, `offset` from the SuperBlob's start), each blob
/// starting with its own `magic` and `length`.
package struct CodeSignature: Sendable, Equatable {
  /// The identifier the CodeDirectory signs (usually the bundle id), if it has one.
  package var identifier: String?
  /// The team identifier the CodeDirectory names, if any.
  package var teamIdentifier: String?
  /// The entitlements blob's property list (XML, as `codesign` embeds it), or nil when the
  /// signature has none.
  package var entitlements: [UInt8]?
  /// Whether the signature also holds the entitlements in DER (slot 7), as iOS 15 and later read
  /// them. protfs reads the XML form and says that this one is there.
  package var hasDEREntitlements: Bool
  /// The slot types of its blobs, in the order of its index.
  package var slots: [UInt32]

  /// `CSMAGIC_EMBEDDED_SIGNATURE`.
  static let embeddedSignatureMagic: UInt32 = 0xfade_0cc0
  /// `CSMAGIC_CODEDIRECTORY`.
  static let codeDirectoryMagic: UInt32 = 0xfade_0c02
  /// `CSMAGIC_EMBEDDED_ENTITLEMENTS`.
  static let entitlementsMagic: UInt32 = 0xfade_7171
  /// `CSMAGIC_EMBEDDED_DER_ENTITLEMENTS`.
  static let derEntitlementsMagic: UInt32 = 0xfade_7172
  /// `CSSLOT_CODEDIRECTORY`.
  static let codeDirectorySlot: UInt32 = 0
  /// `CSSLOT_ENTITLEMENTS`.
  static let entitlementsSlot: UInt32 = 5
  /// `CSSLOT_DER_ENTITLEMENTS`.
  static let derEntitlementsSlot: UInt32 = 7

  /// The most blobs a signature may index (codesign writes fewer than a dozen).
  static let blobLimit = 256
  /// The longest identifier or team identifier read.
  static let identifierLimit = 1024

  /// Parses the SuperBlob `bytes` (exactly `LC_CODE_SIGNATURE`'s `datasize` bytes) of the
  /// executable at `path`. Every offset and length is checked against the bytes before it is
  /// used: a count, offset or length that does not fit is an error naming the file, never a read
  /// past the end, and no blob may lie in the SuperBlob's own header or index.
  init(_ bytes: [UInt8], path: String) throws(ProtFSError) {
    func fail(_ reason: String) -> ProtFSError { AppPackageError.malformed(path, "its code signature \(reason)") }
    let (slots, blobs) = try Self.index(of: bytes, fail: fail)
    self.slots = slots
    identifier = nil
    teamIdentifier = nil
    entitlements = nil
    hasDEREntitlements = false
    if let blob = blobs[Self.entitlementsSlot] {
      guard blob.magic == Self.entitlementsMagic else {
        throw fail(
          "has an entitlements slot whose blob starts with \(hex(blob.magic)), not \(hex(Self.entitlementsMagic))")
      }
      entitlements = Array(bytes[blob.payload])
    }
    if let blob = blobs[Self.derEntitlementsSlot] {
      guard blob.magic == Self.derEntitlementsMagic else {
        throw fail(
          "has a DER entitlements slot whose blob starts with \(hex(blob.magic)), not \(hex(Self.derEntitlementsMagic))"
        )
      }
      hasDEREntitlements = true
    }
    if let blob = blobs[Self.codeDirectorySlot] {
      guard blob.magic == Self.codeDirectoryMagic else {
        throw fail(
          "has a CodeDirectory slot whose blob starts with \(hex(blob.magic)), not \(hex(Self.codeDirectoryMagic))")
      }
      let start = blob.payload.lowerBound - 8
      let directory = Array(bytes[start..<blob.payload.upperBound])
      // CS_CodeDirectory: version at 8, identOffset at 20, teamOffset (version 0x20200 on) at 48.
      guard directory.count >= 44 else { throw fail("has a CodeDirectory shorter than its header") }
      let version = BigEndian.uint32(directory, 8)
      identifier = try Self.string(in: directory, at: Int(BigEndian.uint32(directory, 20)), fail: fail)
      if version >= 0x20200, directory.count >= 52 {
        let team = Int(BigEndian.uint32(directory, 48))
        teamIdentifier = team == 0 ? nil : try Self.string(in: directory, at: team, fail: fail)
      }
    }
  }

  /// The slots the SuperBlob `bytes` indexes, in order, and each slot's blob (its magic and the
  /// range of its payload), every count, offset and length checked against the bytes.
  private static func index(of bytes: [UInt8], fail: (String) -> ProtFSError) throws(ProtFSError)
    -> ([UInt32], [UInt32: (magic: UInt32, payload: Range<Int>)])
  {
    guard bytes.count >= 12 else { throw fail("is \(bytes.count) bytes, shorter than a SuperBlob's header") }
    let magic = BigEndian.uint32(bytes, 0)
    guard magic == Self.embeddedSignatureMagic else {
      throw fail("starts with \(hex(magic)), not the embedded signature's magic \(hex(Self.embeddedSignatureMagic))")
    }
    let length = Int(BigEndian.uint32(bytes, 4))
    let count = Int(BigEndian.uint32(bytes, 8))
    guard length >= 12, length <= bytes.count else {
      throw fail("says it is \(length) bytes, but LC_CODE_SIGNATURE gives it \(bytes.count)")
    }
    guard count <= Self.blobLimit else {
      throw fail("indexes \(count) blobs, more than the \(Self.blobLimit) protfs reads")
    }
    let indexEnd = 12 + 8 * count
    guard indexEnd <= length else { throw fail("indexes \(count) blobs, whose index does not fit its \(length) bytes") }
    var seen = Set<UInt32>()
    var slots: [UInt32] = []
    var blobs: [UInt32: (magic: UInt32, payload: Range<Int>)] = [:]
    for entry in 0..<count {
      let type = BigEndian.uint32(bytes, 12 + 8 * entry)
      let offset = Int(BigEndian.uint32(bytes, 16 + 8 * entry))
      guard seen.insert(type).inserted else { throw fail("indexes slot \(type) twice") }
      guard offset >= indexEnd, offset <= length - 8 else {
        throw fail("puts slot \(type) at offset \(offset), outside its blobs (\(indexEnd) to \(length))")
      }
      let blobLength = Int(BigEndian.uint32(bytes, offset + 4))
      guard blobLength >= 8, blobLength <= length - offset else {
        throw fail("gives slot \(type) a length of \(blobLength) bytes at offset \(offset), past its end (\(length))")
      }
      slots.append(type)
      blobs[type] = (BigEndian.uint32(bytes, offset), offset + 8..<offset + blobLength)
    }
    return (slots, blobs)
  }

  /// The NUL-terminated UTF-8 string at `offset` of the CodeDirectory `directory`.
  private static func string(in directory: [UInt8], at offset: Int, fail: (String) -> ProtFSError) throws(ProtFSError)
    -> String
  {
    guard offset > 0, offset < directory.count else {
      throw fail("has a CodeDirectory whose identifier offset \(offset) lies outside it")
    }
    let end = min(directory.count, offset + identifierLimit)
    guard let nul = directory[offset..<end].firstIndex(of: 0) else {
      throw fail("has a CodeDirectory identifier that does not end within \(identifierLimit) bytes")
    }
    return String(decoding: directory[offset..<nul], as: UTF8.self)
  }
}

/// `value` as `0x` and eight hexadecimal digits, as magic numbers are written.
func hex(_ value: UInt32) -> String {
  let digits = String(value, radix: 16)
  return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
}

/// Reads the fixed-size integers of the formats Apple's headers lay out, at offsets the caller
/// checked.
enum BigEndian {
  /// The big-endian `UInt32` at `offset` of `bytes`.
  static func uint32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
    UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
      | UInt32(bytes[offset + 3])
  }

  /// The big-endian `UInt64` at `offset` of `bytes`.
  static func uint64(_ bytes: [UInt8], _ offset: Int) -> UInt64 {
    UInt64(uint32(bytes, offset)) << 32 | UInt64(uint32(bytes, offset + 4))
  }
}
