import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs app uninstall` and `protfs erase`, as simctl's: what they remove, what they refuse, and
/// that a kill in the middle leaves the next command to finish (issue 64).
@Suite(.serialized) struct UninstallEraseTests {
  /// `protfs --device ROOT ARGS`.
  func protfs(_ t: TestDevice, _ arguments: [String]) async throws -> RunResult {
    try await Protfs.run(["--device", t.root] + arguments, environment: ["PROTFS_PBKDF2_ITERATIONS": "1000"])
  }

  /// A file outside the device, with a symlink to it (and one to its directory) in `bundleID`'s
  /// container: removing the container removes the links, never what they point to.
  func linkOutside(_ t: TestDevice, _ bundleID: String) throws -> String {
    let outside = t.directory + "/outside"
    mkdir(outside, 0o755)
    try "keep\n".write(toFile: outside + "/target.txt", atomically: true, encoding: .utf8)
    symlink(outside + "/target.txt", t.containerPath(bundleID, "Documents/link.txt"))
    symlink(outside, t.containerPath(bundleID, "Documents/linked-directory"))
    return outside
  }

  @Test func uninstallRemovesTheAppsContainerRecordAndLogAndNoOtherApps() async throws {
    let t = try TestDevice(containers: ["com.example.a", "com.example.b"])
    try t.writeFile(t.containerPath("com.example.a", "Documents/notes.txt"))
    let outside = try linkOutside(t, "com.example.a")
    #expect(try await protfs(t, ["app", "install", "com.example.a", "--", "/bin/true"]).status == 0)
    let removed = try await protfs(t, ["app", "uninstall", "com.example.a"])
    #expect(removed.status == 0 && removed.stdout.contains("Uninstalled com.example.a"), "\(removed)")
    #expect(!FileManager.default.fileExists(atPath: t.containerPath("com.example.a")))
    #expect(!FileManager.default.fileExists(atPath: t.root + "/.protfs/apps/com.example.a.json"))
    #expect(!FileManager.default.fileExists(atPath: t.root + "/.protfs/trash"))
    #expect((try? String(contentsOfFile: outside + "/target.txt", encoding: .utf8)) == "keep\n")
    #expect(FileManager.default.fileExists(atPath: t.containerPath("com.example.b", "Documents")))
    let again = try await protfs(t, ["app", "uninstall", "com.example.a"])
    #expect(again.status == 1 && again.stderr.contains("The app com.example.a is not installed"), "\(again)")
  }

  /// A kill after the container went into the trash: the next command, whichever, empties it.
  @Test func aRemovalAKillInterruptedIsFinishedByTheNextCommand() async throws {
    let t = try TestDevice(containers: ["com.example.a"])
    let outside = try linkOutside(t, "com.example.a")
    let trash = t.root + "/.protfs/trash"
    mkdir(trash, 0o700)
    #expect(rename(t.containerPath("com.example.a"), trash + "/com.example.a.1234") == 0)
    let next = try await protfs(t, ["status"])
    #expect(next.status == 0 && next.stderr.contains("finished an interrupted removal"), "\(next)")
    #expect(!FileManager.default.fileExists(atPath: trash))
    #expect((try? String(contentsOfFile: outside + "/target.txt", encoding: .utf8)) == "keep\n")
  }

  /// An erase holds the device's state lock, as a lock transition does, until it is done: the
  /// process that ends a lock's grace, or another command finishing an interrupted removal, waits
  /// for it, rather than emptying the trash under it (the erase then failed on a file gone from
  /// its trash) or writing a lock state into the device it erases.
  @Test func anEraseHoldsTheDevicesStateLockUntilItIsDone() async throws {
    let d = try AppDevice()
    defer { d.remove() }
    var hold = try DebugHoldPoint(in: d.scripts)
    let running = try RunningApp(
      device: d, arguments: ["--device", d.root, "erase", "-f"], environment: ["PROTFS_DEBUG_HOLD_ERASE": hold.path])
    defer { running.stop() }
    try #require(await hold.reached(), "the hold")
    let lock = open(d.root + "/.protfs/lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    #expect(lock >= 0)
    #expect(flock(lock, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK, "the erase does not hold the lock")
    close(lock)
    hold.release()
    #expect(await running.exit().0 == 0, "\(running.output)")
    let next = try await d.protfs(["status"])
    #expect(next.status == 0 && !next.stderr.contains("interrupted"), "\(next)")
    #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/trash"))
  }

  @Test func eraseLeavesTheDeviceAsInitMadeIt() async throws {
    let t = try TestDevice(containers: ["com.example.a", "com.example.b"])
    let outside = try linkOutside(t, "com.example.a")
    #expect(try await protfs(t, ["app", "install", "com.example.a", "--", "/bin/true"]).status == 0)
    let set = try await protfs(t, ["passcode", "set", "--passcode", "1234"])
    #expect(set.status == 0, "\(set)")
    #expect(try await protfs(t, ["lock"]).status == 0)
    // Not on a terminal, it asks for --force rather than erase unasked.
    let unasked = try await protfs(t, ["erase"])
    #expect(unasked.status == 64 && unasked.stderr.contains("--force"), "\(unasked)")
    #expect(FileManager.default.fileExists(atPath: t.containerPath("com.example.a")))
    let erased = try await protfs(t, ["erase", "-f"])
    #expect(erased.status == 0, "\(erased)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: t.root + "/Containers") == [])
    let state = try FileManager.default.contentsOfDirectory(atPath: t.root + "/.protfs").filter { $0 != "lock" }
    #expect(state == ["device.json"], "\(state)")
    #expect((try? String(contentsOfFile: outside + "/target.txt", encoding: .utf8)) == "keep\n")
    let status = try await protfs(t, ["status", "--json"])
    let object = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any]
    #expect(object?["state"] as? String == "unlocked" && object?["passcodeRequired"] as? Bool == false, "\(status)")
    #expect(try await protfs(t, ["init", "com.example.a"]).status == 0)
  }

  /// A kill after the erase's marker was written and part was moved: the next command moves the
  /// rest and removes everything.
  @Test func anEraseAKillInterruptedIsFinishedByTheNextCommand() async throws {
    let t = try TestDevice(containers: ["com.example.a"])
    let outside = try linkOutside(t, "com.example.a")
    #expect(try await protfs(t, ["app", "install", "com.example.a", "--", "/bin/true"]).status == 0)
    let trash = t.root + "/.protfs/trash"
    mkdir(trash, 0o700)
    try "Containers\nBundles".write(toFile: trash + "/erasing", atomically: true, encoding: .utf8)
    #expect(rename(t.root + "/.protfs/apps", trash + "/apps.99") == 0)
    let next = try await protfs(t, ["status"])
    #expect(next.status == 0 && next.stderr.contains("finished an interrupted removal"), "\(next)")
    #expect(!FileManager.default.fileExists(atPath: trash))
    #expect(try FileManager.default.contentsOfDirectory(atPath: t.root + "/Containers") == [])
    #expect(!FileManager.default.fileExists(atPath: t.root + "/.protfs/apps"))
    #expect((try? String(contentsOfFile: outside + "/target.txt", encoding: .utf8)) == "keep\n")
  }
}
