import Foundation
import FoundationXML
import ProtFS
import ProtFSAudit
import ProtFSSystem
import ProtFSTestSupport
import Testing

@Suite("Audit reports")
struct AuditReportTests {
  /// The JSON reporter writes plain paths straight from their bytes; every path must come out as
  /// `AuditFinding.path` shown through the JSON escaper would.
  @Test func jsonPathsMatchTheDisplayedPath() {
    let paths: [[UInt8]] = [
      Array("Documents/a.txt".utf8), Array("Documents/dir/".utf8), [], Array("/".utf8),
      Array("quote\"and\\slash".utf8), Array("caf\u{e9}".utf8), [0x61, 0xFF, 0x62], [0x61, 0x0A], Array(" lead".utf8),
    ]
    for bytes in paths {
      let finding = AuditFinding(ruleID: "X", level: .note, container: "c", pathBytes: bytes, message: "m")
      let direct = AuditOutput()
      direct.writeJSONPath(finding.pathBytes[...])
      direct.flush()
      let viaString = AuditOutput()
      viaString.writeJSON(finding.path)
      viaString.flush()
      #expect(direct.text == viaString.text, "\(bytes)")
    }
  }

  let app = "com.example.app"

  /// A device with one error, one warning and notes, audited into `format`.
  func report(_ format: AuditFormat, _ options: AuditReportOptions = AuditReportOptions()) throws -> (
    text: String, summary: AuditSummary
  ) {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device(containers: [app, "com.example.clean"])
    try device.writeFile(app, "Documents/open \"quoted\".txt", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try device.writeFile(app, "Documents/plain", class: nil)
    let output = AuditOutput()
    let summary = try Auditor(AuditConfiguration(policies: [.builtInDefault]))
      .run(AuditTarget.resolve(device.root), reporter: format.reporter(output, options: options))
    return (output.text, summary)
  }

  @Test func textIsGroupedByContainerWithASummary() throws {
    let (text, summary) = try report(.text)
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.first == "\(app) (Containers/\(app))")
    #expect(lines[1].hasPrefix("  error    DP004   Documents/open \"quoted\".txt: The class is none (own)"))
    #expect(lines[2].hasPrefix("  warning  PFS003  Documents/world:"))
    #expect(lines[3].hasPrefix("  note     PFS006  Documents/plain:"))
    #expect(!text.contains("com.example.clean"), "containers without findings have no heading")
    // The mapping of the rules that reported, errors first, in aligned columns.
    let table = try #require(lines.firstIndex { $0.hasPrefix("Security severity, CWE, MASVS and MASTG") })
    #expect(
      Array(lines[(table + 1)...(table + 3)]) == [
        "  DP004   high 7.5    CWE-311, MASVS-STORAGE-1, MASTG-TEST-0299",
        "  PFS003  medium 6.5  CWE-732, MASVS-STORAGE-1",
        "  PFS006  low 2.0     CWE-665, MASVS-STORAGE-1",
      ])
    #expect(lines.last == "1 error, 1 warning, 1 note in 2 containers (15 items).")
    #expect(summary.count(atLeast: .warning) == 2)
  }

  /// Findings of several levels and rule ids of several lengths: errors first, then by path, then
  /// by rule id, in columns that line up whatever the id's length.
  @Test func textIsSortedAndItsColumnsLineUp() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/a", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/0", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/c", class: nil)
    try device.writeFile(app, "Documents/b", class: .complete, mode: 0o644)
    let custom = try Policy(
      parsing: "rule LONG-RULE-ID warning \"Documents/b\" <= until-first-auth \"why\" cwe=312\n",
      source: "custom.policy")
    let output = AuditOutput()
    // One thread or several: the order is the reporter's, not the walk's.
    _ = try Auditor(AuditConfiguration(policies: [.builtInDefault, custom], threads: 4))
      .run(AuditTarget.resolve(device.root), reporter: AuditFormat.text.reporter(output))
    let lines = output.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    #expect(lines.first == "\(app) (Containers/\(app))")
    let findings = Array(lines.dropFirst().prefix { !$0.isEmpty })
    #expect(
      findings.map { $0.split(separator: ":", maxSplits: 1)[0] } == [
        "  error    DP004         Documents/0",
        "  error    DP004         Documents/a",
        "  warning  LONG-RULE-ID  Documents/b",
        "  warning  PFS003        Documents/b",
        "  note     PFS006        Documents/c",
      ], "\(output.text)")
    let table = try #require(lines.firstIndex { $0.hasPrefix("Security severity, CWE, MASVS and MASTG") })
    #expect(
      Array(lines[(table + 1)...(table + 4)]) == [
        "  DP004         high 7.5    CWE-311, MASVS-STORAGE-1, MASTG-TEST-0299",
        "  LONG-RULE-ID  medium 4.0  CWE-312",
        "  PFS003        medium 6.5  CWE-732, MASVS-STORAGE-1",
        "  PFS006        low 2.0     CWE-665, MASVS-STORAGE-1",
      ], "\(output.text)")
  }

  @Test func jsonFindingsHaveTheRequiredFields() throws {
    let (text, _) = try report(.json)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    let findings = try #require(object["findings"] as? [[String: Any]])
    #expect(findings.count == 3)
    for finding in findings {
      for key in [
        "ruleId", "level", "path", "message", "expected", "actual", "securitySeverity", "cwe", "masvs", "mastg",
      ] {
        #expect(finding.keys.contains(key), "missing \(key) in \(finding)")
      }
    }
    let error = try #require(findings.first { $0["ruleId"] as? String == "DP004" })
    #expect(error["path"] as? String == "Containers/\(app)/Documents/open \"quoted\".txt")
    #expect(error["level"] as? String == "error")
    #expect(error["expected"] as? String == ">= until-first-auth")
    #expect(error["actual"] as? String == "none (own)")
    #expect(error["securitySeverity"] as? Double == 7.5)
    #expect(error["cwe"] as? [String] == ["CWE-311"])
    #expect(error["masvs"] as? [String] == ["MASVS-STORAGE-1"])
    #expect(error["mastg"] as? [String] == ["MASTG-TEST-0299"])
    let note = try #require(findings.first { $0["ruleId"] as? String == "PFS006" })
    #expect(note["securitySeverity"] as? Double == 2.0 && note["mastg"] as? [String] == [])
    let summary = try #require(object["summary"] as? [String: Any])
    #expect(summary["errors"] as? Int == 1)
    #expect(summary["complete"] as? Bool == true)
  }

  @Test func sarifHasRulesHelpFingerprintsAndRelativeLocations() throws {
    let (text, _) = try report(.sarif)
    let log = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    #expect(log["version"] as? String == "2.1.0")
    let run = try #require((log["runs"] as? [[String: Any]])?.first)
    let driver = try #require((run["tool"] as? [String: Any])?["driver"] as? [String: Any])
    // protfs has no published address: no URI that would not resolve.
    #expect(driver["informationUri"] == nil)
    let rules = try #require(driver["rules"] as? [[String: Any]])
    let ids = rules.compactMap { $0["id"] as? String }
    #expect(ids.prefix(3) == ["PFS001", "PFS002", "PFS003"])
    #expect(!ids.contains(BuiltInCheck.defaultClassMismatch.rawValue), "no entitlements: PFS007 is not checked")
    #expect(ids.contains("DP004"))
    #expect(rules.allSatisfy { (($0["help"] as? [String: Any])?["text"] as? String)?.isEmpty == false })
    #expect(rules.allSatisfy { $0["helpUri"] == nil })
    #expect(rules.allSatisfy { (($0["help"] as? [String: Any])?["markdown"] as? String)?.isEmpty == false })
    // What code scanning ranks alerts by: every rule has a security severity, a precision and tags
    // that start with `security`.
    for rule in rules {
      let properties = try #require(rule["properties"] as? [String: Any], "\(rule)")
      let severity = try #require((properties["security-severity"] as? String).flatMap(Double.init), "\(rule)")
      #expect(severity > 0 && severity <= 10)
      #expect(["very-high", "high", "medium", "low"].contains(properties["precision"] as? String))
      #expect((properties["tags"] as? [String])?.first == "security", "\(rule)")
    }
    let rule = try #require(rules.first { $0["id"] as? String == "DP004" })
    #expect(rule["name"] as? String == "policy/default/DP004")
    #expect(
      (rule["shortDescription"] as? [String: Any])?["text"] as? String
        == "Items matching \"Documents/\" or \"Documents/**\" must have class until-first-auth or stronger.")
    #expect(
      (rule["properties"] as? [String: Any])?["tags"] as? [String] == [
        "security", "external/cwe/cwe-311", "external/masvs/MASVS-STORAGE-1", "external/mastg/MASTG-TEST-0299",
      ])
    #expect((rule["properties"] as? [String: Any])?["security-severity"] as? String == "7.5")
    let help = try #require(rule["help"] as? [String: String])
    #expect(
      help["text"]?.hasSuffix("Security: high 7.5, CWE-311, MASVS-STORAGE-1, MASTG-TEST-0299 (precision high).") == true
    )
    #expect(help["markdown"]?.contains("[CWE-311](https://cwe.mitre.org/data/definitions/311.html)") == true)
    #expect(help["text"]?.contains("Fix: give the item class until-first-auth or a stronger one") == true)
    let builtIn = try #require(rules.first { $0["id"] as? String == "PFS004" })
    #expect(builtIn["name"] as? String == "symlink-leaves-container")
    let builtInProperties = try #require(builtIn["properties"] as? [String: Any])
    #expect(
      builtInProperties["tags"] as? [String] == ["security", "external/cwe/cwe-059", "external/masvs/MASVS-STORAGE-1"])
    #expect(builtInProperties["security-severity"] as? String == "7.0")
    #expect(builtInProperties["precision"] as? String == "very-high")
    let results = try #require(run["results"] as? [[String: Any]])
    #expect(results.count == 3)
    let dp004 = try #require(results.first { $0["ruleId"] as? String == "DP004" })
    #expect(ids[dp004["ruleIndex"] as! Int] == "DP004")
    let fingerprints = try #require(dp004["partialFingerprints"] as? [String: String])
    #expect(fingerprints["protfsItem/v1"]?.count == 16)
    #expect(fingerprints["primaryLocationLineHash"] == fingerprints["protfsItem/v1"].map { $0 + ":1" })
    let location = try #require((dp004["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])
    let artifact = try #require(location["artifactLocation"] as? [String: Any])
    #expect(artifact["uri"] as? String == "Containers/\(app)/Documents/open%20%22quoted%22.txt")
    #expect(artifact["uriBaseId"] as? String == "AUDITROOT")
    let region = try #require(location["region"] as? [String: Int])
    #expect(
      region == ["startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1], "a finding is about a whole file")
    let bases = try #require(run["originalUriBaseIds"] as? [String: [String: Any]])
    #expect((bases["AUDITROOT"]?["uri"] as? String)?.hasPrefix("file:///") == true)
  }

  /// With a SARIF root, locations are relative to it (a repository checkout), not to the device.
  @Test func sarifLocationsAreRelativeToTheSARIFRoot() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/open.txt", class: ProtectionClass.none)
    let target = try AuditTarget.resolve(device.root)
    let root = try SARIFRoot(scratch.path, containing: target)
    #expect(root.auditedRootPrefix == "device/")
    let output = AuditOutput()
    _ = try Auditor(AuditConfiguration(policies: [.builtInDefault]))
      .run(target, reporter: AuditFormat.sarif.reporter(output, options: AuditReportOptions(sarifRoot: root)))
    let log = try #require(try JSONSerialization.jsonObject(with: Data(output.text.utf8)) as? [String: Any])
    let run = try #require((log["runs"] as? [[String: Any]])?.first)
    let bases = try #require(run["originalUriBaseIds"] as? [String: [String: Any]])
    #expect(Array(bases.keys) == ["SRCROOT"])
    let base = try #require(bases["SRCROOT"]?["uri"] as? String)
    #expect(base.hasPrefix("file:///") && base.hasSuffix("/"))
    #expect(URL(string: base)?.path == URL(fileURLWithPath: scratch.path).resolvingSymlinksInPath().path)
    let results = try #require(run["results"] as? [[String: Any]])
    let artifacts = results.compactMap {
      (($0["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])?["artifactLocation"]
        as? [String: String]
    }
    #expect(artifacts == [["uri": "device/Containers/\(app)/Documents/open.txt", "uriBaseId": "SRCROOT"]])
  }

  /// A SARIF root that is missing, not a directory, or not around the audited tree: one error that
  /// names the path and says what to give instead.
  @Test(arguments: ["missing", "file", "outside"])
  func aBadSARIFRootIsRefused(_ kind: String) throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    let target = try AuditTarget.resolve(device.containerPath(app))
    let path: String
    switch kind {
    case "missing": path = scratch.path + "/no-such-repo"
    case "file":
      path = scratch.path + "/a-file"
      #expect(FileManager.default.createFile(atPath: path, contents: Data()))
    default:
      path = scratch.path + "/elsewhere"
      try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    }
    let error = try #require(throws: ProtFSError.self) { try SARIFRoot(path, containing: target) }
    let expected =
      switch kind {
      case "missing": "The SARIF root '\(path)' does not exist"
      case "file": "The SARIF root '\(path)' is not a directory"
      default: "The audited tree '\(device.containerPath(app))' is not inside the SARIF root '\(path)'"
      }
    #expect(error.description.hasPrefix(expected), "\(error)")
    #expect(error.description.contains("give the repository checkout that holds the audited tree"), "\(error)")
  }

  @Test func fingerprintsAreStableAcrossRuns() throws {
    let a = try report(.sarif).text
    let b = try report(.sarif).text
    func prints(_ text: String) -> [String] {
      text.split(separator: "\n").compactMap { line in
        line.range(of: "\"protfsItem/v1\": \"").map { String(line[$0.upperBound...].prefix(16)) }
      }.sorted()
    }
    #expect(prints(a) == prints(b))
    #expect(prints(a).count == 3)
  }

  /// The names of `document`'s test cases that have a `<failure>` (or `element`), sorted.
  func cases(_ document: XMLDocument, with element: String = "failure") throws -> [String] {
    try document.nodes(forXPath: "//testcase[\(element)]").compactMap {
      ($0 as? XMLElement)?.attribute(forName: "name")?.stringValue
    }.sorted()
  }

  func attribute(_ document: XMLDocument, _ path: String, _ name: String) throws -> String? {
    (try document.nodes(forXPath: path).first as? XMLElement)?.attribute(forName: name)?.stringValue
  }

  @Test func junitHasASuitePerContainerAndACasePerFindingAndPerPassingRule() throws {
    let (text, _) = try report(.junit)
    let document = try XMLDocument(data: Data(text.utf8))
    // The built-in checks that run without entitlements, an app or a sealed device (all but
    // PFS007, PFS016, PFS017, PFS018 and PFS019) and the 8 rules of the default policy.
    let rules = BuiltInCheck.allCases.count - 5 + Policy.builtInDefault.rules.count
    let suites = try document.nodes(forXPath: "/testsuites/testsuite").compactMap {
      ($0 as? XMLElement)?.attribute(forName: "name")?.stringValue
    }
    #expect(suites == [app, "com.example.clean"])
    #expect(try document.nodes(forXPath: "//testcase").count == 2 * rules)
    // At the default --fail-on error, the error fails; the warning and the note do not.
    #expect(try cases(document) == ["DP004 Documents/open \"quoted\".txt"])
    #expect(try attribute(document, "/testsuites", "failures") == "1")
    #expect(try attribute(document, "/testsuites", "tests") == "\(2 * rules)")
    #expect(try attribute(document, "/testsuites/testsuite[@name='\(app)']", "failures") == "1")
    #expect(try attribute(document, "/testsuites/testsuite[@name='com.example.clean']", "failures") == "0")
    let passing = try document.nodes(forXPath: "//testsuite[@name='\(app)']/testcase[not(failure)]").compactMap {
      ($0 as? XMLElement)?.attribute(forName: "name")?.stringValue
    }
    #expect(
      passing.contains("PFS003 protected-file-readable-by-others") && passing.contains("DP001 policy/default/DP001"))
    let out = try document.nodes(forXPath: "//testcase[@name='PFS006 no-own-class']/system-out").map(\.stringValue)
    #expect(out.count == 1 && out[0]?.contains("note: Documents/plain: ") == true, "\(out)")
    // The failure ends with the rule's mapping; the suite's properties give every reporting rule's.
    let failure = try #require(try document.nodes(forXPath: "//failure").first?.stringValue)
    #expect(failure.contains("\nsecurity: high 7.5, CWE-311, MASVS-STORAGE-1, MASTG-TEST-0299 (precision high)"))
    #expect(
      try attribute(document, "//testsuite[@name='\(app)']/properties/property[@name='security PFS003']", "value")
        == "medium 6.5, CWE-732, MASVS-STORAGE-1")
    #expect(
      try attribute(document, "//testsuite[@name='\(app)']/properties/property[@name='path']", "value")
        == "Containers/\(app)")
  }

  /// JUnit's failures follow --fail-on, as the exit status does (notes fail only under note).
  @Test(arguments: [AuditLevel.error, .warning, .note])
  func junitFailuresFollowFailOn(_ failOn: AuditLevel) throws {
    let (text, summary) = try report(.junit, AuditReportOptions(failOn: failOn))
    let document = try XMLDocument(data: Data(text.utf8))
    let failing = try cases(document)
    let expected =
      ["DP004 Documents/open \"quoted\".txt"] + (failOn <= .warning ? ["PFS003 Documents/world"] : [])
      + (failOn == .note ? ["PFS006 Documents/plain"] : [])
    #expect(failing == expected)
    #expect(try attribute(document, "/testsuites", "failures") == "\(failing.count)")
    #expect(failing.count == summary.count(atLeast: failOn))
  }

  /// A tree that could not be read is a check that could not run: JUnit errors, not failures.
  @Test func junitReportsUnreadableTreesAsErrors() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    let output = AuditOutput()
    let reporter = AuditFormat.junit.reporter(output)
    let unit = try AuditTarget.resolve(device.root).units[0]
    reporter.begin(target: try AuditTarget.resolve(device.root), rules: AuditConfiguration(policies: []).rules)
    reporter.beginContainer(unit)
    reporter.report(
      AuditFinding(
        ruleID: BuiltInCheck.unreadable.rawValue, level: .error, container: app,
        pathBytes: Array("Containers/\(app)/Documents/secret".utf8),
        containerPathOffset: "Containers/\(app)/".utf8.count,
        message: "Cannot read the directory 'Documents/secret': Permission denied; the audit is incomplete."))
    var summary = AuditSummary()
    summary.incomplete = true
    reporter.finish(summary)
    let document = try XMLDocument(data: Data(output.text.utf8))
    #expect(try cases(document, with: "error") == ["PFS008 Documents/secret"])
    #expect(try attribute(document, "/testsuites", "errors") == "1")
    #expect(try attribute(document, "/testsuites", "failures") == "0")
  }

  @Test func escapingKeepsEveryFormatWellFormed() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device()
    try device.writeFile(app, "Documents/a<b>&\"c\"\nd\te", class: ProtectionClass.none)
    for format in AuditFormat.allCases {
      let output = AuditOutput()
      _ = try Auditor(AuditConfiguration(policies: [.builtInDefault]))
        .run(AuditTarget.resolve(device.root), reporter: format.reporter(output))
      switch format {
      case .json, .sarif: _ = try JSONSerialization.jsonObject(with: Data(output.text.utf8))
      case .junit: _ = try XMLDocument(data: Data(output.text.utf8))
      case .text: #expect(output.text.contains("Documents/a<b>&\"c\"\\x0Ad\\x09e"))
      }
    }
  }
}
