/// How a rule ranks as a security finding, and the weakness and standard it stands for: what code
/// scanning reads from a SARIF rule (`security-severity`, `tags`, `precision`) and what a reviewer's
/// report cites (CWE, OWASP MASVS control, OWASP MASTG test).
///
/// Built-in checks carry theirs in `BuiltInCheck.security`; a policy rule writes its own after its
/// message (`cwe=311 masvs=MASVS-STORAGE-1 ...`, Policies/README.md), and what it leaves out comes
/// from `default(for:)`.
public struct AuditRuleSecurity: Sendable, Hashable {
  /// How often a finding of the rule is a real problem (SARIF `precision`, as code scanning reads it).
  public enum Precision: String, Sendable, CaseIterable, Hashable {
    /// The rule reads a fact (an attribute, a mode, a link): a finding is almost never wrong.
    case veryHigh = "very-high"
    /// A finding is a problem unless the app deliberately wants what it found.
    case high
    /// A finding is often deliberate.
    case medium
    /// A finding is a hint.
    case low
  }

  /// The security severity in tenths (`75` is 7.5), 1...100: GitHub ranks 9.0 and above critical,
  /// 7.0 high, 4.0 medium, and below that low.
  public var severityTenths: Int
  /// The CWE weaknesses (`311` for CWE-311), most specific first.
  public var cwe: [Int]
  /// The OWASP MASVS v2 controls, for example `MASVS-STORAGE-1`.
  public var masvs: [String]
  /// The OWASP MASTG tests that check the same thing on a device, for example `MASTG-TEST-0299`.
  public var mastg: [String]
  /// How often a finding is a real problem.
  public var precision: Precision

  /// Creates a mapping; `severityTenths` is kept within 1...100 (0.1 to 10.0).
  public init(
    severityTenths: Int, cwe: [Int] = [], masvs: [String] = [], mastg: [String] = [], precision: Precision = .high
  ) {
    self.severityTenths = min(max(severityTenths, 1), 100)
    self.cwe = cwe
    self.masvs = masvs
    self.mastg = mastg
    self.precision = precision
  }

  /// What a policy rule that writes none of it gets: a severity from its level (error 7.0 high,
  /// warning 4.0 medium, note 1.0 low), no CWE, MASVS or MASTG, and medium precision, since
  /// nothing says what the rule protects.
  public static func `default`(for level: AuditLevel) -> AuditRuleSecurity {
    let tenths =
      switch level {
      case .error: 70
      case .warning: 40
      case .note: 10
      }
    return AuditRuleSecurity(severityTenths: tenths, precision: .medium)
  }

  /// The score as SARIF's `security-severity` holds it: one decimal, `"7.5"`.
  public var severity: String { "\(severityTenths / 10).\(severityTenths % 10)" }

  /// The band GitHub shows for the score: `critical`, `high`, `medium` or `low`.
  public var rating: String {
    switch severityTenths {
    case 90...: "critical"
    case 70..<90: "high"
    case 40..<70: "medium"
    default: "low"
    }
  }

  /// The CWE ids as reports print them: `CWE-311`.
  public var cweIDs: [String] { cwe.map { "CWE-\($0)" } }

  /// SARIF `properties.tags`: `security` (without which code scanning ignores `security-severity`),
  /// then `external/cwe/cwe-NNN` per CWE (at least three digits, as CodeQL writes them: `cwe-059`),
  /// then `external/masvs/MASVS-…` per MASVS control and `external/mastg/MASTG-TEST-…` per test.
  public var tags: [String] {
    ["security"] + cwe.map { "external/cwe/cwe-\(Self.threeDigits($0))" } + masvs.map { "external/masvs/\($0)" }
      + mastg.map { "external/mastg/\($0)" }
  }

  /// One line for people: `high 7.5, CWE-311, MASVS-STORAGE-1, MASTG-TEST-0299`.
  public var summary: String {
    (["\(rating) \(severity)"] + cweIDs + masvs + mastg).joined(separator: ", ")
  }

  private static func threeDigits(_ number: Int) -> String {
    let digits = String(number)
    return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
  }

  /// The score written `N`, `N.N` (0.1 to 10.0), in tenths; nil when it is not one.
  public static func severityTenths(parsing text: String) -> Int? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard (1...2).contains(parts.count), let whole = Int(parts[0]), parts[0].allSatisfy(\.isASCII),
      parts[0].count <= 2
    else { return nil }
    var tenths = whole * 10
    if parts.count == 2 {
      guard parts[1].count == 1, let tenth = Int(parts[1]), parts[1].allSatisfy(\.isASCII) else { return nil }
      tenths += tenth
    }
    return (1...100).contains(tenths) ? tenths : nil
  }

  /// Whether `id` is written as an OWASP MASVS v2 control id: `MASVS-`, a group in capitals, `-`, a number.
  public static func isMASVSControl(_ id: String) -> Bool {
    let parts = id.split(separator: "-", omittingEmptySubsequences: false)
    return parts.count == 3 && parts[0] == "MASVS" && !parts[1].isEmpty
      && parts[1].allSatisfy { $0.isASCII && $0.isUppercase } && !parts[2].isEmpty
      && parts[2].allSatisfy { $0.isASCII && $0.isNumber }
  }

  /// Whether `id` is written as an OWASP MASTG test id: `MASTG-TEST-` and four digits.
  public static func isMASTGTest(_ id: String) -> Bool {
    id.hasPrefix("MASTG-TEST-") && id.count == 15 && id.suffix(4).allSatisfy { $0.isASCII && $0.isNumber }
  }
}
