import Foundation
import ProtFS
import ProtFSSeal
import ProtFSTestSupport
import Testing

/// `protfs seal` on a device that holds files (docs/sealed.md): every file encrypted in place, its
/// attributes, owner, mode and class kept, crash-safe across the walk; and a class change on a sealed
/// device wrapping the file keys anew.
@Suite(.serialized) struct SealCommandTests {
  static let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]

  /// `LockDevice` with a file that inherits class complete from its directory and one that has no
  /// class anywhere (its container's default); their contents, by path relative to `Documents/`.
  static func device() throws -> (LockDevice, [String: String]) {
    let d = try LockDevice()
    try d.t.writeFile(d.path("Secret/inherits.txt"), "secret inherited\n")
    try d.t.writeFile(d.path("plain.txt"), "secret by default\n")
    var contents: [String: String] = [:]
    for relative in FileManager.default.subpaths(atPath: d.documents) ?? [] {
      let path = d.path(relative)
      var s = stat()
      guard lstat(path, &s) == 0, s.st_mode & S_IFMT == S_IFREG else { continue }
      contents[relative] = try String(contentsOfFile: path, encoding: .utf8)
    }
    return (d, contents)
  }

  /// The device's keys in the keyring, to evict at the test's end.
  static func keyring(_ d: LockDevice) throws -> ClassKeyring {
    let store = SealStore(device: d.t.device)
    return ClassKeyring(keybagUUID: try store.keybag(deviceKey: try store.deviceKey()).uuid)
  }

  /// Every file of `contents` sealed: a key record of its effective class, no plaintext behind it,
  /// its plaintext through the keys.
  static func expectSealed(_ d: LockDevice, _ contents: [String: String], _ note: String = "") throws {
    let files = try #require(try SealedFiles(device: d.t.device), "not sealed \(note)")
    for (relative, text) in contents {
      let path = d.path(relative)
      let backing = try #require(FileManager.default.contents(atPath: path))
      #expect(!backing.contains(Data("contents".utf8)) && !backing.contains(Data("secret".utf8)), "\(path) \(note)")
      let fd = open(path, O_RDONLY | O_CLOEXEC)
      defer { close(fd) }
      let record = try SealedFiles.record(of: fd)
      let effective = try d.t.device.effectiveClass(of: try d.t.device.resolve(path)).protectionClass
      #expect(record.code == ProtectionClassCode(effective), "\(path) \(note)")
      let io = SealedFileIO(fd: fd, cipher: try files.cipher(of: fd), path: path)
      #expect(try io.read(at: 0, count: 1 << 16) == Array(text.utf8), "\(path) \(note)")
    }
  }

  @Test func aKillAnywhereInTheSealIsFinishedByTheNextCommand() async throws {
    var crashes = 0
    for step in 1...60 {
      let (d, contents) = try Self.device()
      let before = d.snapshot()
      let sealed = try await d.protfs(
        ["seal"], environment: Self.cheap.merging(["PROTFS_CRASH_AFTER": "\(step)"]) { $1 })
      if sealed.status == 0 {
        try Self.expectSealed(d, contents, "uninterrupted")
        try Self.keyring(d).evict(Set(ProtectionClassCode.allCases))
        break
      }
      crashes += 1
      #expect(sealed.status == 137, "step \(step): \(sealed)")
      let next = try await d.protfs(["status"], environment: Self.cheap)
      #expect(next.status == 0, "\(next)")
      #expect(next.stderr.contains("finished an interrupted sealing"), "step \(step): \(next)")
      #expect(next.stdout.contains("Sealed:                    yes"), "step \(step): \(next)")
      #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/seal/sealing"))
      // Nothing left beside the files (no sealed copy), each with its attributes, owner and mode.
      #expect(d.snapshot() == before, "step \(step)")
      try Self.expectSealed(d, contents, "step \(step)")
      try Self.keyring(d).evict(Set(ProtectionClassCode.allCases))
    }
    #expect(crashes >= 10)
  }

  @Test func sealAsksForThePasscodeAndTheLockThenEvictsKeys() async throws {
    let (d, contents) = try Self.device()
    #expect(
      try await d.protfs(["passcode", "set"], environment: Self.cheap.merging(["PROTFS_PASSCODE": "1234"]) { $1 })
        .status == 0)
    let wrong = try await d.protfs(["seal"], environment: ["PROTFS_PASSCODE": "0000"])
    #expect(wrong.status == 1 && wrong.stderr.contains("passcode is wrong"), "\(wrong)")
    #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/seal"))
    let seal = try await d.protfs(["seal"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(seal.status == 0 && seal.stdout.contains("sealed (\(contents.count) files encrypted"), "\(seal)")
    defer { try? Self.keyring(d).evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    try Self.expectSealed(d, contents)
    let again = try await d.protfs(["seal"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(again.status == 0 && again.stdout.contains("sealed already"), "\(again)")
    let lock = try await d.protfs(["lock", "--grace", "0"])
    #expect(lock.stdout.contains("(sealed: keys of ") && lock.stdout.contains("evicted"), "\(lock)")
    let status = try await d.protfs(["status", "--json"])
    let json = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
    #expect(json?["sealed"] as? Bool == true, "\(status)")
    #expect((json?["inconsistencies"] as? [Any])?.isEmpty == true, "a sealed lock changes no mode: \(status)")
    let refused = try await d.protfs(["seal"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(refused.status == 0, "a sealed device is sealed whatever its state: \(refused)")
    let unlock = try await d.protfs(["unlock"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(unlock.stdout.contains("class keys unwrapped"), "\(unlock)")
    try Self.expectSealed(d, contents, "after the unlock")
  }

  @Test func aHardLinkedOrLockedDeviceIsRefusedAndNothingChanges() async throws {
    let (d, _) = try Self.device()
    link(d.path("none.txt"), d.path("Secret/linked.txt"))
    let linked = try await d.protfs(["seal"])
    #expect(linked.status == 1 && linked.stderr.contains("none.txt") && linked.stderr.contains("2 links"), "\(linked)")
    #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/seal"))
    unlink(d.path("Secret/linked.txt"))
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let locked = try await d.protfs(["seal"])
    #expect(locked.status == 1 && locked.stderr.contains("while it is locked"), "\(locked)")
    #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/seal"))
  }

  @Test func aClassChangeRewrapsTheKeysOfTheFilesWhoseClassChanges() async throws {
    let (d, contents) = try Self.device()
    #expect(try await d.protfs(["seal"], environment: Self.cheap).status == 0)
    defer { try? Self.keyring(d).evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    // A file's own class; a directory's, which its inheriting file follows and its labelled one not.
    #expect(try await d.protfs(["set-class", "complete", d.path("none.txt")]).status == 0)
    #expect(try await d.protfs(["set-class", "none", d.path("Secret")]).status == 0)
    try Self.expectSealed(d, contents)
    let fd = open(d.path("Secret/inherits.txt"), O_RDONLY | O_CLOEXEC)
    #expect(try SealedFiles.record(of: fd).code == .d)
    close(fd)
    // Class A's key evicted: a change to it, or from it, cannot wrap the key, and changes nothing.
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    let refused = try await d.protfs(["set-class", "complete", d.path("Secret")])
    #expect(refused.status == 1 && refused.stderr.contains("inherits.txt"), "\(refused)")
    #expect(refused.stderr.contains("evicted"), "\(refused)")
    #expect(d.t.rawClass(d.path("Secret")) == ProtectionClass.none.rawValue)
    // From C to D: both keys are held while locked.
    #expect(try await d.protfs(["set-class", "none", d.path("until-first-auth.txt")]).status == 0)
    let changed = open(d.path("until-first-auth.txt"), O_RDONLY)
    #expect(try SealedFiles.record(of: changed).code == .d)
    close(changed)
  }

  /// A class change killed before or after it wrapped a key anew is made again by the next command:
  /// every key is wrapped by the class its file has then (the change's, recorded before any key).
  @Test(arguments: [1, 2])
  func aClassChangeKilledMidwayIsFinishedByTheNextCommand(crashAfter: Int) async throws {
    let (d, contents) = try Self.device()
    try d.t.writeFile(d.path("Secret/also.txt"), "secret too\n")
    var all = contents
    all["Secret/also.txt"] = "secret too\n"
    #expect(try await d.protfs(["seal"], environment: Self.cheap).status == 0)
    defer { try? Self.keyring(d).evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let killed = try await d.protfs(
      ["set-class", "none", d.path("Secret")], environment: ["PROTFS_CRASH_AFTER": "\(crashAfter)"])
    #expect(killed.status != 0, "\(killed)")
    let next = try await d.protfs(["status"])
    #expect(next.stderr.contains("finished an interrupted class change"), "\(next)")
    #expect(d.t.rawClass(d.path("Secret")) == ProtectionClass.none.rawValue)
    try Self.expectSealed(d, all)
    #expect(!FileManager.default.fileExists(atPath: d.t.root + "/.protfs/seal/class-change.json"))
  }

  /// A record of a class change naming `..` is refused as any path with it is: a warning, and
  /// nothing outside the device touched.
  @Test func aForgedClassChangeRecordReachesNothingOutsideTheDevice() async throws {
    let (d, _) = try Self.device()
    #expect(try await d.protfs(["seal"], environment: Self.cheap).status == 0)
    defer { try? Self.keyring(d).evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    let outside = d.t.root + "/../outside-\(UUID().uuidString)"
    try Data("x".utf8).write(to: URL(fileURLWithPath: outside))
    defer { try? FileManager.default.removeItem(atPath: outside) }  // the test's own file
    let record =
      #"{"path":[[46,46],\#(Array((outside as NSString).lastPathComponent.utf8))],"#
      + #""protectionClass":"NSFileProtectionComplete","recursive":false}"#
    try Data(record.utf8).write(to: URL(fileURLWithPath: d.t.root + "/.protfs/seal/class-change.json"))
    let next = try await d.protfs(["status"])
    #expect(next.status == 0 && next.stderr.contains("'..'"), "\(next)")
    #expect(d.t.rawClass(outside) == nil)
  }

  @Test func aClassSetThroughTheMountRewrapsTheKeys() async throws {
    let (m, keyring) = try await SealedMountTests.sealedDevice(passcode: nil)
    defer { try? keyring.evict(Set(ProtectionClassCode.allCases)) }  // the test's own keys
    func code(_ name: String) throws -> ProtectionClassCode {
      let fd = open(m.backingDocuments + "/" + name, O_RDONLY)
      defer { close(fd) }
      return try SealedFiles.record(of: fd).code
    }
    let made = try await m.sh(
      "mkdir '\(m.documents)/d' && echo secret > '\(m.documents)/f' && echo inherited > '\(m.documents)/d/g'"
        + " && setfattr -n user.protfs.class -v complete '\(m.documents)/f'")
    #expect(made.status == 0, "\(made)")
    #expect(try code("f") == .a)
    // A file made through the mount is labelled; unlabelled behind it, it inherits its directory's class.
    #expect(try await m.sh("setfattr -x user.protfs.class '\(m.backingDocuments)/d/g'").status == 0)
    let relabel = try await m.sh("setfattr -n user.protfs.class -v none '\(m.documents)/d' && cat '\(m.documents)/d/g'")
    #expect(relabel.status == 0 && relabel.stdout == "inherited\n", "\(relabel)")
    #expect(try code("d/g") == .d)
    #expect(try await m.sh("cat '\(m.documents)/f'").stdout == "secret\n")
    // Its class removed through the mount, a file inherits again: its key is wrapped by that class.
    let unlabel = try await m.sh(
      "echo fresh > '\(m.documents)/h' && setfattr -x user.protfs.class '\(m.documents)/f' && cat '\(m.documents)/f'")
    #expect(unlabel.status == 0 && unlabel.stdout == "secret\n", "\(unlabel)")
    #expect(try code("h") != .a)
    #expect(try code("f") == code("h"))
  }
}
