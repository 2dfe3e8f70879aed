import Foundation
import ProtFS
import ProtFSLock
import ProtFSTestSupport
import Testing

/// A device with one file per class in `Documents/`, a complete directory with a file, and a
/// few unusual modes, built for running the `protfs` binary against it.
struct LockDevice {
  let t: TestDevice
  var root: String { t.root }
  var documents: String { t.containerPath(LockDevice.bundle, "Documents") }
  static let bundle = "com.example.app"
  /// File name, class, mode.
  static let files: [(String, ProtectionClass, UInt32)] = [
    ("complete.txt", .complete, 0o644),
    ("unless-open.txt", .completeUnlessOpen, 0o644),
    ("until-first-auth.txt", .completeUntilFirstUserAuthentication, 0o644),
    ("when-inactive.txt", .completeWhenUserInactive, 0o644),
    ("none.txt", .none, 0o644),
    ("private.txt", .complete, 0o600),
    ("script.sh", .complete, 0o4755),
    ("readonly.txt", .completeUnlessOpen, 0o444),
  ]

  init() throws {
    t = try TestDevice(containers: [LockDevice.bundle])
    chmod(t.directory, 0o755)  // other users (setpriv --reuid) must reach the device
    let device = t.device
    for (name, cls, mode) in Self.files {
      try t.writeFile(documents + "/" + name, "contents of \(name)\n", mode: Int(mode))
      try device.setClass(cls, of: try device.resolve(documents + "/" + name))
    }
    try FileManager.default.createDirectory(atPath: documents + "/Secret", withIntermediateDirectories: false)
    chmod(documents + "/Secret", 0o755)
    try t.writeFile(documents + "/Secret/inside.txt", "inside\n", mode: 0o644)
    try device.setClass(.complete, of: try device.resolve(documents + "/Secret"), recursive: true)
    symlink("/etc/hostname", documents + "/link-out")
    // The app user's items (as `protfs init` makes them): a lock hands them to root and back.
    let app = documents + "/App"
    try FileManager.default.createDirectory(atPath: app, withIntermediateDirectories: false)
    chmod(app, 0o750)
    try t.writeFile(app + "/mine.txt", "mine\n", mode: 0o640)
    try t.writeFile(app + "/tool", "tool\n", mode: 0o6750)
    try device.setClass(.complete, of: try device.resolve(app), recursive: true)
    for path in [app + "/mine.txt", app + "/tool", app] { Foundation.chown(path, Self.appUser, Self.appUser) }
    chmod(app + "/tool", 0o6750)  // chown cleared the set-id bits
  }

  /// The unprivileged app user programs run as (iOS's `mobile`).
  static let appUser: UInt32 = 501

  /// Every item's mode, owner, class and saved mode (without its MAC, which differs per device),
  /// by path relative to the root.
  func snapshot() -> [String: String] {
    var result: [String: String] = [:]
    let base = root + "/Containers"
    for relative in (FileManager.default.subpaths(atPath: base) ?? []) {
      let path = base + "/" + relative
      let mode = t.mode(path)
      var s = stat()
      lstat(path, &s)
      let cls = TestDevice.rawAttribute(path, AttributeName.protectionClass) ?? "-"
      let saved =
        TestDevice.rawAttribute(path, AttributeName.savedMode)?.split(separator: " ").prefix(3)
        .joined(separator: " ") ?? "-"
      result[relative] = "\(String(mode, radix: 8)) \(s.st_uid):\(s.st_gid) \(cls) \(saved)"
    }
    return result
  }

  @discardableResult
  func protfs(_ arguments: [String], environment: [String: String] = [:]) async throws -> RunResult {
    try await Protfs.run(["--device", root] + arguments, environment: environment)
  }

  func path(_ name: String) -> String { documents + "/" + name }
}

let asNobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

@Suite(.serialized) struct LockEndToEndTests {
  @Test func programsUnderExecMeetTheLock() async throws {
    let d = try LockDevice()
    let original = d.snapshot()
    func readable(_ name: String) async throws -> Bool {
      try await d.protfs(["exec", "--", "cat", d.path(name)]).status == 0
    }
    #expect(try await d.protfs(["unlock"]).status == 0)
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(try await !readable("complete.txt"))
    #expect(try await !readable("unless-open.txt"))
    #expect(try await !readable("Secret/inside.txt"))
    #expect(try await readable("until-first-auth.txt"))
    #expect(try await readable("none.txt"))
    #expect(try await readable("when-inactive.txt"))
    // Creating in a complete directory fails; in an unless-open one it works.
    let create = ["sh", "-c", "echo x > '\(d.path("Secret/new.txt"))'"]
    #expect(try await d.protfs(["exec", "--"] + create).status != 0)
    let unlock = try await d.protfs(["unlock"])
    #expect(unlock.status == 0, "\(unlock)")
    #expect(d.snapshot() == original)
    #expect(try await readable("complete.txt"))
    #expect(try await d.protfs(["reboot"]).status == 0)
    #expect(try await !readable("complete.txt"))
    #expect(try await !readable("unless-open.txt"))
    #expect(try await !readable("until-first-auth.txt"))
    #expect(try await !readable("when-inactive.txt"))
    #expect(try await readable("none.txt"))
    #expect(try await d.protfs(["unlock"]).status == 0)
    #expect(d.snapshot() == original)
  }

  @Test func rootOutsideExecIsNotBound() async throws {
    let d = try LockDevice()
    try await d.protfs(["lock", "--grace", "0"])
    #expect(FileManager.default.contents(atPath: d.path("complete.txt")) != nil)  // CAP_DAC_OVERRIDE
    #expect(try await d.protfs(["exec", "--", "cat", d.path("complete.txt")]).status == 1)
  }

  @Test(arguments: [
    ["lock", "--grace", "0"], ["lock", "--grace", "0", "--inactive"], ["reboot"], ["unlock"], ["passcode", "remove"],
  ])
  func crashAtEveryStepIsFinishedByTheNextCommand(operation: [String]) async throws {
    var crashes = 0
    for step in 1...200 {
      let d = try LockDevice()
      let original = d.snapshot()
      // Reference: the same operation on an identical device, uninterrupted.
      let reference = try LockDevice()
      if operation == ["unlock"] {
        try await d.protfs(["lock", "--grace", "0", "--inactive"])
        try await reference.protfs(["lock", "--grace", "0", "--inactive"])
      }
      try await reference.protfs(operation)
      let expected = reference.snapshot()
      let crashed = try await d.protfs(operation, environment: ["PROTFS_CRASH_AFTER": String(step)])
      if crashed.status == 0 {
        #expect(d.snapshot() == expected)
        break
      }
      crashes += 1
      #expect(crashed.status == 137, "step \(step): \(crashed)")
      // Any command finishes it; `status` is the least intrusive. After the last step (the
      // journal's removal) there is nothing left to finish.
      let interrupted = FileManager.default.fileExists(atPath: d.root + "/.protfs/transition.json")
      let next = try await d.protfs(["status", "--json"])
      #expect(next.status == 0, "\(next)")
      #expect(next.stderr.contains("finished an interrupted") == interrupted, "step \(step): \(next)")
      #expect(d.snapshot() == expected, "step \(step)")
      #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/transition.json"))
      #expect(try await d.protfs(["unlock"]).status == 0)
      #expect(d.snapshot() == original, "step \(step)")
    }
    #expect(crashes >= 3)
  }

  @Test func concurrentTransitionsAreSerialized() async throws {
    let d = try LockDevice()
    let original = d.snapshot()
    let operations: [[String]] = [
      ["lock", "--grace", "0"], ["unlock"], ["reboot"], ["lock", "--grace", "0", "--inactive"], ["unlock"],
      ["lock", "--grace", "0"], ["reboot"], ["unlock"],
    ]
    let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
      for operation in operations {
        group.addTask { try await d.protfs(operation).status }
      }
      return try await group.reduce(into: [Int32]()) { $0.append($1) }
    }
    #expect(statuses.allSatisfy { $0 == 0 })
    let status = try await d.protfs(["status", "--json"])
    #expect(status.stdout.contains(#""inconsistencyCount" : 0"#), "\(status)")
    #expect(try await d.protfs(["unlock"]).status == 0)
    #expect(d.snapshot() == original)
  }

  /// A lock and an unlock run together: each walks the device holding its items open for a
  /// moment, which is no file still open to warn of (issue 64).
  @Test func concurrentLockAndUnlockDoNotWarnOfEachOther() async throws {
    let d = try LockDevice()
    for index in 0..<400 {
      let path = d.path("many-\(index).txt")
      try d.t.writeFile(path, "\(index)\n", mode: 0o644)
      try d.t.device.setClass(.complete, of: try d.t.device.resolve(path))
    }
    for round in 0..<6 {
      let results = try await withThrowingTaskGroup(of: RunResult.self) { group in
        group.addTask { try await d.protfs(["lock", "--grace", "0"]) }
        group.addTask { try await d.protfs(["unlock"]) }
        group.addTask { try await d.protfs(["lock", "--grace", "0"]) }
        return try await group.reduce(into: [RunResult]()) { $0.append($1) }
      }
      for result in results {
        #expect(result.status == 0, "round \(round): \(result)")
        #expect(!result.stderr.contains("still open in process"), "round \(round): \(result)")
      }
      #expect(try await d.protfs(["unlock"]).status == 0)
    }
  }

  @Test func scheduleChangesTheStateWhileTheProgramRuns() async throws {
    let d = try LockDevice()
    let script = """
      f='\(d.path("complete.txt"))'
      end=$(( $(date +%s) + 20 ))
      while cat "$f" >/dev/null 2>&1; do [ "$(date +%s)" -lt "$end" ] || exit 3; done
      echo locked-seen
      until cat "$f" >/dev/null 2>&1; do [ "$(date +%s)" -lt "$end" ] || exit 4; done
      echo unlocked-seen
      exit 5
      """
    let result = try await d.protfs(["exec", "--schedule", "lock@200ms,unlock@3s", "--", "sh", "-c", script])
    #expect(result.status == 5, "\(result)")
    #expect(result.stdout == "locked-seen\nunlocked-seen\n")
    #expect(try await d.protfs(["status", "--json"]).stdout.contains(#""state" : "unlocked""#))
  }

  @Test func exitStatusIsTheProgramsAndBadInputIsRefused() async throws {
    let d = try LockDevice()
    #expect(try await d.protfs(["exec", "--", "sh", "-c", "exit 7"]).status == 7)
    #expect(try await d.protfs(["exec", "--", "sh", "-c", "kill -TERM $$"]).status == 128 + 15)
    #expect(try await d.protfs(["exec", "--", "/nonexistent/program"]).status == 127)
    let bad = try await d.protfs(["exec", "--schedule", "lock@soon", "--", "true"])
    #expect(bad.status == 64 && bad.stderr.contains("'soon' is not a time"))
    let before = d.snapshot()
    let never = try TestDevice(initialize: false)
    let uninitialised = try await Protfs.run(["--device", never.root, "lock", "--grace", "0"])
    #expect(uninitialised.status == 1 && uninitialised.stderr.contains("has not been initialised"))
    #expect(d.snapshot() == before)
  }

  @Test func statusJSONAndText() async throws {
    let d = try LockDevice()
    try await d.protfs(["lock", "--grace", "0"])
    let json = try await d.protfs(["status", "--json"])
    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    #expect(object?["state"] as? String == "locked")
    #expect(object?["protectedDataAvailable"] as? Bool == false)
    #expect(object?["dataProtection"] as? Bool == true)
    #expect((object?["classes"] as? [[String: Any]])?.count == 5)
    let text = try await d.protfs(["status"])
    #expect(text.stdout.contains("State:                     locked since"))
    #expect(text.stdout.contains("Inconsistencies:           none"))
  }

  /// The text's Passcode line and the JSON's passcode key agree: not set on a new device, set
  /// after `passcode set`, and off (data protection too) after `passcode remove`.
  @Test func statusTextAndJSONAgreeOnThePasscode() async throws {
    let d = try LockDevice()
    let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]
    func both() async throws -> (text: String, passcode: Bool?, dataProtection: Bool?) {
      let text = try await d.protfs(["status"]).stdout
      let json = try await d.protfs(["status", "--json"]).stdout
      let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
      return (text, object?["passcode"] as? Bool, object?["dataProtection"] as? Bool)
    }
    let new = try await both()
    #expect(new.text.contains("Passcode:                  not set") && new.passcode == false)
    #expect(new.dataProtection == true)
    try await d.protfs(["passcode", "set", "--passcode", "1234"], environment: cheap)
    let set = try await both()
    #expect(set.text.contains("Passcode:                  set") && set.passcode == true && set.dataProtection == true)
    try await d.protfs(["passcode", "remove", "--current", "1234"], environment: cheap)
    let removed = try await both()
    #expect(removed.text.contains("Passcode:                  off") && removed.passcode == false)
    #expect(removed.dataProtection == false)
  }

  @Test func aLockKeepsClassAForItsGraceAsIOSDoesAndAKilledWaiterIsMadeUpFor() async throws {
    let d = try LockDevice()
    let complete = d.path("complete.txt")
    // The default grace is iOS's 10 s: locked at once, class B closed, class A still readable.
    let lock = try await d.protfs(["lock"])
    #expect(lock.status == 0 && lock.stderr.contains("stays readable for 10 s"), "\(lock)")
    #expect(d.t.mode(complete) == 0o644 && d.t.mode(d.path("unless-open.txt")) == 0)
    let status = try await d.protfs(["status"])
    #expect(status.stdout.contains("State:                     locked since"), "\(status)")
    #expect(status.stdout.contains("Class A keys held until:"), "\(status)")
    // `lock --grace 0` during the grace withdraws the keys now.
    #expect(try await d.protfs(["lock", "--grace", "0"]).status == 0)
    #expect(d.t.mode(complete) == 0)
    #expect(try await d.protfs(["unlock"]).status == 0)

    // The process a lock leaves ends a short grace by itself (3 s: the checks before its end
    // must fit in it on a loaded machine).
    #expect(try await d.protfs(["lock", "--grace", "3"]).status == 0)
    #expect(d.t.mode(complete) == 0o644)
    let withdrawn = await offPool { () -> Bool in
      let deadline = Date() + 20
      while Date() < deadline {
        if d.t.mode(complete) == 0 { return true }
        usleep(20_000)
      }
      return false
    }
    #expect(withdrawn)
    #expect(try await d.protfs(["unlock"]).status == 0)

    // Killed, it is made up for by the next command run as root once the grace is over.
    #expect(try await d.protfs(["lock", "--grace", "3"]).status == 0)
    let waiters = Self.processes(containing: ["--device", d.root, "__end-grace"])
    #expect(!waiters.isEmpty)
    for pid in waiters { kill(pid, SIGKILL) }
    let until = try #require(try LockController(device: d.t.device).record().classKeysUntil)
    let wait = until.timeIntervalSinceNow
    // The grace is the thing waited for here: time itself, for which there is no other signal.
    if wait > 0 { try await Task.sleep(for: .milliseconds(Int(wait * 1000) + 100)) }
    #expect(d.t.mode(complete) == 0o644)
    #expect(try await d.protfs(["status"]).status == 0)
    #expect(d.t.mode(complete) == 0)
  }

  /// The pids of the processes whose command line holds `words` in a row.
  static func processes(containing words: [String]) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap { entry -> pid_t? in
      guard let pid = pid_t(entry), let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else {
        return nil
      }
      let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
      let found = arguments.indices.contains { start in
        start + words.count <= arguments.count && Array(arguments[start..<start + words.count]) == words
      }
      return found ? pid : nil
    }
  }

  @Test func lockWarnsAboutCompleteFilesStillOpen() async throws {
    let d = try LockDevice()
    let fd = open(d.path("complete.txt"), O_RDONLY)
    defer { close(fd) }
    let result = try await d.protfs(["lock", "--grace", "0"])
    #expect(result.status == 0)
    #expect(result.stderr.contains("'\(d.path("complete.txt"))' is still open in process \(getpid())"), "\(result)")
    #expect(!result.stderr.contains("none.txt"))
  }

  @Test func passcodeSetUnlockAndBackoff() async throws {
    let d = try LockDevice()
    let cheap = ["PROTFS_PBKDF2_ITERATIONS": "1000"]
    #expect(try await d.protfs(["passcode", "set", "--passcode", "1234"], environment: cheap).status == 0)
    try await d.protfs(["lock", "--grace", "0"])
    let missing = try await d.protfs(["unlock"])
    #expect(missing.status == 1 && missing.stderr.contains("has a passcode, and none was given"))
    for _ in 1...5 { #expect(try await d.protfs(["unlock", "--passcode", "9999"]).status == 1) }
    let refused = try await d.protfs(["unlock"], environment: ["PROTFS_PASSCODE": "1234"])
    #expect(refused.status == 1 && refused.stderr.contains("refuses passcodes"), "\(refused)")
  }

  @Test func passcodeFromEnvironmentAndRemoval() async throws {
    let d = try LockDevice()
    let env = ["PROTFS_PBKDF2_ITERATIONS": "1000", "PROTFS_PASSCODE": "abcd"]
    #expect(try await d.protfs(["passcode", "set"], environment: env).status == 0)
    try await d.protfs(["lock", "--grace", "0"])
    #expect(try await d.protfs(["unlock"], environment: env).status == 0)
    #expect(try await d.protfs(["passcode", "remove", "--current", "abcd"], environment: env).status == 0)
    let original = d.snapshot()
    try await d.protfs(["reboot"])
    #expect(d.snapshot() == original)  // no passcode: nothing is stripped
    #expect(try await d.protfs(["exec", "--", "cat", d.path("complete.txt")]).status == 0)
  }

  @Test func watchPrintsOneLinePerEventUntilInterrupted() async throws {
    let d = try LockDevice()
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: Protfs.binary)
    process.arguments = ["--device", d.root, "watch"]
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.start()
    let output = out.fileHandleForReading.fileDescriptor
    let errors = err.fileHandleForReading.fileDescriptor
    // Ready once it says so on stderr.
    #expect(await offPool { Self.line(from: errors) }.contains("Watching"))
    try await d.protfs(["lock", "--grace", "0"])
    let locked = await offPool { Self.line(from: output) }
    try await d.protfs(["unlock"])
    let unlocked = await offPool { Self.line(from: output) }
    process.interrupt()
    await offPool { process.waitUntilExit() }
    #expect(process.terminationStatus == 0)
    #expect(locked.contains(#""event":"protectedDataWillBecomeUnavailable""#) && locked.contains(#""state":"locked""#))
    #expect(unlocked.contains(#""event":"protectedDataDidBecomeAvailable""#) && unlocked.contains(#""time":"#))
  }

  /// The next line read from `fd` a byte at a time (so nothing after it is taken), without its
  /// newline; what there was at the end of the stream.
  private static func line(from fd: Int32) -> String {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while read(fd, &byte, 1) == 1, byte != 0x0A { bytes.append(byte) }
    return String(decoding: bytes, as: UTF8.self)
  }
}

/// protfs itself run by an unprivileged owner of the device, and the faults only such a user meets.
@Suite(.serialized) struct LockUnprivilegedTests {
  /// A device owned by uid 65534 (nobody).
  static func nobodyDevice() async throws -> LockDevice {
    let d = try LockDevice()
    let chown = try await Protfs.runProgram("/bin/chown", ["-R", "65534:65534", d.root])
    #expect(chown.status == 0)
    return d
  }

  static func protfsAsNobody(_ d: LockDevice, _ arguments: [String]) async throws -> RunResult {
    try await Protfs.runProgram(
      "/usr/bin/setpriv", Array(asNobody.dropFirst()) + [Protfs.binary, "--device", d.root] + arguments)
  }

  @Test func ownerLocksAndUnlocksExactly() async throws {
    let d = try await Self.nobodyDevice()
    let original = d.snapshot()
    let lock = try await Self.protfsAsNobody(d, ["lock", "--grace", "0"])
    #expect(lock.status == 0, "\(lock)")
    #expect(d.t.mode(d.path("readonly.txt")) == 0 && d.t.mode(d.path("complete.txt")) == 0)
    let status = try await Self.protfsAsNobody(d, ["status"])
    #expect(status.status == 0 && status.stdout.contains("Not inspected:"), "\(status)")
    #expect(status.stdout.contains("Inconsistencies:           none"), "\(status)")
    let reboot = try await Self.protfsAsNobody(d, ["reboot"])
    #expect(reboot.status == 0, "\(reboot)")
    let unlock = try await Self.protfsAsNobody(d, ["unlock"])
    #expect(unlock.status == 0, "\(unlock)")
    #expect(d.snapshot() == original)
  }

  @Test(arguments: [["lock", "--grace", "0"], ["lock", "--grace", "0", "--inactive"], ["reboot"], ["unlock"]])
  func ownerCrashAtEveryStepLosesNoMode(operation: [String]) async throws {
    var crashes = 0
    for step in 1...300 {
      let d = try await Self.nobodyDevice()
      let original = d.snapshot()
      let reference = try await Self.nobodyDevice()
      if operation == ["unlock"] {
        #expect(try await Self.protfsAsNobody(d, ["lock", "--grace", "0", "--inactive"]).status == 0)
        #expect(try await Self.protfsAsNobody(reference, ["lock", "--grace", "0", "--inactive"]).status == 0)
      }
      #expect(try await Self.protfsAsNobody(reference, operation).status == 0)
      let expected = reference.snapshot()
      let crashed = try await Protfs.runProgram(
        "/usr/bin/setpriv",
        Array(asNobody.dropFirst()) + [Protfs.binary, "--device", d.root] + operation,
        environment: ["PROTFS_CRASH_AFTER": String(step)])
      if crashed.status == 0 {
        #expect(d.snapshot() == expected)
        break
      }
      crashes += 1
      #expect(crashed.status == 137, "step \(step): \(crashed)")
      let next = try await Self.protfsAsNobody(d, ["get-class", d.path("none.txt")])
      #expect(next.status == 0, "step \(step): \(next)")
      #expect(d.snapshot() == expected, "step \(step)")
      #expect(!FileManager.default.fileExists(atPath: d.root + "/.protfs/owner-access.log"))
      #expect(try await Self.protfsAsNobody(d, ["unlock"]).status == 0)
      #expect(d.snapshot() == original, "step \(step)")
    }
    #expect(crashes >= 5)
  }

  @Test func execRunByAnUnprivilegedUserWorks() async throws {
    let d = try await Self.nobodyDevice()
    #expect(try await Self.protfsAsNobody(d, ["lock", "--grace", "0"]).status == 0)
    let none = try await Self.protfsAsNobody(d, ["exec", "--", "cat", d.path("none.txt")])
    #expect(none.status == 0, "\(none)")
    #expect(none.stderr.contains("confines a program fully only when run as root"), "\(none)")
    #expect(try await Self.protfsAsNobody(d, ["exec", "--", "cat", d.path("complete.txt")]).status == 1)
    #expect(try await Self.protfsAsNobody(d, ["unlock"]).status == 0)
  }

  /// Run by the same user, the program could read protfs's /proc/PID/environ and cmdline: protfs
  /// blanks the passcodes in both.
  @Test func execRunByAnUnprivilegedUserHidesThePasscodeFromTheProgram() async throws {
    let d = try await Self.nobodyDevice()
    let script = "tr '\\0' ' ' </proc/$PPID/environ && tr '\\0' ' ' </proc/$PPID/cmdline && env"
    let result = try await Protfs.runProgram(
      "/usr/bin/env",
      ["PROTFS_PASSCODE=secret-in-env"] + Array(asNobody) + [
        Protfs.binary, "--device", d.root, "exec", "--schedule", "unlock@60s", "--passcode", "secret-on-argv", "--",
        "sh", "-c", script,
      ])
    #expect(result.status == 0, "\(result)")
    #expect(result.stdout.contains("PROTFS_PASSCODE= "), "\(result)")  // the blanked value in the parent's environ
    #expect(!result.stdout.contains("secret-in-env") && !result.stdout.contains("secret-on-argv"), "\(result)")
  }

  @Test func aFileOfAnotherUserStopsTheLockAndChangesNothing() async throws {
    let d = try await Self.nobodyDevice()
    chown(d.path("complete.txt"), 0, 0)
    let original = d.snapshot()
    let lock = try await Self.protfsAsNobody(d, ["lock", "--grace", "0"])
    #expect(lock.status == 1)
    #expect(lock.stderr.contains("belongs to uid 0") && lock.stderr.contains("Nothing was changed"), "\(lock)")
    #expect(d.snapshot() == original)
    #expect(try await d.protfs(["status", "--json"]).stdout.contains(#""state" : "unlocked""#))
  }

  @Test func anUnreadableDirectoryStopsTheLockAndChangesNothing() async throws {
    let d = try await Self.nobodyDevice()
    let hidden = d.path("Hidden")
    mkdir(hidden, 0o700)  // root's, unreadable for nobody
    let original = d.snapshot()
    let lock = try await Self.protfsAsNobody(d, ["lock", "--grace", "0"])
    #expect(lock.status == 1)
    #expect(lock.stderr.contains("'\(hidden)'") && lock.stderr.contains("Permission denied"), "\(lock)")
    #expect(d.snapshot() == original)
  }
}
