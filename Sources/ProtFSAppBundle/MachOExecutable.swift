import ProtFSSystem

/// One architecture of an app's executable: a thin Mach-O file, or one slice of a universal one.
package struct MachOSlice: Sendable, Equatable {
  /// The architecture's name as Apple's tools print it (`arm64`, `arm64e`, `armv7`, `x86_64`), or
  /// `cputype 0x…` for one protfs does not name.
  package var architecture: String
  /// Whether the slice is a 64-bit Mach-O file (`MH_MAGIC_64`).
  package var is64Bit: Bool
  /// Its embedded code signature, or nil when it has no `LC_CODE_SIGNATURE`.
  package var signature: CodeSignature?
}

/// Reads the slices of a Mach-O executable and the code signature of each, from Apple's published
/// layouts (cctools' `mach-o/loader.h` and `mach-o/fat.h`).
///
/// A thin file starts with `mach_header` or `mach_header_64` (`MH_MAGIC`, `MH_MAGIC_64`, or their
/// byte-swapped `MH_CIGAM` forms for a file of the other byte order), then `ncmds` load commands
/// in `sizeofcmds` bytes; `LC_CODE_SIGNATURE` is a `linkedit_data_command` whose `dataoff` and
/// `datasize` place the signature in `__LINKEDIT`, at the end of the file. A universal file starts
/// with a big-endian `fat_header` (`FAT_MAGIC`, or `FAT_MAGIC_64` with 64-bit offsets) and
/// `nfat_arch` entries placing each slice. Every count, offset and size is checked against the
/// file's size before anything is read, and the file is read forwards (headers, then signatures,
/// slice after slice), so an archive's member is decompressed once.
enum MachOExecutable {
  /// The most slices a universal file may have (Xcode makes two or three).
  static let sliceLimit = 16
  /// The most bytes of load commands read (a large app's are some tens of KiB).
  static let loadCommandLimit = 4 << 20
  /// The largest code signature read (a 1 GiB executable's is some 10 MiB).
  static let signatureLimit = 64 << 20

  static let fatMagic: UInt32 = 0xcafe_babe
  static let fatMagic64: UInt32 = 0xcafe_babf
  static let magic: UInt32 = 0xfeed_face
  static let magic64: UInt32 = 0xfeed_facf
  static let cigam: UInt32 = 0xcefa_edfe
  static let cigam64: UInt32 = 0xcffa_edfe
  /// `LC_CODE_SIGNATURE`.
  static let codeSignatureCommand: UInt32 = 0x1d

  /// The slices of `member`, each with its signature.
  static func slices(of member: any PackageMember) throws(ProtFSError) -> [MachOSlice] {
    let path = member.path
    guard member.size >= 4 else {
      throw AppPackageError.malformed(path, "its executable is \(member.size) bytes, too short for a Mach-O header")
    }
    let first = try member.read(0, min(member.size, 32))
    let magic = BigEndian.uint32(first, 0)
    switch magic {
    case fatMagic, fatMagic64:
      return try universal(member, is64: magic == fatMagic64, first: first)
    case Self.magic, magic64, cigam, cigam64:
      return [try slice(member, at: 0, size: member.size, first: first)]
    default:
      throw AppPackageError.malformed(
        path,
        "its executable starts with \(hex(magic)), which is no Mach-O magic (MH_MAGIC, MH_MAGIC_64, FAT_MAGIC or FAT_MAGIC_64)"
      )
    }
  }

  /// The slices of the universal file `member`.
  private static func universal(_ member: any PackageMember, is64: Bool, first: [UInt8]) throws(ProtFSError)
    -> [MachOSlice]
  {
    let path = member.path
    func fail(_ reason: String) -> ProtFSError { AppPackageError.malformed(path, "its universal executable \(reason)") }
    guard member.size >= 8 else { throw fail("is truncated in its fat_header") }
    let count = Int(BigEndian.uint32(first, 4))
    // A Java class file starts with the same magic; its version follows, which reads as dozens.
    guard count >= 1, count <= sliceLimit else {
      throw fail("says it holds \(count) architectures; protfs reads 1 to \(sliceLimit)")
    }
    let entrySize = is64 ? 32 : 20
    let tableEnd = 8 + count * entrySize
    guard tableEnd <= member.size else { throw fail("is truncated in its table of \(count) architectures") }
    let table = Array(try member.read(0, tableEnd).dropFirst(8))
    var places: [(offset: Int, size: Int)] = []
    for index in 0..<count {
      let at = index * entrySize
      let offset = is64 ? BigEndian.uint64(table, at + 8) : UInt64(BigEndian.uint32(table, at + 8))
      let size = is64 ? BigEndian.uint64(table, at + 16) : UInt64(BigEndian.uint32(table, at + 12))
      guard offset >= UInt64(tableEnd), offset <= UInt64(member.size), size <= UInt64(member.size) - offset else {
        throw fail("places architecture \(index) at \(offset) (\(size) bytes), outside its \(member.size) bytes")
      }
      places.append((Int(offset), Int(size)))
    }
    // Read in the order the slices lie in the file; none may overlap another.
    let ordered = places.sorted { $0.offset < $1.offset }
    for (earlier, later) in zip(ordered, ordered.dropFirst()) where later.offset < earlier.offset + earlier.size {
      throw fail("has architectures that overlap (at \(earlier.offset) and \(later.offset))")
    }
    var slices: [MachOSlice] = []
    for place in ordered {
      guard place.size >= 4 else { throw fail("has an architecture of \(place.size) bytes at \(place.offset)") }
      let header = try member.read(place.offset, min(place.size, 32))
      let inner = BigEndian.uint32(header, 0)
      guard inner != fatMagic, inner != fatMagic64 else {
        throw fail("holds another universal file at \(place.offset): nested universal files are not Mach-O")
      }
      slices.append(try slice(member, at: place.offset, size: place.size, first: header))
    }
    return slices
  }

  /// The thin Mach-O file of `size` bytes at `base` of `member`, whose first bytes (up to 32) are
  /// `first`.
  private static func slice(_ member: any PackageMember, at base: Int, size: Int, first: [UInt8])
    throws(ProtFSError) -> MachOSlice
  {
    let path = member.path
    let place = base == 0 ? "" : " (the architecture at \(base))"
    func fail(_ reason: String) -> ProtFSError { AppPackageError.malformed(path, "its executable\(place) \(reason)") }
    guard size >= 28 else { throw fail("is truncated in its mach_header") }
    let magic = BigEndian.uint32(first, 0)
    let is64 = magic == magic64 || magic == cigam64
    let swapped = magic == cigam || magic == cigam64
    guard magic == Self.magic || magic == magic64 || swapped else {
      throw fail("starts with \(hex(magic)), which is no Mach-O magic")
    }
    let headerSize = is64 ? 32 : 28
    guard size >= headerSize else { throw fail("is truncated in its mach_header_64") }
    func integer(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
      let value = BigEndian.uint32(bytes, offset)
      return swapped ? value.byteSwapped : value
    }
    let cpuType = integer(first, 4)
    let cpuSubtype = integer(first, 8)
    let commandCount = Int(integer(first, 16))
    let commandBytes = Int(integer(first, 20))
    guard commandBytes <= loadCommandLimit else {
      throw fail("has \(commandBytes) bytes of load commands, more than the \(loadCommandLimit) protfs reads")
    }
    guard commandBytes <= size - headerSize else {
      throw fail("has \(commandBytes) bytes of load commands, past its end (\(size) bytes)")
    }
    guard commandCount <= commandBytes / 8 else {
      throw fail("says it has \(commandCount) load commands, which do not fit in \(commandBytes) bytes")
    }
    let commands = try member.read(base + headerSize, commandBytes)
    let signatureCommand = try codeSignatureCommand(in: commands, count: commandCount, integer: integer, fail: fail)
    let architecture = name(cpuType: cpuType, subtype: cpuSubtype)
    guard let (offset, length) = signatureCommand else {
      return MachOSlice(architecture: architecture, is64Bit: is64, signature: nil)
    }
    guard offset >= headerSize + commandBytes, offset <= size, length <= size - offset else {
      throw fail("puts its code signature at \(offset) (\(length) bytes), outside its \(size) bytes")
    }
    guard length <= signatureLimit else {
      throw fail("has a code signature of \(length) bytes, more than the \(signatureLimit) protfs reads")
    }
    let signature = try CodeSignature(try member.read(base + offset, length), path: path)
    return MachOSlice(architecture: architecture, is64Bit: is64, signature: signature)
  }

  /// The offset and size LC_CODE_SIGNATURE gives among the `count` load commands `commands`
  /// (read with `integer`), nil when there is none; each command's size checked to fit.
  private static func codeSignatureCommand(
    in commands: [UInt8], count commandCount: Int, integer: ([UInt8], Int) -> UInt32,
    fail: (String) -> ProtFSError
  ) throws(ProtFSError) -> (offset: Int, size: Int)? {
    var signatureCommand: (offset: Int, size: Int)?
    var at = 0
    for index in 0..<commandCount {
      guard at + 8 <= commands.count else { throw fail("has load command \(index) past sizeofcmds") }
      let command = integer(commands, at)
      let commandSize = Int(integer(commands, at + 4))
      guard commandSize >= 8, commandSize <= commands.count - at else {
        throw fail("has load command \(index) of \(commandSize) bytes, which does not fit its load commands")
      }
      if command == codeSignatureCommand {
        guard commandSize >= 16 else { throw fail("has an LC_CODE_SIGNATURE of \(commandSize) bytes, not 16") }
        guard signatureCommand == nil else { throw fail("has two LC_CODE_SIGNATURE commands") }
        signatureCommand = (Int(integer(commands, at + 8)), Int(integer(commands, at + 12)))
      }
      at += commandSize
    }
    return signatureCommand
  }

  /// The name Apple's tools give `cpuType` and `subtype` (mach/machine.h).
  static func name(cpuType: UInt32, subtype: UInt32) -> String {
    let subtype = subtype & 0x00ff_ffff
    switch cpuType {
    case 0x0100_000c: return subtype == 2 ? "arm64e" : "arm64"
    case 0x0200_000c: return "arm64_32"
    case 12: return subtype == 11 ? "armv7s" : subtype == 12 ? "armv7k" : subtype == 9 ? "armv7" : "arm"
    case 0x0100_0007: return "x86_64"
    case 7: return "i386"
    default: return "cputype \(hex(cpuType))"
    }
  }
}
