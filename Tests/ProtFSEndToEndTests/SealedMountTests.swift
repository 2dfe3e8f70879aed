import Foundation
import ProtFS
import ProtFSSeal
import ProtFSTestSupport
import Testing

/// A sealed device through `protfs mount` (docs/sealed.md): the mount is the only way to plaintext;
/// the backing files are ciphertext of the same length; a key record missing, damaged or taken from
/// another file is EIO through the mount, and nothing is decrypted with it.
///
/// The device is sealed by the library here, and its keys put in root's keyring as `unlock` will put
/// them: `init --sealed` and the lock's key eviction are not built yet.
@Suite(.serialized) struct SealedMountTests {
  /// A mounted sealed device, and the keyring that holds its unlocked keys (the test empties it).
  static func sealedDevice(passcode: String? = "1234") async throws -> (MountedDevice, ClassKeyring) {
    var keyring: ClassKeyring?
    let m = try await MountedDevice { t in
      let store = SealStore(device: t.device)
      let keys = try store.create(passcode: passcode, iterations: 1_000)
      let deviceKey = try store.deviceKey()
      keyring = ClassKeyring(keybagUUID: try store.keybag(deviceKey: deviceKey).uuid)
      try keyring!.store(keys)
    }
    return (m, keyring!)
  }

  @Test func filesWrittenThroughTheMountAreCiphertextBehindIt() async throws {
    let (m, keyring) = try await Self.sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let file = "\(m.documents)/a.txt"
    let write = try await m.sh(
      "printf 'a secret line\\n' > '\(file)' && printf 'and more\\n' >> '\(file)' && cat '\(file)'")
    #expect(write.status == 0 && write.stdout == "a secret line\nand more\n", "\(write)")
    let backing = try #require(FileManager.default.contents(atPath: m.backingDocuments + "/a.txt"))
    #expect(backing.count == 23)
    #expect(!backing.contains(Data("secret".utf8)), "the backing file holds plaintext")
    // Writes inside a block, past the end, and truncation, as a plain file takes them.
    let edit = try await m.sh(
      "printf XY | dd of='\(file)' bs=1 seek=2 conv=notrunc 2>/dev/null && truncate -s 9 '\(file)' && cat '\(file)'"
        + " && truncate -s 5000 '\(file)' && dd if=/dev/urandom of='\(m.documents)/big' bs=4096 count=5 2>/dev/null"
        + " && cp '\(m.documents)/big' /tmp/sealed-copy.$$ && cmp '\(m.documents)/big' /tmp/sealed-copy.$$"
        + " && rm /tmp/sealed-copy.$$ && wc -c < '\(file)'")
    #expect(edit.status == 0 && edit.stdout == "a XYcret 5000\n", "\(edit)")
  }

  @Test func aKeyRecordMissingDamagedOrFromAnotherFileIsEIO() async throws {
    let (m, keyring) = try await Self.sealedDevice()
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let made = try await m.sh(
      "echo one > '\(m.documents)/one' && echo two > '\(m.documents)/two' && echo three > '\(m.documents)/three'")
    #expect(made.status == 0, "\(made)")
    let backing = m.backingDocuments
    let swap = try await m.sh(
      "python3 -c \"import os; os.setxattr('\(backing)/one', 'user.protfs.key',"
        + " os.getxattr('\(backing)/two', 'user.protfs.key')); os.removexattr('\(backing)/three', 'user.protfs.key')\"")
    #expect(swap.status == 0, "\(swap)")
    for name in ["one", "three"] {
      let read = try await m.sh("cat '\(m.documents)/\(name)'")
      #expect(read.status != 0 && read.stderr.contains("Input/output error"), "\(name): \(read)")
    }
    #expect(try await m.sh("cat '\(m.documents)/two'").stdout == "two\n")
  }

  @Test func aLockEvictsTheKeysOfClassesAAndBAndUnlockUnwrapsThemAgain() async throws {
    let (m, keyring) = try await Self.sealedDevice(passcode: nil)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]
    let set = try await Protfs.run(
      ["--device", m.root, "passcode", "set"], environment: cheap.merging(["PROTFS_PASSCODE": "1234"]) { $1 })
    #expect(set.status == 0, "\(set)")
    // A directory of class complete, set through the mount (which the mount then knows at once).
    let vault = try await m.sh(
      "mkdir '\(m.documents)/vault' && setfattr -n user.protfs.class -v complete '\(m.documents)/vault'")
    #expect(vault.status == 0, "\(vault)")
    let write = try await m.sh("echo classified > '\(m.documents)/vault/a.txt' && cat '\(m.documents)/vault/a.txt'")
    #expect(write.stdout == "classified\n", "\(write)")
    let base = try SealStore(device: m.t.device).keybag(deviceKey: try SealStore(device: m.t.device).deviceKey())
      .deviceOnlyKeys(deviceKey: try SealStore(device: m.t.device).deviceKey())
    #expect(try keyring.load(onto: base).available == Set(ProtectionClassCode.allCases))

    #expect(try await m.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try keyring.load(onto: base).available == [.c, .d, .cx])
    let locked = try await m.sh("cat '\(m.documents)/vault/a.txt'")
    #expect(locked.status != 0 && locked.stderr.contains("Operation not permitted"), "\(locked)")
    let backing = try #require(FileManager.default.contents(atPath: m.backingDocuments + "/vault/a.txt"))
    #expect(!backing.contains(Data("classified".utf8)))

    let wrong = try await Protfs.run(["--device", m.root, "unlock"], environment: ["PROTFS_PASSCODE": "0000"])
    #expect(wrong.status != 0)
    #expect(try keyring.load(onto: base).available == [.c, .d, .cx])
    let unlock = try await Protfs.run(["--device", m.root, "unlock"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(unlock.status == 0, "\(unlock)")
    #expect(try keyring.load(onto: base).available == Set(ProtectionClassCode.allCases))
    #expect(try await m.sh("cat '\(m.documents)/vault/a.txt'").stdout == "classified\n")

    #expect(try await m.protfs(["reboot"]).status == 0)
    #expect(try keyring.load(onto: base).available == [.d])
  }
}
