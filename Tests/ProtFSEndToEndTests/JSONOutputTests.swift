import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// What scripts read: every `--json` document and JSON line parses, has its documented keys, names
/// the same things alike, and writes every date one way (ISO 8601, UTC, milliseconds).
@Suite(.timeLimit(.minutes(3))) struct JSONOutputTests {
  static let app = "com.example.app"

  /// A device with the app's container.
  static func device() async throws -> TestDevice {
    let t = try TestDevice()
    let made = try await Protfs.run(["--device", t.root, "init", app])
    try #require(made.status == 0, "\(made)")
    return t
  }

  /// The one JSON document `result` printed.
  static func document(_ result: RunResult) throws -> Any {
    try JSONSerialization.jsonObject(with: result.stdoutBytes, options: [.fragmentsAllowed])
  }

  /// The one JSON object `result` printed.
  static func object(_ result: RunResult) throws -> [String: Any] {
    try #require(try document(result) as? [String: Any], "\(result)")
  }

  /// The JSON lines `result` printed, each an object.
  static func lines(_ result: RunResult) throws -> [[String: Any]] {
    try result.stdout.split(separator: "\n").map { line in
      try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
    }
  }

  // MARK: Dates

  /// Keys whose values are dates. `lastModified` is not one of them: it is the server's
  /// Last-Modified header, kept as sent for If-Range.
  static func isDateKey(_ key: String) -> Bool {
    guard key != "lastModified" else { return false }
    let known: Set<String> = ["since", "time", "oldest", "newest", "lastUsed", "retryAfter", "started"]
    return known.contains(key) || key.hasSuffix("At") || key.hasSuffix("Until") || key.hasSuffix("Since")
  }

  /// The date-like values of `value`, with their key paths: those under a date key, and any string
  /// that starts like a date.
  static func dates(in value: Any, at path: String = "", key: String = "") -> [(path: String, value: Any)] {
    switch value {
    case let object as [String: Any]:
      return object.sorted { $0.key < $1.key }.flatMap { dates(in: $0.value, at: path + "." + $0.key, key: $0.key) }
    case let array as [Any]:
      return array.enumerated().flatMap { dates(in: $0.element, at: path + "[\($0.offset)]", key: key) }
    case let text as String where text.wholeMatch(of: /\d{4}-\d{2}-\d{2}.*/) != nil:
      return [(path, text)]
    case is NSNull:
      return []
    default:
      return isDateKey(key) ? [(path, value)] : []
    }
  }

  /// Whether `value` is a date as protfs writes them: `2026-12-02T04:10:00.123Z`.
  static func isProtfsDate(_ value: Any) -> Bool {
    guard let text = value as? String,
      text.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil
    else { return false }
    return (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text)) != nil
  }

  /// Runs every command that prints JSON, on one device, and checks every date-like value in what
  /// they print: each is ISO 8601 with its zone, in the one format.
  @Test func everyDateInEveryJSONOutputIsISO8601WithItsZone() async throws {
    let t = try await Self.device()
    let root = t.root
    func run(_ arguments: [String], anyStatus: Bool = false) async throws -> RunResult {
      let result = try await Protfs.run(["--device", root] + arguments)
      #expect(anyStatus || result.status == 0, "\(arguments): \(result)")
      return result
    }
    try t.writeFile(t.containerPath(Self.app, "Documents/notes.txt"), "notes")
    let source = t.directory + "/report.txt"
    try "report".write(toFile: source, atomically: true, encoding: .utf8)
    let server = try UploadServer()
    defer { server.stop() }
    var outputs: [(String, Any)] = []
    func document(_ arguments: [String], anyStatus: Bool = false) async throws {
      let result = try await run(arguments, anyStatus: anyStatus)
      outputs.append((arguments.joined(separator: " "), try Self.document(result)))
    }
    let documents = t.containerPath(Self.app, "Documents")
    try await document(["set-class", "--json", "complete", documents + "/notes.txt"])
    try await document(["ls", "-R", "--json", t.containerPath(Self.app)])
    try await document(["get-class", "--json", documents + "/notes.txt"])
    try await document(["status", "--json"])
    // With the grace, lock and status name when class A's keys go.
    try await document(["lock", "--json"])
    try await document(["status", "--json"])
    try await document(["unlock", "--json"])
    try await document(["download", "--json", "--bundle", Self.app, URL(fileURLWithPath: source).absoluteString])
    try await document([
      "upload", "--json", "--bundle", Self.app, "--from", "Documents/notes.txt", server.url().absoluteString,
    ])
    try await document(["tasks", "--json"])
    try await document(["tasks", "prune", "--json"])
    try await document(["cache", "ls", "--json"])
    try await document(["cache", "du", "--json"])
    try await document(["sessions", "--json"])
    try await document(["app", "status", Self.app, "--json"])
    try await document(["audit", "--format", "json"], anyStatus: true)  // its status is the audit's
    let progress = try await run([
      "download", "--progress", "json", "--bundle", Self.app, "--to", "Library",
      URL(fileURLWithPath: source).absoluteString,
    ])
    outputs.append(("download --progress json", try Self.lines(progress)))
    outputs.append(("watch", try await Self.watchLine(root)))
    var keys = Set<String>()
    for (command, output) in outputs {
      for (path, value) in Self.dates(in: output) {
        #expect(
          Self.isProtfsDate(value),
          "\(command): \(path) is \(value), not an ISO 8601 date such as 2026-12-02T04:10:00.123Z")
        keys.insert(String(path.split(separator: ".").last ?? "").replacing(/\[\d+\]/, with: ""))
      }
    }
    // The dates were there to check: the task store's, the lock's and the events'.
    #expect(keys.isSuperset(of: ["createdAt", "updatedAt", "since", "classKeysUntil", "time"]), "\(keys)")
  }

  /// The first line `protfs watch` prints for a lock of the device at `root`, parsed.
  static func watchLine(_ root: String) async throws -> [String: Any] {
    let process = TestProcess()
    process.executableURL = URL(fileURLWithPath: Protfs.binary)
    process.arguments = ["--device", root, "watch"]
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.start()
    defer {
      process.interrupt()
      process.waitUntilExit()
    }
    let errors = err.fileHandleForReading.fileDescriptor
    let output = out.fileHandleForReading.fileDescriptor
    #expect(await offPool { Self.line(from: errors) }.contains("Watching"))
    try await Protfs.run(["--device", root, "lock", "--grace", "0"])
    let text = await offPool { Self.line(from: output) }
    try await Protfs.run(["--device", root, "unlock"])
    return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
  }

  /// The next line read from `fd` a byte at a time, without its newline.
  static func line(from fd: Int32) -> String {
    var bytes: [UInt8] = []
    var byte: UInt8 = 0
    while read(fd, &byte, 1) == 1, byte != 0x0A { bytes.append(byte) }
    return String(decoding: bytes, as: UTF8.self)
  }

  /// A device that never changed state has been unlocked since `init` made it, not since each
  /// `status` asked: the date is its marker's, and the same on every run.
  @Test func aNewDevicesStateIsDatedFromItsInitialisation() async throws {
    let t = try await Self.device()
    let made = Date(timeIntervalSince1970: 1_767_323_045)  // 2026-01-02T03:04:05Z
    try FileManager.default.setAttributes(
      [.modificationDate: made], ofItemAtPath: t.device.stateDirectory + "/" + Device.markerName)
    let first = try Self.object(try await Protfs.run(["--device", t.root, "status", "--json"]))
    let second = try Self.object(try await Protfs.run(["--device", t.root, "status", "--json"]))
    #expect(first["since"] as? String == "2026-01-02T03:04:05.000Z", "\(first)")
    #expect(second["since"] as? String == first["since"] as? String, "\(second)")
  }

  // MARK: Keys

  /// ls, get-class and status name a class, a path and a kind with the same keys.
  @Test func lsGetClassAndStatusNameAClassWithTheSameKeys() async throws {
    let t = try await Self.device()
    let documents = t.containerPath(Self.app, "Documents")
    try t.writeFile(documents + "/notes.txt", "notes")
    _ = try await Protfs.run(["--device", t.root, "set-class", "complete", documents + "/notes.txt"])
    let listed = try #require(
      try Self.document(try await Protfs.run(["--device", t.root, "ls", "--json", documents])) as? [[String: Any]])
    let got = try #require(
      try Self.document(try await Protfs.run(["--device", t.root, "get-class", "--json", documents + "/notes.txt"]))
        as? [[String: Any]])
    let status = try Self.object(try await Protfs.run(["--device", t.root, "status", "--json"]))
    let row = try #require(listed.first { $0["path"] as? String == "notes.txt" })
    let classes = try #require(status["classes"] as? [[String: Any]])
    let complete = try #require(classes.first { $0["className"] as? String == "complete" })
    for item in [row, got[0]] {
      #expect(item["className"] as? String == "complete", "\(item)")
      #expect(item["classRawValue"] as? String == "NSFileProtectionComplete", "\(item)")
      #expect(item["kind"] as? String == "file" && item["source"] as? String == "own", "\(item)")
      #expect(item["path"] is String)
    }
    #expect(complete["classRawValue"] as? String == "NSFileProtectionComplete" && complete["files"] as? Int == 1)
    // The old names are gone, not kept beside the new ones with another meaning.
    for item in [row, got[0], complete] {
      #expect(item["class"] == nil && item["name"] == nil && item["rawValue"] == nil, "\(item)")
    }
  }

  // MARK: The new --json

  @Test func initLockUnlockAndSetClassPrintOneDocumentWithTheirKeys() async throws {
    let t = try TestDevice()
    let made = try Self.object(try await Protfs.run(["--device", t.root, "init", Self.app, "--json"]))
    #expect(made["bundleID"] as? String == Self.app && made["created"] as? Bool == true)
    #expect(made["path"] as? String == t.containerPath(Self.app))
    #expect(made["className"] as? String == "complete-until-first-user-authentication")
    #expect(made["classRawValue"] as? String == "NSFileProtectionCompleteUntilFirstUserAuthentication")
    let again = try Self.object(
      try await Protfs.run(["--device", t.root, "init", Self.app, "--default-class", "none", "--json"]))
    #expect(again["created"] as? Bool == false && again["className"] as? String == "none")
    #expect(again["previousClassName"] as? String == "complete-until-first-user-authentication")

    let documents = t.containerPath(Self.app, "Documents")
    try t.writeFile(documents + "/a.txt")
    symlink("a.txt", documents + "/link")
    let set = try await Protfs.run(["--device", t.root, "set-class", "-r", "--json", "complete", documents])
    #expect(set.status == 0, "\(set)")
    let labelled = try Self.object(set)
    #expect(labelled["className"] as? String == "complete" && labelled["recursive"] as? Bool == true)
    #expect(labelled["classRawValue"] as? String == "NSFileProtectionComplete")
    let item = try #require((labelled["items"] as? [[String: Any]])?.first)
    #expect(item["path"] as? String == documents && item["changed"] as? Int == 2, "\(item)")
    #expect(item["skipped"] as? [String] == [documents + "/link"], "\(item)")

    let lock = try await Protfs.run(["--device", t.root, "lock", "--grace", "0", "--json"])
    #expect(lock.status == 0, "\(lock)")
    let locked = try Self.object(lock)
    #expect(locked["operation"] as? String == "lock" && locked["state"] as? String == "locked", "\(locked)")
    #expect(locked["device"] as? String == t.root && locked["protectedDataAvailable"] as? Bool == false)
    #expect((locked["restricted"] as? Int ?? 0) >= 1 && (locked["visited"] as? Int ?? 0) > 1, "\(locked)")
    for key in ["restored", "hardLinked", "unauthenticated", "notUTF8", "garbageClass", "openFiles"] {
      #expect(locked[key] != nil, "lock --json has no \(key): \(locked)")
    }
    #expect(locked["classKeysUntil"] == nil)  // --grace 0: no grace

    let unlock = try await Protfs.run(["--device", t.root, "unlock", "--json"])
    #expect(unlock.status == 0, "\(unlock)")
    let unlocked = try Self.object(unlock)
    #expect(unlocked["operation"] as? String == "unlock" && unlocked["state"] as? String == "unlocked")
    #expect(unlocked["restored"] as? Int == locked["restricted"] as? Int, "\(unlocked)")
    #expect(unlocked["downloads"] as? [Any] != nil, "\(unlocked)")
    // Errors stay on stderr with their status.
    let missing = try await Protfs.run(["--device", t.root, "set-class", "--json", "none", documents + "/nope"])
    #expect(missing.status == 1 && missing.stdout.isEmpty && missing.stderr.hasPrefix("Error: "), "\(missing)")
  }

  @Test func aGraceIsNamedInLockJSON() async throws {
    let t = try await Self.device()
    let locked = try Self.object(try await Protfs.run(["--device", t.root, "lock", "--grace", "60", "--json"]))
    let until = try #require(locked["classKeysUntil"] as? String, "\(locked)")
    let date = try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(until)
    #expect(abs(date.timeIntervalSinceNow - 60) < 30, "\(until)")
    _ = try await Protfs.run(["--device", t.root, "unlock"])
  }

  @Test func aDownloadAndAnUploadPrintTheirOutcomeAsOneDocument() async throws {
    let t = try await Self.device()
    let source = t.directory + "/report.txt"
    try "report".write(toFile: source, atomically: true, encoding: .utf8)
    let url = URL(fileURLWithPath: source).absoluteString
    let downloaded = try await Protfs.run([
      "--device", t.root, "download", "--json", "--bundle", Self.app, url, "nope:x",
    ])
    #expect(downloaded.status == 1, "\(downloaded)")  // the bad URL fails the command, as without --json
    #expect(downloaded.stderr.contains("Error: The URL 'nope:x'"), "\(downloaded)")
    let outcome = try Self.object(downloaded)
    let task = try #require((outcome["tasks"] as? [[String: Any]])?.first, "\(outcome)")
    #expect(task["id"] as? Int == 1 && task["kind"] as? String == "download" && task["url"] as? String == url)
    #expect(task["state"] as? String == "completed", "\(task)")
    #expect(task["destinationPath"] as? String == t.containerPath(Self.app, "Documents/report.txt"))
    let rejected = try #require((outcome["rejected"] as? [[String: Any]])?.first, "\(outcome)")
    #expect(rejected["url"] as? String == "nope:x" && (rejected["error"] as? String)?.contains("scheme") == true)

    let server = try UploadServer()
    defer { server.stop() }
    let uploaded = try await Protfs.run([
      "--device", t.root, "upload", "--json", "--bundle", Self.app, "--from", "Documents/report.txt",
      server.url().absoluteString,
    ])
    #expect(uploaded.status == 0, "\(uploaded)")
    let sent = try Self.object(uploaded)
    #expect(sent["kind"] as? String == "upload" && sent["state"] as? String == "completed", "\(sent)")
    #expect(sent["responseStatus"] as? Int == 201 && sent["id"] as? Int == 2, "\(sent)")
    // The status line goes to stderr: stdout is the document alone.
    #expect(uploaded.stderr.contains("201 "), "\(uploaded)")
    // --json and --progress json would both write on stdout.
    let both = try await Protfs.run([
      "--device", t.root, "download", "--json", "--progress", "json", "--bundle", Self.app, url,
    ])
    #expect(both.status == 64 && both.stderr.contains("not both"), "\(both)")
  }

  @Test func detachedTransfersPrintAJSONLinePerTaskHandedOver() async throws {
    let f = try await SessionServiceFixture()
    defer { f.stop() }
    let t = f.t
    var urls: [String] = []
    for name in ["a.txt", "b.txt"] {
      try name.write(toFile: t.directory + "/" + name, atomically: true, encoding: .utf8)
      urls.append(URL(fileURLWithPath: t.directory + "/" + name).absoluteString)
    }
    try t.writeFile(t.containerPath(Self.app, "Documents/up.txt"), "up")
    let detached = try await Protfs.run(
      ["--device", t.root, "download", "--detach", "--json", "--bundle", Self.app] + urls)
    #expect(detached.status == 0, "\(detached)")
    let handed = try Self.lines(detached)
    #expect(handed.map { $0["id"] as? Int } == [1, 2], "\(detached)")
    #expect(handed.allSatisfy { $0["kind"] as? String == "download" }, "\(handed)")
    #expect(handed.allSatisfy { $0["sessionIdentifier"] as? String == "\(Self.app).background" }, "\(handed)")
    let server = try UploadServer()
    defer { server.stop() }
    let upload = try await Protfs.run([
      "--device", t.root, "upload", "--detach", "--json", "--bundle", Self.app, "--from", "Documents/up.txt",
      server.url().absoluteString,
    ])
    #expect(upload.status == 0, "\(upload)")
    let sent = try Self.lines(upload)
    #expect(sent.count == 1 && sent[0]["id"] as? Int == 3 && sent[0]["kind"] as? String == "upload", "\(upload)")
    let waited = try await Protfs.run(["--device", t.root, "tasks", "wait", "1", "2", "3"])
    #expect(waited.status == 0, "\(waited)")
  }

  // MARK: The passcode line

  @Test func statusSaysANewDevicesPasscodeIsNotSet() async throws {
    let t = try await Self.device()
    func line() async throws -> String {
      let status = try await Protfs.run(["--device", t.root, "status"])
      return try #require(status.stdout.split(separator: "\n").first { $0.hasPrefix("Passcode:") }.map(String.init))
    }
    let fresh = try await line()
    #expect(fresh.contains("not set (data protection on; unlock asks for none until"), "\(fresh)")
    #expect(!fresh.contains("on (unlock does not ask for it)"), "\(fresh)")
    let environment = ["PROTFS_PBKDF2_ITERATIONS": "1"]
    let set = try await Protfs.run(
      ["--device", t.root, "passcode", "set", "--passcode", "1234"], environment: environment)
    #expect(set.status == 0, "\(set)")
    #expect(try await line().contains("set (unlock asks for it)"))
    let removed = try await Protfs.run(
      ["--device", t.root, "passcode", "remove", "--current", "1234"], environment: environment)
    #expect(removed.status == 0, "\(removed)")
    #expect(try await line().contains("off (data protection inactive"))
  }

  // MARK: Names that are not UTF-8

  /// set-class labels the item whose name has the bytes given, not the item a lossy decoding of
  /// them names; get-class reads it back, ls and set-class --json show it escaped.
  @Test func setClassOnANameThatIsNotUTF8LabelsThatItem() async throws {
    let t = try await Self.device()
    let documents = t.containerPath(Self.app, "Documents")
    // bad\xFFA, and its look-alike once decoded: bad<U+FFFD>A.
    let raw = Array("bad".utf8) + [0xFF] + Array("A".utf8)
    let lookAlike = documents + "/bad\u{FFFD}A"
    try t.writeFile(lookAlike, "decoy")
    let rawPath = Array((documents + "/").utf8) + raw
    let fd = open(rawPath.map { CChar(bitPattern: $0) } + [0], O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
    #expect(fd >= 0)
    close(fd)
    let protfs = Protfs.binary
    let script = #"""
      cd "$2" || exit 1
      "$1" --device "$3" set-class --json complete "$(printf 'bad\377A')" || exit 1
      echo "--- get"
      "$1" --device "$3" get-class "$(printf 'bad\377A')" || exit 1
      echo "--- bundle"
      "$1" --device "$3" set-class --bundle com.example.app none "Documents/$(printf 'bad\377A')" || exit 1
      "$1" --device "$3" get-class --json --bundle com.example.app "Documents/$(printf 'bad\377A')"
      """#
    let result = try await Protfs.runProgram("/bin/sh", ["-c", script, "sh", protfs, documents, t.root])
    #expect(result.status == 0, "\(result)")
    let parts = result.stdout.components(separatedBy: "--- get\n")
    let set = try #require(try JSONSerialization.jsonObject(with: Data(parts[0].utf8)) as? [String: Any], "\(result)")
    #expect((set["items"] as? [[String: Any]])?.first?["path"] as? String == #"bad\xFFA"#, "\(set)")
    #expect(parts[1].hasPrefix("NSFileProtectionComplete  own        bad\\xFFA\n"), "\(result)")
    #expect(result.stdout.contains(#""classRawValue" : "NSFileProtectionNone""#), "\(result)")
    // The item of those bytes got the class; the look-alike did not.
    #expect(try await Self.rawClass(in: documents) == "NSFileProtectionNone")
    #expect(t.rawClass(lookAlike) == nil)
    let listed = try await Protfs.run(["--device", t.root, "ls", documents])
    #expect(listed.stdout.contains(" bad\\xFFA\n") && listed.stdout.contains(" bad\u{FFFD}A\n"), "\(listed)")
  }

  /// The own class attribute of the item `bad\xFFA` in `directory`, read by getfattr, or nil.
  static func rawClass(in directory: String) async throws -> String? {
    let read = try await Protfs.runProgram(
      "/bin/sh", ["-c", #"getfattr --only-values -n user.protfs.class "$1/$(printf 'bad\377A')""#, "sh", directory])
    return read.status == 0 ? read.stdout : nil
  }
}
