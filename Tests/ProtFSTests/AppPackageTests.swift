import Foundation
import ProtFS
import ProtFSAppBundle
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// Reading a real app: an .ipa or an .app directory, its Info.plist, and the entitlements of its
/// executable's code signature, from Mach-O files laid out as ld and codesign lay them out; and
/// every hostile or damaged package refused with one error naming the file.
@Suite struct AppPackageTests {
  typealias B = AppPackageBuilder
  let directory: String
  let bundleID = "com.example.reader"

  init() throws { directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-app-package") }

  /// The signature of an app that asks for `defaultClass`.
  func signature(_ defaultClass: String? = "NSFileProtectionComplete", der: Bool = true) -> [UInt8] {
    B.signature(
      identifier: bundleID,
      entitlements: B.entitlements(defaultClass: defaultClass, extra: ["application-identifier": "TEAM.\(bundleID)"]),
      der: der)
  }

  /// Makes `Name.app` in the test's directory with `executable` and an Info.plist of `modes` and
  /// `identifiers`; returns its path.
  func app(_ executable: [UInt8], modes: [String]? = nil, identifiers: [String]? = nil) throws -> String {
    let path = directory + "/Reader.app"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    try Data(B.infoPlist(bundleID: bundleID, executable: "Reader", modes: modes, identifiers: identifiers))
      .write(to: URL(fileURLWithPath: path + "/Info.plist"))
    try Data(executable).write(to: URL(fileURLWithPath: path + "/Reader"))
    return path
  }

  /// Makes `Reader.ipa` holding `Payload/Reader.app/` with `executable`, and `extra` members.
  func ipa(_ executable: [UInt8], modes: [String]? = nil, extra: [B.Member] = []) throws -> String {
    let path = directory + "/Reader.ipa"
    try B.ipa(
      at: path,
      [
        B.Member("Payload/Reader.app/Info.plist", B.infoPlist(bundleID: bundleID, executable: "Reader", modes: modes)),
        B.Member("Payload/Reader.app/Reader", executable),
      ] + extra)
    return path
  }

  /// The error reading `path` throws (Issue recorded when it reads).
  func refusal(_ path: String) -> ProtFSError? {
    do {
      _ = try AppPackage.read(path)
      Issue.record("'\(path)' was read")
      return nil
    } catch {
      return error
    }
  }

  @Test func aThin64BitAppDirectoryGivesItsBundleIDEntitlementsAndDefaultClass() throws {
    let package = try AppPackage.read(
      try app(B.thin(signature: signature()), modes: ["fetch", "processing"], identifiers: ["com.example.refresh"]))
    #expect(package.bundleID.rawValue == bundleID)
    #expect(package.executableName == "Reader")
    #expect(package.slices.map(\.architecture) == ["arm64"])
    #expect(package.signature?.identifier == bundleID)
    #expect(package.signature?.teamIdentifier == "TEAM123456")
    #expect(package.signature?.hasDEREntitlements == true)
    #expect(package.defaultDataProtection == .complete)
    #expect(package.backgroundModes == ["fetch", "processing"])
    #expect(package.permittedTaskIdentifiers == ["com.example.refresh"])
    let kinds = package.implications.map(\.kind)
    #expect(kinds == [.downloadsNeedClassNone, .lockedDownloadsFail])
  }

  /// Only the background modes whose work downloads (fetch, processing, remote-notification) ask
  /// for a Downloads directory of class none; audio or location keep the app running, and no more.
  @Test func onlyModesThatDownloadNeedTheDownloadsDirectoryOfClassNone() throws {
    let audio = try AppPackage.read(try app(B.thin(signature: signature()), modes: ["audio", "location"]))
    #expect(!audio.implications.map(\.kind).contains(.downloadsNeedClassNone), "\(audio.implications)")
    let push = try AppPackage.read(try app(B.thin(signature: signature()), modes: ["audio", "remote-notification"]))
    let need = try #require(push.implications.first { $0.kind == .downloadsNeedClassNone })
    #expect(need.message.contains("(UIBackgroundModes: remote-notification)"), "\(need.message)")
  }

  @Test func aThin32BitBigEndianExecutableIsRead() throws {
    let executable = B.thin(
      cpuType: B.arm, subtype: 9, is64: false, bigEndian: true, signature: signature("NSFileProtectionNone"))
    let package = try AppPackage.read(try app(executable))
    #expect(package.slices.map(\.architecture) == ["armv7"])
    #expect(package.slices.first?.is64Bit == false)
    #expect(package.defaultDataProtection == ProtectionClass.none)
  }

  @Test func aUniversalExecutableGivesTheArm64SlicesEntitlements() throws {
    for is64 in [false, true] {
      let executable = B.fat(
        [
          (B.x86_64, 3, B.thin(cpuType: B.x86_64, signature: signature("NSFileProtectionNone"))),
          (B.arm64, 0, B.thin(signature: signature("NSFileProtectionCompleteUnlessOpen"))),
        ], is64: is64)
      let package = try AppPackage.read(try app(executable))
      #expect(package.slices.map(\.architecture) == ["x86_64", "arm64"])
      #expect(package.defaultDataProtection == .completeUnlessOpen)
    }
  }

  @Test func anIPAIsReadInMemory() throws {
    let path = try ipa(B.thin(signature: signature()), modes: ["processing"])
    let package = try AppPackage.read(path)
    #expect(package.bundleID.rawValue == bundleID)
    #expect(package.defaultDataProtection == .complete)
    #expect(package.implications.contains { $0.kind == .taskIdentifiersMissing && $0.level == .warning })
    // Nothing was extracted beside it.
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["Reader.ipa"])
  }

  @Test func anUnsignedExecutableAndOneWithoutTheEntitlementAreSaidSo() throws {
    let unsigned = try AppPackage.read(try app(B.thin(signature: nil)))
    #expect(unsigned.signature == nil)
    #expect(unsigned.implications.map(\.kind) == [.unsigned])
    #expect(unsigned.containerDefaultClass == .completeUntilFirstUserAuthentication)
    let plain = try AppPackage.read(try app(B.thin(signature: signature(nil, der: false))))
    #expect(plain.signature?.hasDEREntitlements == false)
    #expect(plain.defaultDataProtection == nil)
    #expect(plain.implications.map(\.kind) == [.defaultClassUndeclared])
  }

  // MARK: Damaged and hostile executables

  /// Expects reading an app whose executable is `executable` to fail as malformed, with a message
  /// naming the executable and saying `words`.
  func expectRefused(_ executable: [UInt8], saying words: String) throws {
    let path = try app(executable)
    let error = refusal(path)
    #expect(error?.code == .malformed)
    #expect(error?.message.contains(path + "/Reader") == true, "\(error?.message ?? "")")
    #expect(error?.message.contains(words) == true, "\(error?.message ?? "")")
  }

  @Test func aTruncatedExecutableIsRefused() throws {
    let whole = B.thin(signature: signature())
    try expectRefused(Array(whole.prefix(2)), saying: "too short for a Mach-O header")
    try expectRefused(Array(whole.prefix(20)), saying: "truncated in its mach_header")
    try expectRefused(Array(whole.prefix(100)), saying: "load commands, past its end")
    try expectRefused(Array(whole.prefix(0x4000 + 10)), saying: "outside its")
  }

  @Test func aWrongMagicIsRefused() throws {
    try expectRefused(Array("#!/bin/sh\necho hello\n".utf8), saying: "which is no Mach-O magic")
    var elf = [UInt8](repeating: 0, count: 64)
    elf.replaceSubrange(0..<4, with: [0x7f, 0x45, 0x4c, 0x46])
    try expectRefused(elf, saying: "0x7f454c46")
  }

  @Test func aSignatureOfABillionBlobsIsRefused() throws {
    var blob = B.superBlob([])
    B.put(&blob, 8, 1_000_000_000)
    try expectRefused(B.thin(signature: blob), saying: "indexes 1000000000 blobs")
  }

  @Test func aBlobOffsetPastTheEndIsRefused() throws {
    var blob = signature()
    B.put(&blob, 16, UInt32(blob.count + 4096))
    try expectRefused(B.thin(signature: blob), saying: "outside its blobs")
    // A blob placed on the SuperBlob's own header (which would hold itself) is refused too.
    var looping = signature()
    B.put(&looping, 16, 0)
    try expectRefused(B.thin(signature: looping), saying: "outside its blobs")
  }

  @Test func anEntitlementsBlobLongerThanTheSignatureIsRefused() throws {
    var blob = signature()
    // The entitlements are the third blob: its index entry is at 12 + 8 * 2.
    let offset = Int(
      UInt32(blob[32]) << 24 | UInt32(blob[33]) << 16 | UInt32(blob[34]) << 8 | UInt32(blob[35]))
    B.put(&blob, offset + 4, 0x7fff_ffff)
    try expectRefused(B.thin(signature: blob), saying: "gives slot 5 a length of 2147483647 bytes")
  }

  @Test func aWrongSignatureMagicIsRefused() throws {
    var blob = signature()
    B.put(&blob, 0, 0xdead_beef)
    try expectRefused(B.thin(signature: blob), saying: "0xdeadbeef, not the embedded signature's magic 0xfade0cc0")
  }

  @Test func aNestedUniversalFileIsRefused() throws {
    let inner = B.fat([(B.arm64, 0, B.thin(signature: signature()))])
    try expectRefused(B.fat([(B.arm64, 0, inner)]), saying: "nested universal files")
  }

  @Test func aUniversalFileOfManyArchitecturesIsRefused() throws {
    var fat = B.fat([(B.arm64, 0, B.thin(signature: signature()))])
    B.put(&fat, 4, 0xcafe)
    try expectRefused(fat, saying: "holds 51966 architectures")
  }

  @Test func aLoadCommandOfSizeZeroIsRefused() throws {
    var file = B.thin(signature: signature())
    // The first load command's cmdsize, little-endian, at 32 + 4.
    file.replaceSubrange(36..<40, with: [0, 0, 0, 0])
    try expectRefused(file, saying: "load command 0 of 0 bytes")
  }

  // MARK: Hostile packages

  @Test func aZipBombIsRefusedBeforeItIsDecompressed() throws {
    let bomb = directory + "/Bomb.ipa"
    try B.ipa(
      at: bomb,
      [
        B.Member("Payload/Reader.app/Info.plist", B.infoPlist(bundleID: bundleID, executable: "Reader")),
        B.Member("Payload/Reader.app/Reader", [], zeros: 1 << 30),
      ])
    let started = Date()
    let error = refusal(bomb)
    #expect(error?.code == .malformed)
    #expect(error?.message.contains("Bomb.ipa:Payload/Reader.app/Reader") == true, "\(error?.message ?? "")")
    #expect(error?.message.contains("a zip bomb") == true, "\(error?.message ?? "")")
    #expect(Date().timeIntervalSince(started) < 2)
    // An Info.plist of 64 MiB is refused by its declared size.
    let plist = directory + "/Plist.ipa"
    try B.ipa(at: plist, [B.Member("Payload/Reader.app/Info.plist", [], zeros: 64 << 20)])
    #expect(refusal(plist)?.message.contains("more than the 1048576 protfs reads") == true)
  }

  @Test func entriesNamedOutsideTheArchiveAreRefused() throws {
    for name in ["Payload/Reader.app/../../../etc/passwd", "/etc/passwd", "Payload\\..\\evil"] {
      let path = try ipa(B.thin(signature: signature()), extra: [B.Member(name, [1])])
      let error = refusal(path)
      #expect(error?.code == .malformed)
      #expect(error?.message.contains("Reader.ipa") == true)
      #expect(error?.message.contains("outside the archive") == true, "\(error?.message ?? "")")
    }
  }

  @Test func symlinkEntriesAreNeverFollowed() throws {
    let link = directory + "/Link.ipa"
    try B.ipa(
      at: link,
      [
        B.Member("Payload/Reader.app/Info.plist", Array("/etc/passwd".utf8), isSymlink: true),
        B.Member("Payload/Reader.app/Reader", B.thin(signature: signature())),
      ])
    let error = refusal(link)
    #expect(error?.code == .symlink)
    #expect(error?.message.contains("Link.ipa:Payload/Reader.app/Info.plist") == true, "\(error?.message ?? "")")
    let app = directory + "/App.ipa"
    try B.ipa(
      at: app,
      [
        B.Member("Payload/Reader.app", Array("/".utf8), isSymlink: true),
        B.Member("Payload/Reader.app/Info.plist", B.infoPlist(bundleID: bundleID, executable: "Reader")),
      ])
    #expect(refusal(app)?.message.contains("App.ipa:Payload/Reader.app': it is a symbolic link") == true)
  }

  @Test func aSymlinkedMemberOfAnAppDirectoryIsNotFollowed() throws {
    let path = try app(B.thin(signature: signature()))
    try FileManager.default.removeItem(atPath: path + "/Reader")
    try FileManager.default.createSymbolicLink(atPath: path + "/Reader", withDestinationPath: "/bin/sh")
    let error = refusal(path)
    #expect(error?.code == .symlink)
    #expect(error?.message.contains(path + "/Reader") == true)
  }

  @Test func somethingElseIsRefusedNamingIt() throws {
    let text = directory + "/notes.txt"
    try Data("not an app".utf8).write(to: URL(fileURLWithPath: text))
    let error = refusal(text)
    #expect(error?.message.contains("'\(text)': it is not a zip archive") == true, "\(error?.message ?? "")")
    let empty = directory + "/Empty.ipa"
    try B.ipa(at: empty, [B.Member("README", [1])])
    #expect(refusal(empty)?.message.contains("it has no Payload/NAME.app directory") == true)
    #expect(refusal(directory + "/absent.ipa")?.code == .notFound)
  }
}
