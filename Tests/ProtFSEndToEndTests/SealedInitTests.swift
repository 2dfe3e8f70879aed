import Foundation
import ProtFS
import ProtFSLock
import ProtFSSeal
import ProtFSTestSupport
import Testing

/// `protfs init --sealed` (docs/sealed.md): a new device is sealed with fresh class keys in root's
/// keyring, a device that already holds files is refused (they would stay plaintext), and a sealed
/// device's lock evicts keys without touching one permission mode.
@Suite(.serialized) struct SealedInitTests {
  static let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]

  func protfs(_ t: TestDevice, _ arguments: [String]) async throws -> RunResult {
    try await Protfs.run(["--device", t.root] + arguments, environment: Self.cheap)
  }

  /// Evicts the keys a test's sealed device left in root's keyring.
  static func evictKeys(_ t: TestDevice) {
    guard let bag = try? SealStore(device: t.device).keybag(deviceKey: SealStore(device: t.device).deviceKey())
    else { return }
    // The test's own keys; a failure leaves keys of a removed device, harmless.
    try? ClassKeyring(keybagUUID: bag.uuid).evict(Set(ProtectionClassCode.allCases))
  }

  @Test func initSealedSealsANewDeviceWhoseLockEvictsKeysAndLeavesModesAlone() async throws {
    let t = try TestDevice(initialize: false)
    defer { Self.evictKeys(t) }
    let made = try await protfs(t, ["init", "--sealed", "com.example.app", "--default-class", "complete"])
    #expect(made.status == 0 && made.stderr.contains("Sealed the device"), "\(made)")
    #expect(try LockController(device: t.device).isSealed)
    #expect(try #require(try SealedFiles(device: t.device)).available == Set(ProtectionClassCode.allCases))
    let documents = t.containerPath("com.example.app", "Documents")
    let before = t.mode(documents)
    #expect(try await protfs(t, ["lock", "--grace", "0"]).status == 0)
    // An unsealed device's lock takes the modes of a complete directory away; a sealed one's keys.
    #expect(t.mode(documents) == before)
    #expect(try #require(try SealedFiles(device: t.device)).available == [.c, .d, .cx])
    #expect(try await protfs(t, ["unlock"]).status == 0)
    #expect(try #require(try SealedFiles(device: t.device)).available == Set(ProtectionClassCode.allCases))
    // Again on the sealed device: another container, the keys as they were.
    let again = try await protfs(t, ["init", "--sealed", "com.example.b"])
    #expect(again.status == 0 && !again.stderr.contains("Sealed the device"), "\(again)")
  }

  /// A sealed lock is its record and its keys: no journal, no mode key (which only an unsealed
  /// device's walk needs). It evicts by the keybag's UUID alone, so a keybag whose signature no
  /// longer verifies keeps no key in the keyring, where the lock used to give up on it.
  @Test func aSealedLockEvictsTheKeysEvenOfAKeybagThatNoLongerVerifies() async throws {
    let t = try TestDevice(initialize: false)
    let made = try await protfs(t, ["init", "--sealed", "com.example.app"])
    #expect(made.status == 0, "\(made)")
    let uuid = try #require(try SealStore(device: t.device).keybagUUID())
    let keyring = ClassKeyring(keybagUUID: uuid)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let held = { () throws -> Set<ProtectionClassCode> in
      try keyring.load(onto: ClassKeys([:], classBPublicKey: [])).available
    }
    #expect(try held().isSuperset(of: [.a, .b]))
    let keybag = t.root + "/.protfs/seal/keybag"
    var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: keybag)))
    bytes[bytes.count - 1] ^= 0xFF  // the signature's last byte
    try Data(bytes).write(to: URL(fileURLWithPath: keybag))
    let locked = try await protfs(t, ["lock", "--grace", "0"])
    #expect(locked.status == 0, "\(locked)")
    #expect(try held().isDisjoint(with: [.a, .b]))
    let state = try FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs")
    #expect(!state.contains("mode-key") && !state.contains("transition.json"), "\(state)")
  }

  @Test func initSealedRefusesADeviceThatHoldsFilesAndNamesOne() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    defer { Self.evictKeys(t) }
    try t.writeFile(t.containerPath("com.example.app", "Documents/notes.txt"), "plain")
    let refused = try await protfs(t, ["init", "--sealed", "com.example.app"])
    #expect(refused.status == 1, "\(refused)")
    #expect(refused.stderr.contains("notes.txt") && refused.stderr.contains("protfs seal"), "\(refused)")
    #expect(try !LockController(device: t.device).isSealed)
  }

  @Test func initSealedRefusesADeviceWithAPasscode() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    defer { Self.evictKeys(t) }
    let set = try await Protfs.run(
      ["--device", t.root, "passcode", "set"], environment: Self.cheap.merging(["PROTFS_PASSCODE": "1234"]) { $1 })
    #expect(set.status == 0, "\(set)")
    let refused = try await protfs(t, ["init", "--sealed", "com.example.app"])
    #expect(refused.status == 1 && refused.stderr.contains("passcode"), "\(refused)")
    #expect(try !LockController(device: t.device).isSealed)
  }

  /// An unlock killed after it put the keys in the keyring and before it recorded the state: the
  /// state recorded (locked) decides what a writer outside the mount may use, not the keyring.
  @Test func keysInTheKeyringThatTheRecordedStateWithdrawsAreNotUsed() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    defer { Self.evictKeys(t) }
    let controller = LockController(device: t.device, passcodeIterations: 1000)
    #expect(try controller.sealEmptyDevice())
    try controller.lock(grace: 0)
    let store = SealStore(device: t.device)
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    try ClassKeyring(keybagUUID: bag.uuid).store(try bag.unlock(deviceKey: deviceKey, passcode: nil))
    #expect(try #require(try SealedFiles(device: t.device)).available == [.c, .d, .cx])
  }

  /// A passcode change killed at either step after it wrote the new keybag beside the old: before
  /// its record (the old passcode still opens the keys) or after it (the new one does), where a
  /// keybag the recorded passcode cannot open would lock them away for good. A sealed device's
  /// transition has no journal: its record is its commit. The next unlock leaves one keybag.
  @Test(arguments: [(1, "1111"), (2, "2222")])
  func aPasscodeChangeKilledAtAnyStepLeavesTheRecordedPasscodeOpeningTheKeys(
    crashAfter: Int, recorded: String
  ) async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    defer { Self.evictKeys(t) }
    #expect(try LockController(device: t.device, passcodeIterations: 1000).sealEmptyDevice())
    #expect(try await run(t, ["passcode", "set"], ["PROTFS_PASSCODE": "1111"]).status == 0)
    let killed = try await run(
      t, ["passcode", "set"],
      ["PROTFS_PASSCODE": "2222", "PROTFS_CURRENT_PASSCODE": "1111", "PROTFS_CRASH_AFTER": String(crashAfter)])
    #expect(killed.status != 0, "\(killed)")
    try await expectUnlocks(t, with: recorded)
  }

  /// A passcode change killed before its record: the keybag it left beside the old one is not the
  /// recorded passcode's; the old passcode opens the keys, and the other keybag goes.
  @Test func aKeybagLeftByAPasscodeChangeKilledBeforeItsRecordIsDropped() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    defer { Self.evictKeys(t) }
    #expect(try LockController(device: t.device, passcodeIterations: 1000).sealEmptyDevice())
    #expect(try await run(t, ["passcode", "set"], ["PROTFS_PASSCODE": "1111"]).status == 0)
    let store = SealStore(device: t.device)
    let deviceKey = try store.deviceKey()
    let bag = try store.keybag(deviceKey: deviceKey)
    let keys = try bag.unlock(deviceKey: deviceKey, passcode: "1111")
    try store.writePendingKeybag(
      try bag.rewrapped(keys, deviceKey: deviceKey, newPasscode: "9999", iterations: 1000), deviceKey: deviceKey)
    try await expectUnlocks(t, with: "1111")
  }

  func run(_ t: TestDevice, _ arguments: [String], _ environment: [String: String]) async throws -> RunResult {
    try await Protfs.run(["--device", t.root] + arguments, environment: Self.cheap.merging(environment) { $1 })
  }

  /// Locks `t`, unlocks it with `passcode`, and expects every class key back and one keybag.
  func expectUnlocks(_ t: TestDevice, with passcode: String) async throws {
    #expect(try await run(t, ["lock", "--grace", "0"], [:]).status == 0)
    let unlocked = try await run(t, ["unlock"], ["PROTFS_PASSCODE": passcode])
    #expect(unlocked.status == 0, "\(unlocked)")
    #expect(try #require(try SealedFiles(device: t.device)).available == Set(ProtectionClassCode.allCases))
    #expect(!FileManager.default.fileExists(atPath: t.root + "/.protfs/seal/keybag.next"))
  }
}
