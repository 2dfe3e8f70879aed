import Foundation
import ProtFS
import ProtFSAudit
import ProtFSTestSupport
import Testing

/// docs/audit-rules.md documents every rule protfs ships with what SARIF's `help.markdown` says of
/// it: the part between its markers is made from the built-in checks and Policies/*.policy.
@Suite("Audit rules page")
struct AuditRulesPageTests {
  static let page = RepositoryLayout.packageRoot + "/docs/audit-rules.md"
  static let begin = "<!-- rules: made by AuditRulesPageTests from the checks and Policies/*.policy -->"
  static let end = "<!-- end of rules -->"

  /// The shipped policies, in the order the page shows them.
  static func shippedPolicies() throws -> [Policy] {
    try ["default", "strict", "background-downloads"].map {
      try Policy(contentsOf: RepositoryLayout.packageRoot + "/Policies/\($0).policy")
    }
  }

  /// The generated part: a summary table, then a section per rule whose heading is its id.
  static func rulesMarkdown() throws -> String {
    let groups: [(String, [AuditRuleDescription])] =
      [("Built-in checks", BuiltInCheck.allCases.map(\.description))]
      + (try shippedPolicies()).map { policy in
        ("`\((policy.source as NSString).lastPathComponent)`", policy.rules.map(\.description))
      }
    var text = "| Rule | Level | Security severity | CWE | MASVS | MASTG |\n|---|---|---|---|---|---|\n"
    for rule in groups.flatMap(\.1) {
      let security = rule.security
      func cell(_ items: [String]) -> String { items.isEmpty ? "-" : items.joined(separator: ", ") }
      text +=
        "| [\(rule.id)](#\(rule.id.lowercased())) | \(rule.level.rawValue) | \(security.severity) \(security.rating) "
        + "| \(cell(security.cweIDs)) | \(cell(security.masvs)) | \(cell(security.mastg)) |\n"
    }
    for (title, rules) in groups {
      text += "\n## \(title)\n"
      for rule in rules {
        text += "\n### \(rule.id)\n\n`\(rule.name)`\n\n\(rule.markdown)"
      }
    }
    return text
  }

  @Test func thePageDocumentsEveryRuleAsSARIFDoes() throws {
    let current = try String(contentsOfFile: Self.page, encoding: .utf8)
    let start = try #require(current.range(of: Self.begin + "\n"), "docs/audit-rules.md lacks \(Self.begin)")
    let stop = try #require(current.range(of: Self.end), "docs/audit-rules.md lacks \(Self.end)")
    let expected = try Self.rulesMarkdown() + "\n"
    let written = String(current[start.upperBound..<stop.lowerBound])
    if written != expected, ProcessInfo.processInfo.environment["PROTFS_WRITE_AUDIT_RULES"] == "1" {
      let updated = String(current[..<start.upperBound]) + expected + String(current[stop.lowerBound...])
      try Data(updated.utf8).write(to: URL(fileURLWithPath: Self.page))
      return
    }
    #expect(
      written == expected,
      "docs/audit-rules.md is out of date: run PROTFS_WRITE_AUDIT_RULES=1 swift test --filter AuditRulesPageTests")
  }

  /// Every rule ranks for code scanning: a severity, `security` first in its tags, a CWE tag in
  /// CodeQL's form, and only MASVS and MASTG ids written as OWASP writes them.
  @Test func everyShippedRuleHasItsSecurityMapping() throws {
    let rules =
      BuiltInCheck.allCases.map(\.description) + (try Self.shippedPolicies()).flatMap(\.rules).map(\.description)
    for rule in rules {
      let security = rule.security
      #expect((1...100).contains(security.severityTenths), "\(rule.id)")
      #expect(security.tags.first == "security", "\(rule.id)")
      #expect(security.masvs.allSatisfy(AuditRuleSecurity.isMASVSControl), "\(rule.id)")
      #expect(security.mastg.allSatisfy(AuditRuleSecurity.isMASTGTest), "\(rule.id)")
      #expect(!rule.markdown.isEmpty && rule.markdown.split(separator: "\n").allSatisfy { $0.count <= 120 })
    }
    // Policy rules that write no mapping would get the default one (medium precision, no CWE).
    let policyRules = try Self.shippedPolicies().flatMap(\.rules)
    #expect(policyRules.allSatisfy { !$0.security.cwe.isEmpty }, "every shipped policy rule names its CWE")
    #expect(BuiltInCheck.symlinkLeavesContainer.security.tags.contains("external/cwe/cwe-059"))
  }
}
