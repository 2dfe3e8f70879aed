import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// What a lock must hold against the app it locks out and against planted state: items handed to
/// root, saved modes only protfs can write, and no change to an inode linked from outside.
@Suite(.serialized) struct LockHardeningTests {
  /// Runs `command` as the app user (uid and gid 501, no supplementary groups).
  static func asAppUser(_ command: [String]) async throws -> RunResult {
    let id = String(LockDevice.appUser)
    return try await Protfs.runProgram(
      "/usr/bin/setpriv", ["--reuid=\(id)", "--regid=\(id)", "--clear-groups"] + command)
  }

  static func owner(_ path: String) -> String {
    var s = stat()
    lstat(path, &s)
    return "\(s.st_uid):\(s.st_gid)"
  }

  @Test func theAppUserCanNeitherReadNorChmodALockedItemButStillListsItsDirectory() async throws {
    let d = try LockDevice()
    let app = d.path("App")
    let original = d.snapshot()
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    // Handed to root, the group kept; the directory keeps its owner's r-x in the group bits.
    #expect(Self.owner(app + "/mine.txt") == "0:501" && d.t.mode(app + "/mine.txt") == 0)
    #expect(Self.owner(app + "/tool") == "0:501" && d.t.mode(app + "/tool") == 0)
    #expect(Self.owner(app) == "0:501" && d.t.mode(app) == 0o550)
    #expect(try await Self.asAppUser(["cat", app + "/mine.txt"]).status != 0)
    #expect(try await Self.asAppUser(["chmod", "0644", app + "/mine.txt"]).status != 0)
    #expect(try await Self.asAppUser(["chmod", "0755", app]).status != 0)
    #expect(try await Self.asAppUser(["touch", app + "/new.txt"]).status != 0)
    let listing = try await Self.asAppUser(["ls", app])
    #expect(listing.status == 0 && listing.stdout.contains("mine.txt"), "\(listing)")
    #expect(try await Self.asAppUser(["stat", app + "/mine.txt"]).status == 0)
    #expect(try await d.protfs(["status"]).stdout.contains("Inconsistencies:           none"))
    #expect(try await d.protfs(["unlock"]).status == 0)
    // Owner first, then mode: the set-id bits a chown clears are back too.
    #expect(d.snapshot() == original)
    #expect(d.t.mode(app + "/tool") == 0o6750 && Self.owner(app + "/tool") == "501:501")
    #expect(try await Self.asAppUser(["cat", app + "/mine.txt"]).status == 0)
  }

  @Test func aSetuidModePlantedByAnotherUserIsReportedAndNeverApplied() async throws {
    let d = try LockDevice()
    // Root's files that anyone may write, so `nobody` can write their user.* attributes.
    let locked = d.path("shared.txt")
    let open = d.path("open.txt")
    try d.t.writeFile(locked, "shared\n", mode: 0o666)
    try d.t.writeFile(open, "open\n", mode: 0o666)
    chmod(locked, 0o666)
    chmod(open, 0o666)
    try d.t.device.setClass(.complete, of: try d.t.device.resolve(locked))
    try d.t.device.setClass(.none, of: try d.t.device.resolve(open))
    func plant(_ path: String) async throws {
      let result = try await Protfs.runProgram(
        "/usr/bin/setpriv",
        Array(asNobody.dropFirst()) + ["setfattr", "-n", AttributeName.savedMode, "-v", "06777", path])
      #expect(result.status == 0, "\(result)")
    }
    // Before the lock: lock must not take the planted value for the original.
    try await plant(locked)
    let lock = try await d.protfs(["lock", "--grace", "0"])
    #expect(lock.status == 0 && lock.stderr.contains("'\(locked)' carried a saved-mode record"), "\(lock)")
    #expect(d.t.mode(locked) == 0)
    // While locked, on an item the lock left alone: status names it, unlock ignores it.
    try await plant(open)
    let status = try await d.protfs(["status"])
    #expect(status.stdout.contains("\(open): Its saved-mode record is not authentic"), "\(status)")
    let unlock = try await d.protfs(["unlock"])
    #expect(unlock.status == 0 && unlock.stderr.contains("'\(open)' carried a saved-mode record"), "\(unlock)")
    #expect(d.t.mode(locked) == 0o666)
    #expect(d.t.mode(open) == 0o600)
    #expect(Self.owner(locked) == "0:0" && Self.owner(open) == "0:0")
  }

  @Test func aHardLinkToAFileOutsideTheDeviceIsLeftAloneAndReported() async throws {
    let d = try LockDevice()
    let outside = d.t.directory + "/outside.txt"
    try d.t.writeFile(outside, "outside\n", mode: 0o644)
    #expect(Foundation.chown(outside, 1234, 1234) == 0)
    #expect(try await Protfs.runProgram("/usr/bin/setfattr", ["-n", "user.mine", "-v", "keep", outside]).status == 0)
    let linked = d.path("Secret/linked.txt")  // a complete directory: the link inherits complete
    #expect(link(outside, linked) == 0)
    let attributes = { () async -> String in
      (try? await Protfs.runProgram("/usr/bin/getfattr", ["-d", "-m", "-", outside]).stdout) ?? "unreadable"
    }
    let before = await attributes()
    let lock = try await d.protfs(["lock", "--grace", "0"])
    #expect(lock.status == 0, "\(lock)")
    #expect(lock.stderr.contains("Warning: '\(linked)' has more than one link"), "\(lock)")
    #expect(d.t.mode(outside) == 0o644 && Self.owner(outside) == "1234:1234")
    #expect(await attributes() == before && TestDevice.rawAttribute(outside, AttributeName.savedMode) == nil)
    #expect(d.t.mode(d.path("Secret/inside.txt")) == 0)  // the rest of the directory is locked

    let status = try await d.protfs(["status"])
    #expect(status.stdout.contains("Hard-linked files:         1") && status.stdout.contains("  \(linked)\n"))
    #expect(!status.stdout.contains("\(linked):"), "not an inconsistency as well: \(status)")
    let json = try await d.protfs(["status", "--json"])
    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    #expect(object?["hardLinked"] as? [String] == [linked] && object?["hardLinkedCount"] as? Int == 1)

    #expect(try await d.protfs(["unlock"]).status == 0)
    let relative = "Documents/Secret/linked.txt"
    let text = try await d.protfs(["audit"])
    #expect(text.stdout.contains("PFS011  \(relative): The file has 2 links"), "\(text)")
    let audit = try await d.protfs(["audit", "--format", "json"])
    let findings = (try JSONSerialization.jsonObject(with: Data(audit.stdout.utf8)) as? [String: Any])?["findings"]
    let hardLinked = (findings as? [[String: Any]] ?? []).filter { $0["ruleId"] as? String == "PFS011" }
    #expect(hardLinked.count == 1 && (hardLinked.first?["path"] as? String)?.hasSuffix(relative) == true)
    let sarif = try await d.protfs(["audit", "--format", "sarif"])
    #expect(sarif.stdout.contains(#""ruleId": "PFS011""#), "\(sarif)")
    #expect(sarif.stdout.contains("hard-linked-file") && sarif.stdout.contains("linked.txt"))
    let junit = try await d.protfs(["audit", "--format", "junit"])
    #expect(junit.stdout.contains("PFS011") && junit.stdout.contains("linked.txt"), "\(junit)")
    let after = await attributes()
    #expect(d.t.mode(outside) == 0o644 && Self.owner(outside) == "1234:1234" && after == before)
  }
}
