import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs audit` as CI runs it: the built binary, its output and its exit status.
@Suite("protfs audit (end to end)")
struct AuditEndToEndTests {
  let app = "com.example.app"

  /// A scratch device with one container made by `protfs init`.
  func makeDevice() async throws -> (AuditScratch, Device) {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = Device(root: scratch.path + "/device")
    let result = try await Protfs.run(["--device", device.root, "init", app])
    #expect(result.status == 0, "\(result.stderr)")
    return (scratch, device)
  }

  func writePolicy(_ scratch: AuditScratch, _ name: String, _ text: String) throws -> String {
    let path = scratch.path + "/" + name
    try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    return path
  }

  @Test func aCleanDeviceExitsZero() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let result = try await Protfs.run(["audit"], environment: ["PROTFS_DEVICE": device.root])
    #expect(result.status == 0, "\(result.stderr)")
    #expect(result.stdout == "0 errors, 0 warnings, 0 notes in 1 container (6 items).\n")
    #expect(result.stderr.isEmpty)
  }

  @Test func anErrorFindingExitsOne() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let result = try await Protfs.run(["--device", device.root, "audit"])
    #expect(result.status == 1)
    #expect(result.stdout.contains("  error   DP004  Documents/open.txt: The class is none (own)"))
  }

  @Test func failOnDecidesWhichLevelsFail() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)  // a warning only
    #expect(try await Protfs.run(["--device", device.root, "audit"]).status == 0)
    #expect(try await Protfs.run(["--device", device.root, "audit", "--fail-on", "warning"]).status == 1)
    #expect(try await Protfs.run(["--device", device.root, "audit", "--fail-on=note"]).status == 1)
    let bad = try await Protfs.run(["--device", device.root, "audit", "--fail-on", "warn"])
    #expect(bad.status == 64)
    #expect(bad.stderr.contains("Did you mean 'warning'?"))
  }

  @Test func anUnknownFormatIsAUsageError() async throws {
    let result = try await Protfs.run(["audit", "--format", "sarf"])
    #expect(result.status == 64)
    #expect(result.stderr.hasPrefix("Error: 'sarf' is not a valid value for '--format'"))
    #expect(result.stderr.contains("Did you mean 'sarif'?"))
  }

  /// Read by sarif-tools (PyPI, installed by scripts/setup.sh), as a code-scanning consumer reads
  /// it, plus the structure SARIF 2.1.0 requires of every result. Nothing outside the clone: the
  /// test runs in a fresh clone with nothing beside it.
  @Test func sarifOutputIsReadByARealConsumer() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try FileManager.default.createSymbolicLink(
      atPath: device.containerPath(app, "Documents/out"), withDestinationPath: "/etc")
    let report = scratch.path + "/audit.sarif"
    let result = try await Protfs.run(["--device", device.root, "audit", "--format", "sarif", "--output", report])
    #expect(result.status == 1)
    #expect(result.stdout.isEmpty, "--output keeps standard output empty")
    let script = """
      import csv, io, json, os, sys, tempfile
      try:
          from sarif import loader
          from sarif.operations import csv_op
      except ImportError:
          sys.exit("python3 has no sarif-tools: run scripts/setup.sh")
      path = sys.argv[1]
      log = json.load(open(path))
      assert log["version"] == "2.1.0", log["version"]
      run = log["runs"][0]
      rules = run["tool"]["driver"]["rules"]
      for result in run["results"]:
          rule = rules[result["ruleIndex"]]
          assert rule["id"] == result["ruleId"], (rule["id"], result["ruleId"])
          assert result["level"] in ("error", "warning", "note", "none"), result["level"]
          assert result["message"]["text"], result
          assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"], result
      sarif_files = loader.load_sarif_files(path)
      out = os.path.join(tempfile.mkdtemp(), "findings.csv")
      csv_op.generate_csv(sarif_files, out, output_multiple_files=False)
      for row in sorted(csv.DictReader(open(out)), key=lambda r: r["Location"]):
          print(row["Tool"], row["Severity"], row["Code"], row["Location"])
      """
    let consumer = try await Protfs.runProgram("/usr/bin/env", ["python3", "-c", script, report])
    #expect(consumer.status == 0, "sarif-tools could not read the report: \(consumer.stdout) \(consumer.stderr)")
    // sarif-tools says what it writes; the rows are the lines printed above, one per finding.
    let rows = consumer.stdout.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("Writing ") }
    #expect(rows.count == 3, "\(consumer.stdout)")
    #expect(rows.contains("protfs error DP004 Containers/\(app)/Documents/open.txt"), "\(consumer.stdout)")
    #expect(rows.allSatisfy { $0.hasPrefix("protfs ") && $0.contains(" Containers/\(app)/Documents/") })
  }

  /// Read by junitparser (PyPI, installed by scripts/setup.sh), as a test dashboard reads it.
  @Test func junitOutputIsReadByARealConsumer() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let report = scratch.path + "/audit.xml"
    let result = try await Protfs.run(["--device", device.root, "audit", "--format", "junit", "--output", report])
    #expect(result.status == 1)
    let script = """
      import sys
      try:
          from junitparser import JUnitXml, Failure
      except ImportError:
          sys.exit("python3 has no junitparser: run scripts/setup.sh")
      xml = JUnitXml.fromfile(sys.argv[1])
      for suite in xml:
          print("suite", suite.name, suite.tests, suite.failures, suite.errors)
          for case in suite:
              for outcome in case.result:
                  if isinstance(outcome, Failure):
                      print("failure", case.name, outcome.type, outcome.message)
      """
    let consumer = try await Protfs.runProgram("/usr/bin/env", ["python3", "-c", script, report])
    #expect(consumer.status == 0, "junitparser could not read the report: \(consumer.stdout) \(consumer.stderr)")
    let lines = consumer.stdout.split(separator: "\n").map(String.init)
    let suite = try #require(lines.first { $0.hasPrefix("suite ") })
    let fields = suite.split(separator: " ")
    #expect(fields.count >= 5 && Int(fields[fields.count - 2]) == 1 && fields.last == "0", "\(suite)")
    #expect(
      lines.filter { $0.hasPrefix("failure ") } == [
        "failure DP004 dp004 error Containers/\(app)/Documents/open.txt"
      ], "\(consumer.stdout)")
  }

  @Test func jsonAndJUnitGoToStandardOutput() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let json = try await Protfs.run(["--device", device.root, "audit", "--format", "json"])
    #expect(json.status == 1)
    let object = try JSONSerialization.jsonObject(with: json.stdoutBytes) as? [String: Any]
    let findings = try #require(object?["findings"] as? [[String: Any]])
    #expect(findings.map { $0["path"] as? String } == ["Containers/\(app)/Documents/open.txt"])
    let junit = try await Protfs.run(["--device", device.root, "audit", "--format", "junit"])
    #expect(junit.status == 1)
    #expect(junit.stdout.hasPrefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"))
    #expect(junit.stdout.contains("<failure type=\"error\""))
  }

  @Test func aContainerPathIsAuditedAlone() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let result = try await Protfs.run(["audit", "--format", "json", device.containerPath(app)])
    let object = try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any]
    let findings = try #require(object?["findings"] as? [[String: Any]])
    #expect(findings.map { $0["path"] as? String } == ["Documents/open.txt"])
  }

  @Test func severalPathsMakeOneReport() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    _ = try await Protfs.run(["--device", device.root, "init", "com.example.second"])
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let result = try await Protfs.run([
      "audit", "--format", "json", device.containerPath(app), device.containerPath("com.example.second"),
    ])
    #expect(result.status == 1)
    let object = try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any]
    #expect(object?["root"] as? String == device.root + "/Containers")
    let findings = try #require(object?["findings"] as? [[String: Any]])
    #expect(findings.map { $0["path"] as? String } == ["\(app)/Documents/open.txt"])
    #expect((object?["summary"] as? [String: Any])?["containers"] as? Int == 2)
  }

  @Test func policySyntaxErrorsExitTwoWithFileLineAndColumn() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let policy = try writePolicy(scratch, "bad.policy", "# ok\nrule R1 error \"Documents/**\" >= complet \"why\"\n")
    let result = try await Protfs.run(["--device", device.root, "audit", "--policy", policy])
    #expect(result.status == 2)
    #expect(
      result.stderr
        == "Error: \(policy):2:33: expected a protection class (none, until-first-auth, when-inactive, unless-open, complete), found 'complet'; did you mean 'complete'?\n"
    )
    #expect(result.stdout.isEmpty)
  }

  @Test func aTenMegabytePolicyLineExitsTwoWithAShortMessage() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let policy = try writePolicy(
      scratch, "huge.policy", "rule R1 error \"" + String(repeating: "x", count: 10 << 20) + "\" any \"m\"\n")
    let result = try await Protfs.run(["--device", device.root, "audit", "--policy", policy])
    #expect(result.status == 2)
    #expect(result.stderr.contains("\(policy):1:65537: expected a line of at most 65536 bytes"))
    #expect(result.stderr.count < 400)
  }

  @Test func aPatternThatCanNeverMatchIsAWarningNotAFailure() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let policy = try writePolicy(scratch, "w.policy", "rule R1 error \"../Documents\" = complete \"why\"\n")
    let result = try await Protfs.run(["--device", device.root, "audit", "--policy", policy])
    #expect(result.status == 0)
    #expect(result.stderr.hasPrefix("\(policy):1:15: warning: the pattern \"../Documents\" can never match"))
  }

  @Test func severalPoliciesApplyTogether() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/a", class: .completeUntilFirstUserAuthentication)
    let strict = RepositoryLayout.packageRoot + "/Policies/strict.policy"
    let downloads = RepositoryLayout.packageRoot + "/Policies/background-downloads.policy"
    let result = try await Protfs.run([
      "--device", device.root, "audit", "--format", "json", "--policy", strict, "--policy", downloads,
    ])
    #expect(result.status == 1, "\(result.stderr)")
    #expect(result.stdout.contains("\"ruleId\": \"ST004\""))
    let same = try writePolicy(scratch, "dup.policy", "rule ST004 note \"x\" any \"m\"\n")
    let duplicate = try await Protfs.run(["--device", device.root, "audit", "--policy", strict, "--policy", same])
    #expect(duplicate.status == 2)
    #expect(duplicate.stderr.contains("the rule id ST004 is already used at"))
  }

  @Test func aMissingPathExitsTwo() async throws {
    let result = try await Protfs.run(["audit", "/nonexistent/protfs-device"])
    #expect(result.status == 2)
    #expect(result.stderr.hasPrefix("Error: Cannot audit '/nonexistent/protfs-device': no such file or directory"))
  }

  @Test func anUninitialisedDefaultDeviceExitsTwo() async throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let result = try await Protfs.run(["audit"], environment: ["PROTFS_DEVICE": scratch.path + "/none"])
    #expect(result.status == 2)
    #expect(result.stderr.contains("has not been initialised"))
  }

  @Test func anUnreadableDirectoryMakesTheAuditIncomplete() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.makeDirectory(app, "Documents/secret", class: .complete)
    try device.writeFile(app, "Documents/secret/a", class: .complete)
    chmod(device.containerPath(app, "Documents/secret"), 0o000)
    // Root reads everything (CAP_DAC_OVERRIDE): run the audit without the two overriding capabilities.
    let arguments = ["--device", device.root, "audit", "--format", "json"]
    let result =
      getuid() == 0
      ? try await Protfs.runProgram(
        "/usr/bin/setpriv",
        ["--bounding-set=-dac_override,-dac_read_search", RepositoryLayout.protfsBinary] + arguments)
      : try await Protfs.run(arguments)
    #expect(result.status == 2, "\(result.stderr)")
    #expect(result.stderr.contains("the audit is incomplete"))
    let object = try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any]
    let findings = try #require(object?["findings"] as? [[String: Any]])
    let unreadable = try #require(findings.first { $0["ruleId"] as? String == "PFS008" })
    #expect(unreadable["path"] as? String == "Containers/\(app)/Documents/secret")
    #expect((unreadable["message"] as? String)?.contains("Permission denied") == true)
    #expect((object?["summary"] as? [String: Any])?["complete"] as? Bool == false)
  }

  @Test func symlinkLoopsAreReportedWithoutHanging() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let documents = device.containerPath(app, "Documents")
    try FileManager.default.createSymbolicLink(atPath: documents + "/a", withDestinationPath: "b")
    try FileManager.default.createSymbolicLink(atPath: documents + "/b", withDestinationPath: "a")
    try FileManager.default.createSymbolicLink(atPath: documents + "/self", withDestinationPath: "self/x")
    let result = try await Protfs.run(["--device", device.root, "audit", "--format", "json", "--fail-on", "warning"])
    #expect(result.status == 1)
    let object = try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any]
    let loops = (object?["findings"] as? [[String: Any]] ?? []).filter { $0["ruleId"] as? String == "PFS010" }
    #expect(
      loops.compactMap { $0["path"] as? String }.sorted()
        == ["a", "b", "self"].map { "Containers/\(app)/Documents/\($0)" })
  }

  @Test func namesThatAreNotUTF8AreReportedInEveryFormat() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let path = Array(device.containerPath(app, "tmp/caf").utf8) + [0xE9, 0]
    let fd = path.withUnsafeBufferPointer {
      $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_CREAT | O_WRONLY, 0o600) }
    }
    close(fd)
    for format in ["text", "json", "sarif", "junit"] {
      let result = try await Protfs.run(["--device", device.root, "audit", "--format", format])
      #expect(result.status == 0, "\(format): \(result.stderr)")
      #expect(String(validating: result.stdoutBytes, as: UTF8.self) != nil, "\(format) output is valid UTF-8")
      #expect(
        result.stdout.contains(format == "sarif" ? "tmp/caf%E9" : "tmp/caf\\\\xE9")
          || result.stdout.contains("tmp/caf\\xE9"))
      #expect(result.stdout.contains("PFS009"))
    }
  }

  @Test func theDeviceLockStateDecidesWhatMayBeLockedOut() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/secret", class: .complete)
    try device.writeFile(app, "Documents/notes", class: .completeUntilFirstUserAuthentication)
    #expect(try await Protfs.run(["--device", device.root, "lock", "--grace", "0"]).status == 0)
    #expect(TestDevice.rawAttribute(device.containerPath(app, "Documents/secret"), AttributeName.savedMode) != nil)
    let locked = try await Protfs.run(["--device", device.root, "audit", "--fail-on", "note"])
    #expect(locked.status == 0, "a lock's own saved modes are expected: \(locked.stdout)")
    #expect(try await Protfs.run(["--device", device.root, "unlock"]).status == 0)
    #expect(try await Protfs.run(["--device", device.root, "audit", "--fail-on", "note"]).status == 0)
    // A saved mode an interrupted unlock left behind.
    try device.setAttribute(device.containerPath(app, "Documents/notes"), AttributeName.savedMode, "0600")
    let leftover = try await Protfs.run(["--device", device.root, "audit"])
    #expect(leftover.status == 1)
    #expect(
      leftover.stdout.contains("  error   PFS002  Documents/notes: The item still carries user.protfs.saved-mode")
    )
  }

  @Test func entitlementsAreComparedWithTheContainerDefault() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let plist = """
      <?xml version="1.0" encoding="UTF-8"?>
      <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
      <plist version="1.0"><dict>
      <key>com.apple.developer.default-data-protection</key><string>NSFileProtectionComplete</string>
      </dict></plist>
      """
    let entitlements = try writePolicy(scratch, "app.entitlements", plist)
    let result = try await Protfs.run([
      "--device", device.root, "audit", "--entitlements", entitlements, "--fail-on", "warning",
    ])
    #expect(result.status == 1)
    #expect(
      result.stdout.contains(
        "PFS007  .: The container's default class is until-first-auth but the entitlements ask for complete."))
  }
}
