import Foundation
import ProtFS
import ProtFSAudit
import ProtFSSystem
import ProtFSTestSupport
import Testing

@Suite("Audit policy language")
struct AuditPolicyTests {
  @Test func parsesEveryRequirementForm() throws {
    let text = """
      # a comment, then a blank line

      rule R1 error "Documents/" "Documents/**" >= until-first-auth "why 1"
      rule R2 warning "a" = complete "why 2"   # trailing comment
      rule R3 note "b" <= none "why 3"
      rule R4 error "c" != NSFileProtectionNone "why 4"
      rule R5 error "d" in {none, until-first-auth, completeUnlessOpen} "why 5"
      rule R6 note "e" any "why 6"
      rule R7 error "*-wal" same-as-sibling-without "-wal" "why \\"7\\""
      """
    let policy = try Policy(parsing: text, source: "t.policy")
    #expect(policy.rules.map(\.id) == ["R1", "R2", "R3", "R4", "R5", "R6", "R7"])
    #expect(policy.rules[0].patterns.map(\.text) == ["Documents/", "Documents/**"])
    #expect(policy.rules[0].requirement == .atLeast(.completeUntilFirstUserAuthentication))
    #expect(policy.rules[0].line == 3)
    #expect(policy.rules[1].requirement == .equal(.complete))
    #expect(policy.rules[1].level == .warning)
    #expect(policy.rules[2].requirement == .atMost(.none))
    #expect(policy.rules[3].requirement == .notEqual(.none))
    #expect(policy.rules[4].requirement == .oneOf([.none, .completeUntilFirstUserAuthentication, .completeUnlessOpen]))
    #expect(policy.rules[5].requirement == .any)
    #expect(policy.rules[6].requirement == .sameAsSiblingWithout(suffix: "-wal"))
    #expect(policy.rules[6].message == "why \"7\"")
    #expect(policy.warnings.isEmpty)
  }

  struct BadLine: CustomTestStringConvertible, Sendable {
    var text: String
    var line: Int
    var column: Int
    var expected: String
    var testDescription: String { text.debugDescription }
  }

  static let badLines: [BadLine] = [
    BadLine(text: "rules R1 error \"a\" any \"m\"", line: 1, column: 1, expected: "expected 'rule'"),
    BadLine(text: "rule\n", line: 1, column: 5, expected: "expected a rule id"),
    BadLine(text: "\nrule 1R error \"a\" any \"m\"", line: 2, column: 6, expected: "expected a rule id"),
    BadLine(text: "rule R1 fatal \"a\" any \"m\"", line: 1, column: 9, expected: "expected a severity"),
    BadLine(text: "rule R1 error any \"m\"", line: 1, column: 15, expected: "expected a quoted path pattern"),
    BadLine(text: "rule R1 error \"a\" >= \"m\"", line: 1, column: 22, expected: "expected a protection class"),
    BadLine(text: "rule R1 error \"a\" >= complet \"m\"", line: 1, column: 22, expected: "did you mean 'complete'?"),
    BadLine(text: "rule R1 error \"a\" in {none complete} \"m\"", line: 1, column: 28, expected: "expected ',' or '}'"),
    BadLine(text: "rule R1 error \"a\" in none \"m\"", line: 1, column: 22, expected: "expected '{'"),
    BadLine(text: "rule R1 error \"a\" ~ none \"m\"", line: 1, column: 19, expected: "expected a word"),
    BadLine(text: "rule R1 error \"a\" maybe \"m\"", line: 1, column: 19, expected: "expected a requirement"),
    BadLine(text: "rule R1 error \"a\" any", line: 1, column: 22, expected: "expected a quoted message"),
    BadLine(text: "rule R1 error \"a\" any \"m\" extra", line: 1, column: 27, expected: "expected the end of the line"),
    BadLine(text: "rule R1 error \"a any \"m\"", line: 1, column: 24, expected: "closing '\"'"),
    BadLine(text: "rule R1 error \"[ab\" any \"m\"", line: 1, column: 16, expected: "closing ']'"),
    BadLine(
      text: "rule R1 error \"a\" any \"m\"\nrule R1 note \"b\" any \"n\"", line: 2, column: 6,
      expected: "R1 is already used on line 1"),
    BadLine(
      text: "rule R1 error \"a\" same-as-sibling-without \"\" \"m\"", line: 1, column: 43,
      expected: "non-empty name suffix"),
    BadLine(text: "rule R1 error \"a\" any \"m\" cwe", line: 1, column: 30, expected: "expected '=' after cwe"),
    BadLine(text: "rule R1 error \"a\" any \"m\" cwe=x", line: 1, column: 31, expected: "a CWE number such as 311"),
    BadLine(
      text: "rule R1 error \"a\" any \"m\" security-severity=10.5", line: 1, column: 45,
      expected: "a security severity from 0.1 to 10.0"),
    BadLine(
      text: "rule R1 error \"a\" any \"m\" security-severity=0", line: 1, column: 45,
      expected: "a security severity from 0.1 to 10.0"),
    BadLine(text: "rule R1 error \"a\" any \"m\" precision=sure", line: 1, column: 37, expected: "very-high, high"),
    BadLine(
      text: "rule R1 error \"a\" any \"m\" masvs=MASVS-storage-1", line: 1, column: 33,
      expected: "a MASVS control such as MASVS-STORAGE-1"),
    BadLine(
      text: "rule R1 error \"a\" any \"m\" mastg=MASTG-TEST-52", line: 1, column: 33,
      expected: "a MASTG test such as MASTG-TEST-0299"),
    BadLine(text: "rule R1 error \"a\" any \"m\" cwe=1 cwe=2", line: 1, column: 33, expected: "cwe is repeated"),
  ]

  /// The security mapping after the message: every key, lists, and defaults from the level for
  /// what a rule leaves out.
  @Test func aRuleCarriesItsSecurityMapping() throws {
    let policy = try Policy(
      parsing: """
        rule R1 warning "a" any "m" cwe=311,CWE-922 masvs=MASVS-STORAGE-1,MASVS-STORAGE-2 mastg=MASTG-TEST-0299 security-severity=9.1 precision=very-high
        rule R2 note "b" any "n"
        rule R3 error "c" any "o" security-severity=10
        """, source: "p.policy")
    let (r1, r2, r3) = (policy.rules[0].security, policy.rules[1].security, policy.rules[2].security)
    #expect(
      r1.cwe == [311, 922] && r1.masvs == ["MASVS-STORAGE-1", "MASVS-STORAGE-2"] && r1.mastg == ["MASTG-TEST-0299"])
    #expect(r1.severity == "9.1" && r1.rating == "critical" && r1.precision == .veryHigh)
    #expect(
      r1.tags == [
        "security", "external/cwe/cwe-311", "external/cwe/cwe-922", "external/masvs/MASVS-STORAGE-1",
        "external/masvs/MASVS-STORAGE-2", "external/mastg/MASTG-TEST-0299",
      ])
    #expect(r2 == AuditRuleSecurity.default(for: .note) && r2.severity == "1.0" && r2.rating == "low")
    #expect(r2.tags == ["security"] && r2.precision == .medium)
    #expect(r3.severity == "10.0" && r3.precision == .medium)
  }

  @Test(arguments: badLines)
  func syntaxErrorsGiveLineAndColumn(_ bad: BadLine) {
    #expect {
      _ = try Policy(parsing: bad.text, source: "bad.policy")
    } throws: { error in
      guard let diagnostic = error as? PolicyDiagnostic else { return false }
      let ok =
        diagnostic.line == bad.line && diagnostic.column == bad.column
        && diagnostic.description.hasPrefix("bad.policy:\(bad.line):\(bad.column): expected")
        && diagnostic.message.contains(bad.expected)
      if !ok { Issue.record("got \(diagnostic)") }
      return ok
    }
  }

  @Test func windowsLineEndingsAndTabsAreFine() throws {
    let policy = try Policy(parsing: "# c\r\nrule\tR1 error\t\"a\" any \"m\"\r\n\r\n", source: "crlf.policy")
    #expect(policy.rules.map(\.id) == ["R1"])
    #expect(policy.rules.first?.line == 2)
  }

  @Test func anEmptyPolicyHasNoRules() throws {
    #expect(try Policy(parsing: "", source: "empty.policy").rules.isEmpty)
    #expect(try Policy(parsing: "\n# only a comment\n", source: "c.policy").rules.isEmpty)
  }

  @Test func warnsAboutPatternsThatCanNeverMatch() throws {
    let policy = try Policy(
      parsing: """
        rule R1 error "Documents//x" any "m"
        rule R2 error "a" = none "m"
        rule R3 error "b" = none "m"
        rule R4 error "a" != none "m"
        """, source: "w.policy")
    #expect(policy.warnings.count == 2)
    #expect(
      policy.warnings[0].description.hasPrefix("w.policy:1:15: warning: the pattern \"Documents//x\" can never match"))
    #expect(
      policy.warnings[1].description.hasPrefix("w.policy:2:1: warning: rule R2 can never match: rule R4 on line 4"))
  }

  @Test func aRuleAfterMatchEverythingShadowsEarlierOnes() throws {
    let policy = try Policy(
      parsing: "rule R1 error \"Documents/**\" = complete \"m\"\nrule R2 note \"**\" any \"m\"\n", source: "s")
    #expect(policy.warnings.map(\.line) == [1])
  }

  @Test func aRuleIsShadowedByTheNearestLaterRuleThatHasAllItsPatterns() throws {
    let policy = try Policy(
      parsing: """
        rule R1 error "a" "b" = none "m"
        rule R2 error "a" "c" = none "m"
        rule R3 error "b" "a" "d" = none "m"
        rule R4 error "b" "a" = none "m"
        rule R5 error "a" "b" "c" "d" "e" = none "m"
        """, source: "w.policy")
    // R1 {a, b} is hidden by R3 (the first later rule with both), not by R2 ({a, c}).
    // R2 {a, c} and R3 {a, b, d} by R5; R4 {a, b} by R5; R5 by nothing.
    #expect(
      policy.warnings.map(\.description) == [
        "w.policy:1:1: warning: rule R1 can never match: rule R3 on line 3 matches every path it does and comes later (the last matching rule wins)",
        "w.policy:2:1: warning: rule R2 can never match: rule R5 on line 5 matches every path it does and comes later (the last matching rule wins)",
        "w.policy:3:1: warning: rule R3 can never match: rule R5 on line 5 matches every path it does and comes later (the last matching rule wins)",
        "w.policy:4:1: warning: rule R4 can never match: rule R5 on line 5 matches every path it does and comes later (the last matching rule wins)",
      ])
  }

  /// The shadowing check compared every rule with every later one: 20,000 rules took 37 s (and
  /// minutes in a debug build) before any file was read. The limit is a hang guard, not a target:
  /// `benchmarks/policy.sh` measures the load time.
  @Test(.timeLimit(.minutes(1))) func twentyThousandRulesLoadWithTheirWarnings() throws {
    var text = ""
    for index in 0..<20_000 {
      text += "rule R\(index) error \"Documents/dir\(index)/**\" \"Library/x\(index)\" = complete \"m\"\n"
    }
    text += "rule LAST error \"Documents/dir7/**\" \"Library/x7\" \"tmp/y\" any \"m\"\n"
    let policy = try Policy(parsing: text, source: "many.policy")
    #expect(policy.rules.count == 20_001)
    #expect(policy.warnings.map(\.line) == [8])
  }

  /// The worst case of the shadowing check: every pattern is in many later rules, no two rules
  /// share both, so each rule's candidates all fail (141 × 141 rules).
  @Test(.timeLimit(.minutes(1))) func aGridOfRulesThatShareHalfTheirPatternsLoads() throws {
    var text = ""
    for row in 0..<141 {
      for column in 0..<141 {
        text += "rule R\(row)x\(column) error \"Documents/r\(row)\" \"Library/c\(column)\" = complete \"m\"\n"
      }
    }
    let policy = try Policy(parsing: text, source: "grid.policy")
    #expect(policy.rules.count == 141 * 141)
    #expect(policy.warnings.isEmpty)
  }

  @Test func aTenMegabyteLineIsRefusedClearly() {
    let text = "rule R1 error \"" + String(repeating: "a", count: 10 * 1024 * 1024) + "\" any \"m\"\n"
    #expect {
      _ = try Policy(parsing: text, source: "huge.policy")
    } throws: { error in
      guard let diagnostic = error as? PolicyDiagnostic else { return false }
      return diagnostic.line == 1 && diagnostic.description.count < 300
        && diagnostic.message.contains("at most 65536 bytes")
    }
  }

  @Test func theBuiltInDefaultIsTheShippedFileByteForByte() throws {
    let shipped = try Data(contentsOf: URL(fileURLWithPath: RepositoryLayout.packageRoot + "/Policies/default.policy"))
    let builtIn = try Policy(parsing: String(decoding: shipped, as: UTF8.self), source: "default.policy")
    #expect(Policy.builtInDefault.rules.map(\.id) == builtIn.rules.map(\.id))
    // The embedded text itself: regenerate with scripts/embed-default-policy.sh when this fails.
    let embedded = try String(
      contentsOfFile: RepositoryLayout.packageRoot + "/Sources/ProtFSAudit/Policy/DefaultPolicyText.swift",
      encoding: .utf8)
    let start = embedded.range(of: "#\"\"\"\n")!.upperBound
    let end = embedded.range(of: "\"\"\"# + \"\\n\"")!.lowerBound
    #expect(Array(embedded[start..<end].utf8) == Array(shipped))
  }

  @Test(arguments: ["default.policy", "strict.policy", "background-downloads.policy"])
  func shippedPoliciesParseWithoutWarnings(_ name: String) throws {
    let policy = try Policy(contentsOf: RepositoryLayout.packageRoot + "/Policies/" + name)
    #expect(!policy.rules.isEmpty)
    #expect(policy.warnings.isEmpty, "\(policy.warnings)")
    #expect(policy.rules.allSatisfy { !$0.message.isEmpty })
  }

  @Test(arguments: [
    ("/usr/bin/protfs", "/usr/share/protfs"), ("/usr/local/bin/protfs", "/usr/local/share/protfs"),
    ("/opt/p/bin/protfs", "/opt/p/share/protfs"), ("/bin/protfs", "/share/protfs"),
  ])
  func installedPoliciesLieInTheShareDirectoryBesideTheBinarysBin(_ executable: String, _ directory: String) {
    #expect(InstalledPolicies(executable: executable).directory == directory)
  }

  @Test func aBareNameIsAnInstalledPolicyAndAnythingElseAPath() {
    let installed = InstalledPolicies(directory: "/usr/share/protfs")
    let here: Set<String> = ["mine.policy"]
    let path = { (argument: String) in installed.path(for: argument, exists: { here.contains($0) }) }
    #expect(path("strict") == "/usr/share/protfs/strict.policy")
    #expect(path("background-downloads.policy") == "/usr/share/protfs/background-downloads.policy")
    #expect(path("mine.policy") == "mine.policy", "a file in the current directory stays a path")
    #expect(path("./strict") == "./strict")
    #expect(path("Policies/strict.policy") == "Policies/strict.policy")
    #expect(path("/etc/x.policy") == "/etc/x.policy")
  }

  @Test func aPolicyFileThatIsNotUTF8IsRefusedWithItsPosition() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let path = scratch.path + "/bin.policy"
    try Data(Array("rule R1 error \"a\" any \"m\"\nrule R2 ".utf8) + [0xFF]).write(to: URL(fileURLWithPath: path))
    #expect {
      _ = try Policy(contentsOf: path)
    } throws: { error in
      (error as? ProtFSError)?.message == "\(path):2:9: expected UTF-8 text."
    }
  }

  @Test func aMissingPolicyFileSaysSo() {
    #expect {
      _ = try Policy(contentsOf: "/nonexistent/x.policy")
    } throws: { error in
      guard let error = error as? ProtFSError else { return false }
      return error.code == .notFound && error.message.contains("'/nonexistent/x.policy'")
    }
  }

  @Test func ruleIDsMustBeUniqueAcrossPoliciesAndNotReserved() throws {
    let a = try Policy(parsing: "rule X1 error \"a\" any \"m\"", source: "a.policy")
    let b = try Policy(parsing: "rule X1 error \"b\" any \"m\"", source: "b.policy")
    #expect(throws: ProtFSError.self) { try AuditConfiguration(policies: [a, b]).validate() }
    let reserved = try Policy(parsing: "rule PFS001 error \"b\" any \"m\"", source: "c.policy")
    #expect(throws: ProtFSError.self) { try AuditConfiguration(policies: [reserved]).validate() }
  }

  @Test func builtInCheckLevelsMatchTheirDescriptions() {
    for check in BuiltInCheck.allCases {
      #expect(check.level == check.description.level)
      #expect(!check.description.help.isEmpty)
    }
  }
}
