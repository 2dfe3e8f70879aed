import Foundation
import FoundationXML
import ProtFS
import ProtFSAudit
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
  func report(_ format: AuditFormat) throws -> (text: String, summary: AuditSummary) {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try scratch.device(containers: [app, "com.example.clean"])
    try device.writeFile(app, "Documents/open \"quoted\".txt", class: ProtectionClass.none)
    try device.writeFile(app, "Documents/world", class: .complete, mode: 0o644)
    try device.writeFile(app, "Documents/plain", class: nil)
    let output = AuditOutput()
    let summary = try Auditor(AuditConfiguration(policies: [.builtInDefault]))
      .run(AuditTarget.resolve(device.root), reporter: format.reporter(output))
    return (output.text, summary)
  }

  @Test func textIsGroupedByContainerWithASummary() throws {
    let (text, summary) = try report(.text)
    let lines = text.split(separator: "\n").map(String.init)
    #expect(lines.first == "\(app) (Containers/\(app))")
    #expect(lines.contains { $0.hasPrefix("  error   DP004  Documents/open \"quoted\".txt: The class is none (own)") })
    #expect(lines.contains { $0.hasPrefix("  warning PFS003  Documents/world:") })
    #expect(!text.contains("com.example.clean"), "containers without findings have no heading")
    #expect(lines.last == "1 error, 1 warning, 1 note in 2 containers (15 items).")
    #expect(summary.count(atLeast: .warning) == 2)
  }

  @Test func jsonFindingsHaveTheRequiredFields() throws {
    let (text, _) = try report(.json)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    let findings = try #require(object["findings"] as? [[String: Any]])
    #expect(findings.count == 3)
    for finding in findings {
      for key in ["ruleId", "level", "path", "message", "expected", "actual"] {
        #expect(finding.keys.contains(key), "missing \(key) in \(finding)")
      }
    }
    let error = try #require(findings.first { $0["ruleId"] as? String == "DP004" })
    #expect(error["path"] as? String == "Containers/\(app)/Documents/open \"quoted\".txt")
    #expect(error["level"] as? String == "error")
    #expect(error["expected"] as? String == ">= until-first-auth")
    #expect(error["actual"] as? String == "none (own)")
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
    let rules = try #require(driver["rules"] as? [[String: Any]])
    let ids = rules.compactMap { $0["id"] as? String }
    #expect(ids.prefix(3) == ["PFS001", "PFS002", "PFS003"])
    #expect(ids.contains("DP004"))
    #expect(rules.allSatisfy { (($0["help"] as? [String: Any])?["text"] as? String)?.isEmpty == false })
    let results = try #require(run["results"] as? [[String: Any]])
    #expect(results.count == 3)
    let dp004 = try #require(results.first { $0["ruleId"] as? String == "DP004" })
    #expect(ids[dp004["ruleIndex"] as! Int] == "DP004")
    let fingerprints = try #require(dp004["partialFingerprints"] as? [String: String])
    #expect(fingerprints["protfsItem/v1"]?.count == 16)
    let location = try #require((dp004["locations"] as? [[String: Any]])?.first?["physicalLocation"] as? [String: Any])
    let artifact = try #require(location["artifactLocation"] as? [String: Any])
    #expect(artifact["uri"] as? String == "Containers/\(app)/Documents/open%20%22quoted%22.txt")
    #expect(artifact["uriBaseId"] as? String == "AUDITROOT")
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

  @Test func junitHasATestCasePerRuleAndAFailurePerFinding() throws {
    let (text, _) = try report(.junit)
    let document = try XMLDocument(data: Data(text.utf8))
    let cases = try document.nodes(forXPath: "//testcase")
    let rules = BuiltInCheck.allCases.count + Policy.builtInDefault.rules.count
    #expect(cases.count == rules)
    #expect(try document.nodes(forXPath: "//failure").count == 3)
    let failing = try document.nodes(forXPath: "//testcase[failure]").compactMap {
      ($0 as? XMLElement)?.attribute(forName: "name")?.stringValue
    }
    #expect(failing.sorted() == ["DP004 dp004", "PFS003 protected-file-readable-by-others", "PFS006 no-own-class"])
    let suites = try document.nodes(forXPath: "/testsuites").first as? XMLElement
    #expect(suites?.attribute(forName: "failures")?.stringValue == "3")
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
