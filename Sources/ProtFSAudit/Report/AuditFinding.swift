import Foundation
import ProtFS
import ProtFSSystem

/// One thing the audit found wrong (or worth noting) about one item.
public struct AuditFinding: Sendable, Equatable {
  /// The stable id of the rule or built-in check, for example `DP004` or `PFS003`.
  public var ruleID: String
  /// How serious it is.
  public var level: AuditLevel
  /// The container's directory name (its bundle id), or the audited directory's name.
  public var container: String
  /// The item's path relative to the audited root as raw bytes (percent-encoded in SARIF URIs).
  public var pathBytes: [UInt8]
  /// Where, in `pathBytes`, the path relative to the container root starts.
  public var containerPathOffset: Int
  /// A whole sentence: what is wrong and why it matters.
  public var message: String
  /// What the rule wanted, for example `>= until-first-auth`; nil when no class is involved.
  public var expected: String?
  /// What the item has, for example `none (own)`; nil when no class is involved.
  public var actual: String?

  /// Creates a finding for the item at `pathBytes` (relative to the audited root), whose path inside
  /// its container starts at `containerPathOffset`.
  public init(
    ruleID: String, level: AuditLevel, container: String, pathBytes: [UInt8], containerPathOffset: Int = 0,
    message: String, expected: String? = nil, actual: String? = nil
  ) {
    self.ruleID = ruleID
    self.level = level
    self.container = container
    self.pathBytes = pathBytes
    self.containerPathOffset = min(containerPathOffset, pathBytes.count)
    self.message = message
    self.expected = expected
    self.actual = actual
  }

  /// The item's path relative to the audited root, with bytes that are not printable UTF-8 escaped as
  /// `\xNN`; `.` for the root itself. Computed on demand: most findings are never shown as text.
  public var path: String { DisplayPath.relative(pathBytes[...]) }

  /// The item's path relative to its container root, escaped the same way.
  public var containerPath: String { DisplayPath.relative(pathBytes[containerPathOffset...]) }

  /// A fingerprint that stays the same across runs and machines while the rule and item do (SARIF `partialFingerprints`).
  public var fingerprint: String {
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in Array(ruleID.utf8) + [0] + Array(container.utf8) + [0] + pathBytes[containerPathOffset...] {
      hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    let hex = String(hash, radix: 16)
    return String(repeating: "0", count: 16 - hex.count) + hex
  }
}

/// A rule as reports describe it: a policy rule or one of protfs's built-in checks.
public struct AuditRuleDescription: Sendable, Equatable {
  /// The stable id.
  public var id: String
  /// A readable name (SARIF `name`): kebab case for a built-in check (`symlink-leaves-container`),
  /// `policy/POLICY/ID` for a policy rule (`policy/default/DP004`).
  public var name: String
  /// The level of its findings.
  public var level: AuditLevel
  /// One sentence saying what it checks.
  public var summary: String
  /// Why it matters and how to fix a finding.
  public var help: String
  /// Where it is defined: `policy-file:line`, or `built-in`.
  public var origin: String
  /// How its findings rank as security findings (CWE, MASVS, MASTG, security severity).
  public var security: AuditRuleSecurity

  /// Creates a description.
  public init(
    id: String, name: String, level: AuditLevel, summary: String, help: String, origin: String,
    security: AuditRuleSecurity
  ) {
    self.id = id
    self.name = name
    self.level = level
    self.summary = summary
    self.help = help
    self.origin = origin
    self.security = security
  }

  /// The rule's documentation in Markdown: SARIF's `help.markdown`, and its section of
  /// docs/audit-rules.md. Prose is wrapped at 100 columns; every link is to CWE's or OWASP's site.
  public var markdown: String {
    var lines = [
      "- Level: \(level.rawValue)",
      "- Security severity: \(security.severity) (\(security.rating))",
      "- Precision: \(security.precision.rawValue)",
    ]
    let cwe = security.cwe.map { "[CWE-\($0)](https://cwe.mitre.org/data/definitions/\($0).html)" }
    let masvs = security.masvs.map { "[\($0)](https://mas.owasp.org/MASVS/controls/\($0)/)" }
    lines.append("- CWE: " + (cwe.isEmpty ? "none" : cwe.joined(separator: ", ")))
    lines.append("- MASVS: " + (masvs.isEmpty ? "none" : masvs.joined(separator: ", ")))
    lines.append("- MASTG: " + (security.mastg.isEmpty ? "none" : security.mastg.joined(separator: ", ")))
    lines.append("- Tags: " + security.tags.map { "`\($0)`" }.joined(separator: ", "))
    lines.append("")
    lines.append(Self.wrap("**What it checks.** \(summary)", width: 100))
    lines.append("")
    lines.append(Self.wrap("**Why it matters, and the fix.** \(help)", width: 100))
    return lines.joined(separator: "\n") + "\n"
  }

  /// `text` broken at spaces into lines of at most `width` characters (a longer word stays whole).
  package static func wrap(_ text: String, width: Int) -> String {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ", omittingEmptySubsequences: true) {
      if !line.isEmpty && line.count + 1 + word.count > width {
        lines.append(line)
        line = ""
      }
      line += (line.isEmpty ? "" : " ") + word
    }
    if !line.isEmpty { lines.append(line) }
    return lines.joined(separator: "\n")
  }
}

extension PolicyRule {
  /// How reports describe the rule: `policy/POLICY/ID` as its name and, as its summary, a sentence
  /// saying what it requires of which items (the policy language's own words are its origin's).
  public var description: AuditRuleDescription {
    AuditRuleDescription(
      id: id, name: "policy/\(policyName)/\(id)", level: level, summary: requirementSentence,
      help: "\(message) \(fixSentence)", origin: "\(source):\(line)", security: security)
  }

  /// How to fix a finding, as a sentence: what class to give the item, and with which command.
  public var fixSentence: String {
    let command = "(protfs set-class CLASS PATH, or the app's FileProtectionType when it creates the item)"
    return switch requirement {
    case .equal(let c): "Fix: give the item class \(c.shortName) \(command)."
    case .atLeast(let c): "Fix: give the item class \(c.shortName) or a stronger one \(command)."
    case .atMost(let c): "Fix: give the item class \(c.shortName) or a weaker one \(command)."
    case .notEqual(let c): "Fix: give the item any class but \(c.shortName) \(command)."
    case .oneOf(let set):
      "Fix: give the item one of the classes \(set.sorted().map(\.shortName).joined(separator: ", ")) \(command)."
    case .any: "Nothing to fix: the rule allows any class (it makes an exception to an earlier rule)."
    case .sameAsSiblingWithout(let suffix):
      "Fix: give the item the class of its sibling named without \"\(suffix)\" \(command)."
    }
  }

  /// The name of the policy it comes from: its file name without `.policy` (`default` for the built-in one).
  public var policyName: String {
    let file = source == Policy.builtInSource ? "default.policy" : (source as NSString).lastPathComponent
    let name = file.hasSuffix(".policy") && file.count > 7 ? String(file.dropLast(7)) : file
    return name.isEmpty ? "policy" : name
  }

  /// What the rule requires, as a sentence: `Items matching "Documents/" or "Documents/**" must have
  /// class until-first-auth or stronger.`
  public var requirementSentence: String {
    let quoted = patterns.map { "\"\($0.text)\"" }
    let which = quoted.count <= 1 ? quoted.joined() : quoted.dropLast().joined(separator: ", ") + " or " + quoted.last!
    let what =
      switch requirement {
      case .equal(let c): "must have class \(c.shortName)"
      case .atLeast(let c): "must have class \(c.shortName) or stronger"
      case .atMost(let c): "must have class \(c.shortName) or weaker"
      case .notEqual(let c): "must not have class \(c.shortName)"
      case .oneOf(let set): "must have one of the classes \(set.sorted().map(\.shortName).joined(separator: ", "))"
      case .any: "may have any class"
      case .sameAsSiblingWithout(let suffix): "must have the class of the sibling named without \"\(suffix)\""
      }
    return "Items matching \(which) \(what)."
  }
}

/// Turns raw path bytes into text a report can show.
package enum DisplayPath {
  /// A relative path for reports: escaped, without a trailing `/`, `.` when empty.
  package static func relative(_ bytes: ArraySlice<UInt8>) -> String {
    var bytes = bytes
    if bytes.last == UInt8(ascii: "/") { bytes.removeLast() }
    return bytes.isEmpty ? "." : text(bytes)
  }

  /// UTF-8 as is, except control characters and bytes that are not UTF-8, which become `\xNN`
  /// (`DisplayText.escaping`, as every command shows such names).
  package static func text(_ bytes: some Collection<UInt8>) -> String { DisplayText.escaping(bytes) }

  /// Whether `bytes` are valid UTF-8.
  package static func isValidUTF8(_ bytes: some Collection<UInt8>) -> Bool {
    if bytes.allSatisfy({ $0 < 0x80 }) { return true }
    return String(validating: Array(bytes), as: UTF8.self) != nil
  }
}
