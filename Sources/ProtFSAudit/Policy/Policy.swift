import Foundation
import ProtFS
import ProtFSSystem

/// How serious a finding is, in SARIF's and CI's vocabulary.
public enum AuditLevel: String, Sendable, Codable, CaseIterable, Comparable {
  /// Informational: worth knowing, never a defect by itself.
  case note
  /// Probably wrong.
  case warning
  /// Wrong: CI should fail.
  case error

  private var rank: Int {
    switch self {
    case .note: 0
    case .warning: 1
    case .error: 2
    }
  }

  /// Orders note < warning < error.
  public static func < (lhs: AuditLevel, rhs: AuditLevel) -> Bool { lhs.rank < rhs.rank }
}

/// What a rule requires of an item's effective class.
public enum ClassRequirement: Sendable, Hashable, CustomStringConvertible {
  /// Exactly this class.
  case equal(ProtectionClass)
  /// This class or a stronger one (the strength order of docs/semantics.md §1).
  case atLeast(ProtectionClass)
  /// This class or a weaker one.
  case atMost(ProtectionClass)
  /// Any class but this one.
  case notEqual(ProtectionClass)
  /// One of these classes.
  case oneOf(Set<ProtectionClass>)
  /// Any class: a rule that allows what earlier rules forbid (the last matching rule wins).
  case any
  /// The same class as the sibling named like the item without `suffix` (a database's `-wal`, `-shm`, `-journal`).
  case sameAsSiblingWithout(suffix: String)

  /// Whether this is `sameAsSiblingWithout`, which compares with another file rather than a class.
  public var isSibling: Bool {
    if case .sameAsSiblingWithout = self { return true }
    return false
  }

  /// Whether `actual` satisfies the requirement; always true for `sameAsSiblingWithout`, which the auditor checks.
  public func isSatisfied(by actual: ProtectionClass) -> Bool {
    switch self {
    case .equal(let c): actual == c
    case .atLeast(let c): actual >= c
    case .atMost(let c): actual <= c
    case .notEqual(let c): actual != c
    case .oneOf(let set): set.contains(actual)
    case .any, .sameAsSiblingWithout: true
    }
  }

  /// The requirement as the policy language writes it, for example `>= until-first-auth`.
  public var description: String {
    switch self {
    case .equal(let c): "= \(c.shortName)"
    case .atLeast(let c): ">= \(c.shortName)"
    case .atMost(let c): "<= \(c.shortName)"
    case .notEqual(let c): "!= \(c.shortName)"
    case .oneOf(let set): "in {\(set.sorted().map(\.shortName).joined(separator: ", "))}"
    case .any: "any"
    case .sameAsSiblingWithout(let suffix): "same-as-sibling-without \"\(suffix)\""
    }
  }
}

extension ProtectionClass {
  /// The alias when there is one, else the name: what policies and findings print.
  public var shortName: String { alias ?? name }
}

/// One line of a policy: where it applies, what it requires, how bad a violation is, and why.
public struct PolicyRule: Sendable, Hashable {
  /// The stable rule id, for example `DP001` (SARIF's `ruleId`).
  public var id: String
  /// The level of its findings.
  public var level: AuditLevel
  /// The patterns, any of which selects an item.
  public var patterns: [PathPattern]
  /// What the item's effective class must satisfy.
  public var requirement: ClassRequirement
  /// Why the rule exists: the finding's message and the rule's help text.
  public var message: String
  /// The policy it comes from, as given (a file path, or `<built-in default.policy>`).
  public var source: String
  /// Its 1-based line in that policy.
  public var line: Int
  /// How its findings rank as security findings: what the rule writes after its message
  /// (`cwe=311 ...`), and `AuditRuleSecurity.default(for:)` for what it leaves out.
  public var security: AuditRuleSecurity
}

/// A position in a policy and what is wrong there (an error) or suspicious (a warning).
public struct PolicyDiagnostic: Error, Sendable, Equatable, CustomStringConvertible {
  /// The policy, as given.
  public var source: String
  /// 1-based line.
  public var line: Int
  /// 1-based column, in bytes.
  public var column: Int
  /// The message, starting with "expected …" for syntax errors.
  public var message: String

  /// `file:line:column: message`, as compilers print it.
  public var description: String { "\(source):\(line):\(column): \(message)" }
}

/// A parsed policy file: its rules in order (the last matching rule wins) and its warnings.
public struct Policy: Sendable {
  /// Where it came from, as given.
  public var source: String
  /// The rules, in file order.
  public var rules: [PolicyRule]
  /// Things that parse but cannot be what the author meant (a pattern that can never match).
  public var warnings: [PolicyDiagnostic]

  /// The name `--policy` shows for the built-in default.
  public static let builtInSource = "<built-in default.policy>"

  /// The policy shipped as `Policies/default.policy`, compiled into the library.
  public static let builtInDefault: Policy = {
    do {
      return try Policy(parsing: DefaultPolicyText.text, source: builtInSource)
    } catch {
      // The embedded text is tested to parse: a failure here is a build defect, not user input.
      preconditionFailure("The built-in default policy does not parse: \(error)")
    }
  }()

  /// The longest line a policy may have: long enough for any real rule, short enough to report garbage clearly.
  public static let maximumLineLength = 64 * 1024
  /// The largest policy file read.
  public static let maximumFileSize = 16 * 1024 * 1024

  /// Parses policy text; throws the first syntax error with its line and column.
  public init(parsing text: String, source: String) throws(PolicyDiagnostic) {
    self.source = source
    rules = []
    warnings = []
    var parser = PolicyParser(source: source)
    var lineNumber = 0
    var lineStart = text.utf8.startIndex
    let utf8 = text.utf8
    while lineStart < utf8.endIndex || lineNumber == 0 {
      lineNumber += 1
      let lineEnd = utf8[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? utf8.endIndex
      let line = utf8[lineStart..<lineEnd]
      if line.count > Self.maximumLineLength {
        throw PolicyDiagnostic(
          source: source, line: lineNumber, column: Self.maximumLineLength + 1,
          message:
            "expected a line of at most \(Self.maximumLineLength) bytes; this one has \(line.count) (is this a policy file?)"
        )
      }
      if let rule = try parser.parseLine(Array(line), number: lineNumber) { rules.append(rule) }
      if lineEnd == utf8.endIndex { break }
      lineStart = utf8.index(after: lineEnd)
    }
    warnings = parser.warnings + Self.shadowingWarnings(rules, source: source)
  }

  /// Reads and parses the policy file at `path`.
  public init(contentsOf path: String) throws(ProtFSError) {
    // The user's own file: a link to it, or a pipe (`<(...)`), is read like the file itself.
    let bytes: [UInt8]
    switch Kernel.readNamedFile(path, limit: Self.maximumFileSize) {
    case .success(let read): bytes = read
    case .failure(let failure):
      var errno: Errno?
      if case .unreadable(let error) = failure { errno = error }
      throw ProtFSError(
        errno.map { ProtFSError.system("read", path: path, errno: $0).code } ?? .malformed,
        "Cannot read the policy file '\(path)': \(failure.reason).", path: path, errno: errno?.rawValue,
        remedy: .advice("give the path of a .policy file (see Policies/README.md)"))
    }
    guard let text = String(validating: bytes, as: UTF8.self) else {
      let offset = Self.firstInvalidUTF8Offset(bytes)
      let line = bytes[..<offset].count(where: { $0 == UInt8(ascii: "\n") }) + 1
      let lineStart = bytes[..<offset].lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? 0
      throw ProtFSError(
        .malformed, "\(path):\(line):\(offset - lineStart + 1): expected UTF-8 text.", path: path)
    }
    do {
      try self.init(parsing: text, source: path)
    } catch {
      throw ProtFSError(.malformed, error.description, path: path)
    }
  }

  private static func firstInvalidUTF8Offset(_ bytes: [UInt8]) -> Int {
    var index = 0
    while index < bytes.count {
      guard let (scalar, next) = PathPattern.decodeScalar(bytes, at: index), scalar & 0x8000_0000 == 0 else {
        return index
      }
      index = next
    }
    return bytes.count
  }

  /// Rules that a later rule always overrides can never produce a finding (the last match wins).
  ///
  /// A later rule hides a rule when it has a pattern that matches everything, or when its patterns
  /// include every pattern of the rule. Walking back from the last rule, each pattern keeps the
  /// rules after the current one that have it, nearest last. A rule is then checked only against
  /// the rules that have its rarest pattern, nearest first, instead of against every later rule:
  /// distinct and repeated rules cost one look-up each, and no policy costs more than about
  /// n·√n subset checks (20,000 rules load in a fraction of a second; it was quadratic).
  private static func shadowingWarnings(_ rules: [PolicyRule], source: String) -> [PolicyDiagnostic] {
    var warnings: [PolicyDiagnostic] = []
    var nearestMatchingEverything: Int?
    var laterRulesWith: [PathPattern: [Int]] = [:]
    let patternSets: [Set<PathPattern>] = rules.map { Set($0.patterns) }
    for index in rules.indices.reversed() {
      let rule = rules[index]
      let patterns = patternSets[index]
      var hiddenBy = nearestMatchingEverything
      let rarest = patterns.min { laterRulesWith[$0, default: []].count < laterRulesWith[$1, default: []].count }
      if let rarest, let candidates = laterRulesWith[rarest],
        let nearest = candidates.reversed().first(where: { patterns.isSubset(of: patternSets[$0]) })
      {
        hiddenBy = min(hiddenBy ?? nearest, nearest)
      }
      if let hiddenBy {
        let later = rules[hiddenBy]
        warnings.append(
          PolicyDiagnostic(
            source: source, line: rule.line, column: 1,
            message:
              "warning: rule \(rule.id) can never match: rule \(later.id) on line \(later.line) matches every path it does and comes later (the last matching rule wins)"
          ))
      }
      if rule.patterns.contains(where: \.matchesEverything) { nearestMatchingEverything = index }
      for pattern in patterns { laterRulesWith[pattern, default: []].append(index) }
    }
    return warnings.reversed()
  }
}

extension ProtFSError {
  /// The message without the quoted path prefix, for wrapping in another sentence.
  package var reasonText: String {
    if let errno { return String(cString: strerror(errno)).lowercased() }
    return message.hasSuffix(".") ? String(message.dropLast()) : message
  }
}
