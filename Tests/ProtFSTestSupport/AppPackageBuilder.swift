import Foundation

/// Small real Mach-O executables and iOS app packages, laid out as `ld` and `codesign` lay them out
/// (cctools' `mach-o/loader.h` and `mach-o/fat.h`, xnu's `osfmk/kern/cs_blobs.h`), for the tests
/// of `protfs inspect` and `--from-app`.
public enum AppPackageBuilder {
  /// `CPU_TYPE_ARM64`.
  public static let arm64: UInt32 = 0x0100_000c
  /// `CPU_TYPE_ARM` (armv7 with subtype 9).
  public static let arm: UInt32 = 12
  /// `CPU_TYPE_X86_64`.
  public static let x86_64: UInt32 = 0x0100_0007

  /// An entitlements plist (XML) setting `defaultClass` as
  /// `com.apple.developer.default-data-protection`, if given, and `extra` keys with string values.
  public static func entitlements(defaultClass: String?, extra: [String: String] = [:]) -> String {
    var keys = extra
    if let defaultClass { keys["com.apple.developer.default-data-protection"] = defaultClass }
    let body = keys.keys.sorted().map { "\t<key>\($0)</key>\n\t<string>\(keys[$0]!)</string>\n" }.joined()
    return """
      <?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0">
      <dict>
      \(body)</dict>
      </plist>

      """
  }

  /// An embedded signature SuperBlob (`CSMAGIC_EMBEDDED_SIGNATURE`) as codesign writes one: a
  /// CodeDirectory (slot 0) naming `identifier` and `team`, empty requirements (slot 2), the
  /// `entitlements` (slot 5, if any), DER entitlements (slot 7, when `der`), and an empty CMS
  /// wrapper (slot 0x10000).
  public static func signature(
    identifier: String, team: String? = "TEAM123456", entitlements: String?, der: Bool = true
  ) -> [UInt8] {
    var blobs: [(type: UInt32, bytes: [UInt8])] = []
    // CodeDirectory version 0x20400: 88 bytes of header, then the identifier and team strings,
    // then 7 special and 1 code hash slots of SHA-256 (zeros: protfs does not check hashes).
    let identifierBytes = Array(identifier.utf8) + [0]
    let teamBytes: [UInt8] = team.map { Array($0.utf8) + [0] } ?? []
    let identOffset = 88
    let teamOffset = team == nil ? 0 : identOffset + identifierBytes.count
    let hashOffset = identOffset + identifierBytes.count + teamBytes.count + 7 * 32
    var directory = [UInt8](repeating: 0, count: 88)
    let length = hashOffset + 32
    put(&directory, 0, 0xfade_0c02)
    put(&directory, 4, UInt32(length))
    put(&directory, 8, 0x20400)
    put(&directory, 16, UInt32(hashOffset))
    put(&directory, 20, UInt32(identOffset))
    put(&directory, 24, 7)
    put(&directory, 28, 1)
    put(&directory, 32, 0x4000)
    directory[36] = 32
    directory[37] = 2
    directory[39] = 14
    put(&directory, 48, UInt32(teamOffset))
    directory += identifierBytes + teamBytes + [UInt8](repeating: 0, count: 8 * 32)
    blobs.append((0, directory))
    blobs.append((2, blob(0xfade_0c01, [0, 0, 0, 0])))
    if let entitlements { blobs.append((5, blob(0xfade_7171, Array(entitlements.utf8)))) }
    // DER: a SEQUENCE holding nothing protfs reads.
    if der { blobs.append((7, blob(0xfade_7172, [0x70, 0x00]))) }
    blobs.append((0x10000, blob(0xfade_0b01, [])))
    return superBlob(blobs)
  }

  /// A SuperBlob of `blobs` (type, bytes), laid out one after another after the index.
  public static func superBlob(_ blobs: [(type: UInt32, bytes: [UInt8])]) -> [UInt8] {
    var header = [UInt8](repeating: 0, count: 12 + 8 * blobs.count)
    var body: [UInt8] = []
    for (index, entry) in blobs.enumerated() {
      put(&header, 12 + 8 * index, entry.type)
      put(&header, 16 + 8 * index, UInt32(header.count + body.count))
      body += entry.bytes
    }
    put(&header, 0, 0xfade_0cc0)
    put(&header, 4, UInt32(header.count + body.count))
    put(&header, 8, UInt32(blobs.count))
    return header + body
  }

  /// A blob: `magic`, its length, `payload`.
  public static func blob(_ magic: UInt32, _ payload: [UInt8]) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: 8)
    put(&bytes, 0, magic)
    put(&bytes, 4, UInt32(8 + payload.count))
    return bytes + payload
  }

  /// A thin executable (`MH_EXECUTE`) as ld lays one out: `mach_header(_64)`, the segments
  /// `__PAGEZERO`, `__TEXT` (the header and a page of code) and `__LINKEDIT` (the signature), and
  /// `LC_CODE_SIGNATURE` pointing at `signature` in `__LINKEDIT` (none without one). Little-endian
  /// unless `bigEndian` (the byte-swapped `MH_CIGAM` forms, read on the other byte order).
  public static func thin(
    cpuType: UInt32 = arm64, subtype: UInt32 = 0, is64: Bool = true, bigEndian: Bool = false, signature: [UInt8]?
  ) -> [UInt8] {
    let page = 0x4000
    let headerSize = is64 ? 32 : 28
    let segmentSize = is64 ? 72 : 56
    let commandCount = signature == nil ? 3 : 4
    let commandBytes = 3 * segmentSize + (signature == nil ? 0 : 16)
    let linkedit = page
    let signatureLength = signature?.count ?? 0
    var file = [UInt8](repeating: 0, count: page + signatureLength)
    func word(_ offset: Int, _ value: UInt32) {
      bigEndian ? put(&file, offset, value) : put(&file, offset, value.byteSwapped)
    }
    func address(_ offset: Int, _ value: UInt64) {
      if is64 {
        if bigEndian {
          word(offset, UInt32(value >> 32))
          word(offset + 4, UInt32(value & 0xffff_ffff))
        } else {
          word(offset, UInt32(value & 0xffff_ffff))
          word(offset + 4, UInt32(value >> 32))
        }
      } else {
        word(offset, UInt32(value))
      }
    }
    word(0, is64 ? 0xfeed_facf : 0xfeed_face)
    word(4, cpuType)
    word(8, subtype)
    word(12, 2)  // MH_EXECUTE
    word(16, UInt32(commandCount))
    word(20, UInt32(commandBytes))
    word(24, 0x0020_0085)  // MH_NOUNDEFS | MH_DYLDLINK | MH_TWOLEVEL | MH_PIE
    var at = headerSize
    let wide = is64 ? 8 : 4
    // A 64-bit program's __PAGEZERO is 4 GiB; a 32-bit one's a page.
    let text: UInt64 = is64 ? 1 << 32 : UInt64(page)
    for (name, vmaddr, vmsize, fileoff, filesize) in [
      ("__PAGEZERO", UInt64(0), text, 0, 0), ("__TEXT", text, UInt64(page), 0, page),
      ("__LINKEDIT", text + UInt64(page), UInt64(page), linkedit, signatureLength),
    ] {
      word(at, is64 ? 0x19 : 0x1)  // LC_SEGMENT_64, LC_SEGMENT
      word(at + 4, UInt32(segmentSize))
      for (index, byte) in name.utf8.enumerated() { file[at + 8 + index] = byte }
      address(at + 24, vmaddr)
      address(at + 24 + wide, vmsize)
      address(at + 24 + 2 * wide, UInt64(fileoff))
      address(at + 24 + 3 * wide, UInt64(filesize))
      at += segmentSize
    }
    if let signature {
      word(at, 0x1d)  // LC_CODE_SIGNATURE
      word(at + 4, 16)
      word(at + 8, UInt32(linkedit))
      word(at + 12, UInt32(signature.count))
      file.replaceSubrange(linkedit..<linkedit + signature.count, with: signature)
    }
    return file
  }

  /// A universal executable (`FAT_MAGIC`, or `FAT_MAGIC_64` when `is64`) of `slices` (cputype,
  /// subtype, thin file), each aligned to 2^14 as lipo aligns arm64 slices.
  public static func fat(_ slices: [(cpuType: UInt32, subtype: UInt32, file: [UInt8])], is64: Bool = false) -> [UInt8] {
    let align = 0x4000
    let entrySize = is64 ? 32 : 20
    var header = [UInt8](repeating: 0, count: 8 + entrySize * slices.count)
    put(&header, 0, is64 ? 0xcafe_babf : 0xcafe_babe)
    put(&header, 4, UInt32(slices.count))
    var body: [UInt8] = []
    var offset = align
    for (index, slice) in slices.enumerated() {
      let at = 8 + entrySize * index
      put(&header, at, slice.cpuType)
      put(&header, at + 4, slice.subtype)
      if is64 {
        put(&header, at + 8, 0)
        put(&header, at + 12, UInt32(offset))
        put(&header, at + 16, 0)
        put(&header, at + 20, UInt32(slice.file.count))
        put(&header, at + 24, 14)
      } else {
        put(&header, at + 8, UInt32(offset))
        put(&header, at + 12, UInt32(slice.file.count))
        put(&header, at + 16, 14)
      }
      body += [UInt8](repeating: 0, count: offset - align - body.count) + slice.file
      offset = align + ((body.count + align - 1) / align) * align
    }
    return header + [UInt8](repeating: 0, count: align - header.count) + body
  }

  /// An Info.plist (XML) for `bundleID` whose executable is `executable`, with `modes` as
  /// `UIBackgroundModes` and `identifiers` as `BGTaskSchedulerPermittedIdentifiers` (each left out
  /// when nil).
  public static func infoPlist(
    bundleID: String, executable: String, modes: [String]? = nil, identifiers: [String]? = nil
  ) -> [UInt8] {
    var info: [String: Any] = [
      "CFBundleIdentifier": bundleID, "CFBundleExecutable": executable, "CFBundleName": executable,
      "CFBundleShortVersionString": "1.0", "MinimumOSVersion": "15.0",
    ]
    if let modes { info["UIBackgroundModes"] = modes }
    if let identifiers { info["BGTaskSchedulerPermittedIdentifiers"] = identifiers }
    let data = (try? PropertyListSerialization.data(fromPropertyList: info, format: .xml, options: 0)) ?? Data()
    return Array(data)
  }

  /// One member of an .ipa made by `ipa(at:_:)`.
  public struct Member: Sendable {
    /// Its name in the archive.
    public var name: String
    /// Its bytes (a symbolic link's: its target).
    public var bytes: [UInt8]
    /// Whether it is a symbolic link (Unix mode `S_IFLNK` in its external attributes).
    public var isSymlink = false
    /// Zeros of this many bytes instead of `bytes`, written in chunks (a zip bomb).
    public var zeros = 0

    /// A member `name` of `bytes`.
    public init(_ name: String, _ bytes: [UInt8], isSymlink: Bool = false, zeros: Int = 0) {
      self.name = name
      self.bytes = bytes
      self.isSymlink = isSymlink
      self.zeros = zeros
    }
  }

  /// Writes an .ipa (a zip archive, deflated) of `members` at `path`, with Python's zipfile.
  public static func ipa(at path: String, _ members: [Member]) throws {
    let spec = members.map { member -> [String: Any] in
      [
        "name": member.name, "data": Data(member.bytes).base64EncodedString(), "link": member.isSymlink,
        "zeros": member.zeros,
      ]
    }
    let specPath = path + ".json"
    try JSONSerialization.data(withJSONObject: spec).write(to: URL(fileURLWithPath: specPath))
    defer { try? FileManager.default.removeItem(atPath: specPath) }
    let script = """
      import base64, json, sys, zipfile
      spec = json.load(open(sys.argv[1]))
      with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED) as archive:
          for member in spec:
              info = zipfile.ZipInfo(member["name"], (2026, 1, 1, 0, 0, 0))
              info.compress_type = zipfile.ZIP_DEFLATED
              info.create_system = 3
              info.external_attr = ((0o120777 if member["link"] else 0o100755) << 16)
              if member["zeros"]:
                  with archive.open(info, "w", force_zip64=True) as out:
                      chunk = bytes(1 << 20)
                      for _ in range(member["zeros"] >> 20):
                          out.write(chunk)
              else:
                  archive.writestr(info, base64.b64decode(member["data"]))
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    process.arguments = ["-c", script, specPath, path]
    try process.run()
    process.waitUntilExit()
    guard process.terminationStatus == 0 else {
      throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
    }
  }

  /// Writes the big-endian `value` at `offset` of `bytes`.
  public static func put(_ bytes: inout [UInt8], _ offset: Int, _ value: UInt32) {
    bytes[offset] = UInt8(value >> 24)
    bytes[offset + 1] = UInt8((value >> 16) & 0xff)
    bytes[offset + 2] = UInt8((value >> 8) & 0xff)
    bytes[offset + 3] = UInt8(value & 0xff)
  }
}
