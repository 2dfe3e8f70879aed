import Foundation
import ProtFS
import ProtFSSeal
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// `import-backup` and `audit` on a sealed device (docs/sealed.md): every imported file is sealed
/// for its class, its backing file holding no plaintext; a locked device refuses a class-A file; the
/// audit reports plaintext in a sealed container and key records that do not match their files.
@Suite struct SealedImportAuditTests {
  static let app = "com.example.notes"
  static let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]

  /// A fresh sealed device (its keys in root's keyring, which the caller empties) and a backup
  /// written by scripts/make-backup.py.
  static func sealedDevice(encrypted: Bool = false) async throws -> (TestDevice, String, ClassKeyring) {
    let t = try TestDevice()
    let backup = t.directory + "/backup"
    let script = RepositoryLayout.packageRoot + "/scripts/make-backup.py"
    let made = try await Protfs.runProgram("/usr/bin/python3", [script, backup] + (encrypted ? ["--encrypted"] : []))
    #expect(made.status == 0, "\(made)")
    let sealed = try await Protfs.run(
      ["--device", t.root, "init", "--sealed", "com.example.placeholder"], environment: cheap)
    #expect(sealed.status == 0, "\(sealed)")
    let store = SealStore(device: t.device)
    return (t, backup, ClassKeyring(keybagUUID: try store.keybag(deviceKey: try store.deviceKey()).uuid))
  }

  /// The raw key record of `path` (nil when it has none, or it cannot be read).
  static func record(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 256)
    let read = buffer.withUnsafeMutableBytes {
      Kernel.getAttribute(ofDescriptor: fd, attribute: FileKeyRecord.attributeName, into: $0)
    }
    guard case .success(let size) = read else { return nil }
    return Array(buffer[..<size])
  }

  /// Gives `path` the key record `bytes`, or removes its record when nil, as a tool behind the mount would.
  static func setRecord(_ path: String, _ bytes: [UInt8]?) -> Bool {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let target = Kernel.AttributeTarget.descriptor(fd, pathOnly: false)
    guard let bytes else {
      return (try? Kernel.removeAttribute(target, attribute: FileKeyRecord.attributeName).get()) != nil
    }
    let result = bytes.withUnsafeBytes {
      Kernel.setAttribute(target, attribute: FileKeyRecord.attributeName, value: $0)
    }
    return (try? result.get()) != nil
  }

  /// The plaintext of the sealed file `path`, through its key as the mount reads it.
  static func plaintext(_ path: String, device: Device) throws -> Data {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    try #require(fd >= 0, "\(path)")
    defer { close(fd) }
    let files = try #require(try SealedFiles(device: device))
    let io = SealedFileIO(fd: fd, cipher: try files.cipher(of: fd), path: path)
    return Data(try io.read(at: 0, count: try io.size()))
  }

  /// The findings of the audit of the device, as "ID path", of the sealed checks only.
  static func sealFindings(_ t: TestDevice) async throws -> (findings: [String], output: String) {
    let audit = try await Protfs.run(["--device", t.root, "audit", "--format", "json"])
    let object = try JSONSerialization.jsonObject(with: audit.stdoutBytes) as? [String: Any] ?? [:]
    let findings = (object["findings"] as? [[String: Any]] ?? []).compactMap { finding -> String? in
      guard let id = finding["ruleId"] as? String, id == "PFS018" || id == "PFS019",
        let path = finding["path"] as? String
      else { return nil }
      return "\(id) \(path)"
    }
    return (findings.sorted(), audit.stdout)
  }

  /// Every file of the import is sealed for its class, its backing file holding no plaintext, and
  /// reads back through its key: copied contents, sparse ones (encrypted zeros) and a file whose
  /// class it inherits. The audit of the result reports no plaintext and no mismatched key.
  @Test func anImportIntoASealedDeviceWritesEveryFileSealedForItsClass() async throws {
    let (t, backup, keyring) = try await Self.sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let result = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(result.status == 0, "\(result)")
    try Self.expectSealed(t)
    let root = t.containerPath(Self.app) + "/"
    #expect(try Self.plaintext(root + "Documents/missing.bin", device: t.device) == Data(count: 5000))
    #expect(try Self.plaintext(root + "Documents/tampered.db", device: t.device) == Data(count: 18))
    #expect(Self.record(root + "tmp/odd.bin")?[1] == ProtectionClassCode.c.rawValue, "inherits the default, C")
    #expect(try Self.plaintext(root + "tmp/odd.bin", device: t.device) == Data("odd".utf8))
    #expect(Self.record(t.containerPath("group.com.example.shared")) == nil, "directories have no key")
    let (findings, output) = try await Self.sealFindings(t)
    #expect(findings.isEmpty, "\(output)")
  }

  /// An encrypted backup's files are decrypted with their own keys and encrypted again with the
  /// device's (the formats share no key): no plaintext reaches the backing files.
  @Test func anEncryptedBackupIsEncryptedAgainForTheSealedDevice() async throws {
    let (t, backup, keyring) = try await Self.sealedDevice(encrypted: true)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let result = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--password-file", "-"], stdin: "protfs test password\n")
    #expect(result.status == 0, "\(result)")
    try Self.expectSealed(t)
    let unopenable = t.containerPath(Self.app, "Documents/unopenable.bin")
    #expect(Self.record(unopenable)?[1] == ProtectionClassCode.c.rawValue)
    #expect(try Self.plaintext(unopenable, device: t.device) == Data(count: 6))
    let (findings, output) = try await Self.sealFindings(t)
    #expect(findings.isEmpty, "\(output)")
  }

  /// The files both fixtures hold, each with the class code of its record and its contents.
  static func expectSealed(_ t: TestDevice) throws {
    let root = t.containerPath(app) + "/"
    let files: [(String, ProtectionClassCode, Data)] = [
      ("Documents/secret.txt", .a, Data("the passcode is 1234\n".utf8)),
      ("Library/Preferences/com.example.notes.plist", .b, Data("<plist/>".utf8)),
      ("Documents/notes.sqlite", .c, Data("SQLite format 3\0".utf8) + Data(repeating: UInt8(ascii: "n"), count: 4000)),
      ("Library/Caches/cache.bin", .d, Data(String(repeating: "cache", count: 100).utf8)),
    ]
    for (relative, code, contents) in files {
      let record = try #require(Self.record(root + relative), "\(relative) has no key record")
      #expect(record[1] == code.rawValue, "\(relative)")
      let backing = try #require(FileManager.default.contents(atPath: root + relative))
      #expect(backing.count == contents.count, "\(relative)")
      #expect(!backing.contains(contents.prefix(8)), "\(relative): the backing file holds plaintext")
      #expect(try Self.plaintext(root + relative, device: t.device) == contents, "\(relative)")
    }
    #expect(t.rawClass(root + "Documents/secret.txt") == "NSFileProtectionComplete")
  }

  /// A locked sealed device cannot make a class-A file: the import is refused with EPERM naming
  /// the file, and nothing is imported; a container of other classes imports, without the lock's
  /// modes (a sealed device's unlock gives none back); once unlocked, the rest imports.
  @Test func aLockedSealedDeviceRefusesAClassAFileAndImportsNothing() async throws {
    let (t, backup, keyring) = try await Self.sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let passcode = Self.cheap.merging(["PROTFS_PASSCODE": "1234"]) { $1 }
    #expect(try await Protfs.run(["--device", t.root, "passcode", "set"], environment: passcode).status == 0)
    // Containers/ of class complete: the imported container roots inherit it, which a locked
    // device's lock table would strip of their write bits.
    try t.device.setClass(.complete, of: Device.containersPath)
    #expect(try await Protfs.run(["--device", t.root, "lock", "--grace", "0"]).status == 0)
    let refused = try await Protfs.run(["--device", t.root, "import-backup", backup])
    #expect(refused.status != 0, "\(refused)")
    #expect(refused.stderr.contains("Operation not permitted"), "\(refused)")
    #expect(refused.stderr.contains("\(Self.app)/Documents/secret.txt"), "\(refused)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(Self.app)))
    let staging = (try? FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs/staging")) ?? []
    #expect(staging.isEmpty, "\(staging)")
    // A container of class C alone imports while locked: class C's key stays after the first unlock.
    let group = try await Protfs.run(
      ["--device", t.root, "import-backup", backup, "--bundle", "group.com.example.shared"])
    #expect(group.status == 0, "\(group)")
    let shared = t.containerPath("group.com.example.shared", "Shared.db")
    #expect(Self.record(shared)?[1] == ProtectionClassCode.c.rawValue)
    #expect(try Self.plaintext(shared, device: t.device) == Data("shared".utf8))

    #expect(try await Protfs.run(["--device", t.root, "unlock"], environment: passcode).status == 0)
    #expect(t.mode(t.containerPath("group.com.example.shared")) & 0o777 == 0o755)
    let imported = try await Protfs.run(["--device", t.root, "import-backup", backup, "--bundle", Self.app])
    #expect(imported.status == 0, "\(imported)")
    try Self.expectSealed(t)
  }

  /// Plaintext dropped into a sealed container, a record swapped from another file, a record
  /// whose class byte was changed, and a record removed are each reported, naming the file; no
  /// finding shows a byte of a key. An unsealed device gets none of these findings.
  @Test func theAuditReportsPlaintextAndKeyRecordsThatDoNotMatchTheirFiles() async throws {
    let (t, backup, keyring) = try await Self.sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    #expect(try await Protfs.run(["--device", t.root, "import-backup", backup]).status == 0)
    #expect(try await Self.sealFindings(t).findings.isEmpty)
    let root = t.containerPath(Self.app) + "/"
    try t.writeFile(root + "Documents/dropped.txt", "a dropped secret")
    try t.writeFile(root + "Documents/empty", "")
    let notes = try #require(Self.record(root + "Documents/notes.sqlite"))
    #expect(Self.setRecord(root + "Documents/missing.bin", notes))
    var relabelled = try #require(Self.record(root + "Library/Caches/cache.bin"))
    relabelled[1] = ProtectionClassCode.c.rawValue
    #expect(Self.setRecord(root + "Library/Caches/cache.bin", relabelled))
    #expect(Self.setRecord(root + "Documents/secret.txt", nil))

    let (findings, output) = try await Self.sealFindings(t)
    let container = "Containers/\(Self.app)/"
    #expect(
      findings == [
        "PFS018 \(container)Documents/dropped.txt", "PFS018 \(container)Documents/secret.txt",
        "PFS019 \(container)Documents/missing.bin", "PFS019 \(container)Library/Caches/cache.bin",
      ], "\(output)")
    #expect(output.contains("copied from another file") && output.contains("wrapped for class C"), "\(output)")
    let hex = notes.map { String(format: "%02x", $0) }.joined()
    #expect(!output.contains(String(hex.suffix(32))), "a finding shows key material")

    let unsealed = try TestDevice(containers: [Self.app])
    try unsealed.writeFile(unsealed.containerPath(Self.app, "Documents/plain.txt"), "plaintext as ever")
    #expect(try await Self.sealFindings(unsealed).findings.isEmpty)
  }
}
