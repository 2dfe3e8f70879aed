import ProtFS

/// Parses policy lines (grammar in Policies/README.md):
///
///     rule ID SEVERITY "PATTERN"... REQUIREMENT "MESSAGE"
///
/// REQUIREMENT is `= C`, `>= C`, `<= C`, `!= C`, `in {C, C...}`, `any`, or
/// `same-as-sibling-without "SUFFIX"`. `#` starts a comment outside strings.
package struct PolicyParser {
  package let source: String
  package var warnings: [PolicyDiagnostic] = []
  private var ruleLines: [String: Int] = [:]

  package init(source: String) { self.source = source }

  private struct Token {
    enum Kind: Equatable {
      case word(String)
      case string(String)
      case symbol(String)
      case end
    }
    var kind: Kind
    var column: Int

    var shown: String {
      switch kind {
      case .word(let w): "'\(w.prefix(40))'"
      case .string: "a quoted string"
      case .symbol(let s): "'\(s)'"
      case .end: "the end of the line"
      }
    }
  }

  /// Parses one line; nil for blank and comment lines.
  package mutating func parseLine(_ bytes: [UInt8], number: Int) throws(PolicyDiagnostic) -> PolicyRule? {
    let tokens = try tokenize(bytes, line: number)
    var position = 0
    func next() -> Token {
      defer { position = min(position + 1, tokens.count - 1) }
      return tokens[position]
    }
    func peek() -> Token { tokens[position] }
    func fail(_ token: Token, _ expected: String) -> PolicyDiagnostic {
      PolicyDiagnostic(
        source: source, line: number, column: token.column, message: "expected \(expected), found \(token.shown)")
    }

    let first = next()
    if first.kind == .end { return nil }
    guard first.kind == .word("rule") else { throw fail(first, "'rule' to start a rule") }

    let idToken = next()
    guard case .word(let id) = idToken.kind, Self.isValidID(id) else {
      throw fail(idToken, "a rule id such as DP001 (a letter, then letters, digits, '.', '_' or '-')")
    }
    if let earlier = ruleLines[id] {
      throw PolicyDiagnostic(
        source: source, line: number, column: idToken.column,
        message: "expected a unique rule id; \(id) is already used on line \(earlier)")
    }

    let levelToken = next()
    guard case .word(let levelWord) = levelToken.kind, let level = AuditLevel(rawValue: levelWord.lowercased()) else {
      throw fail(levelToken, "a severity: error, warning or note")
    }

    let patterns = try parsePatterns(next: next, peek: peek, line: number)
    if patterns.isEmpty { throw fail(peek(), "a quoted path pattern such as \"Documents/**\"") }

    let requirement = try parseRequirement(next: next, peek: peek, fail: fail, line: number)

    let messageToken = next()
    guard case .string(let message) = messageToken.kind, !message.isEmpty else {
      throw fail(messageToken, "a quoted message saying why the rule exists")
    }
    let security = try parseSecurity(level: level, next: next, peek: peek, fail: fail, line: number)

    ruleLines[id] = number
    return PolicyRule(
      id: id, level: level, patterns: patterns, requirement: requirement, message: message, source: source,
      line: number, security: security)
  }

  /// The quoted path patterns of a rule, each warned about when it can never match.
  private mutating func parsePatterns(next: () -> Token, peek: () -> Token, line: Int) throws(PolicyDiagnostic)
    -> [PathPattern]
  {
    var patterns: [PathPattern] = []
    while case .string(let text) = peek().kind {
      let token = next()
      do {
        let pattern = try PathPattern(text)
        if let reason = pattern.neverMatchesReason {
          warnings.append(
            PolicyDiagnostic(
              source: source, line: line, column: token.column,
              message: "warning: the pattern \"\(text)\" can never match: \(reason)"))
        }
        patterns.append(pattern)
      } catch {
        // +1 for the opening quote; escapes inside the string make this approximate, which is fine.
        throw PolicyDiagnostic(
          source: source, line: line, column: token.column + 1 + error.offset,
          message: "expected \(error.expected) in the pattern \"\(text.prefix(80))\"")
      }
    }
    return patterns
  }

  /// The `KEY=VALUE` fields after the message, up to the end of the line: `security-severity=7.5`,
  /// `precision=high`, `cwe=311[,922]`, `masvs=MASVS-STORAGE-1[,...]`, `mastg=MASTG-TEST-0299[,...]`,
  /// each at most once; what is not given comes from `AuditRuleSecurity.default(for: level)`.
  private func parseSecurity(
    level: AuditLevel, next: () -> Token, peek: () -> Token, fail: (Token, String) -> PolicyDiagnostic,
    line: Int
  ) throws(PolicyDiagnostic) -> AuditRuleSecurity {
    var security = AuditRuleSecurity.default(for: level)
    var seen: Set<String> = []
    let keys = "security-severity, precision, cwe, masvs or mastg"
    while peek().kind != .end {
      let keyToken = next()
      guard case .word(let key) = keyToken.kind, Self.securityKeys.contains(key) else {
        throw fail(keyToken, "the end of the line, or a field after the message (\(keys)=VALUE)")
      }
      guard seen.insert(key).inserted else {
        throw PolicyDiagnostic(
          source: source, line: line, column: keyToken.column, message: "expected each field once; \(key) is repeated")
      }
      let equals = next()
      guard equals.kind == .symbol("=") else { throw fail(equals, "'=' after \(key)") }
      var values: [(String, Token)] = []
      repeat {
        if !values.isEmpty { _ = next() }
        let valueToken = next()
        guard case .word(let value) = valueToken.kind else { throw fail(valueToken, "a value for \(key)") }
        values.append((value, valueToken))
      } while peek().kind == .symbol(",") && key != "security-severity" && key != "precision"
      try Self.apply(key, values, to: &security, source: source, line: line)
    }
    return security
  }

  /// Sets the field `key` of `security` to `values` (each with its token), or says why they are wrong.
  private static func apply(
    _ key: String, _ values: [(String, Token)], to security: inout AuditRuleSecurity, source: String, line: Int
  ) throws(PolicyDiagnostic) {
    func invalid(_ token: Token, _ expected: String) -> PolicyDiagnostic {
      PolicyDiagnostic(
        source: source, line: line, column: token.column, message: "expected \(expected), found \(token.shown)")
    }
    switch key {
    case "security-severity":
      guard let tenths = AuditRuleSecurity.severityTenths(parsing: values[0].0) else {
        throw invalid(values[0].1, "a security severity from 0.1 to 10.0 (one decimal, such as 7.5)")
      }
      security.severityTenths = tenths
    case "precision":
      guard let precision = AuditRuleSecurity.Precision(rawValue: values[0].0) else {
        throw invalid(values[0].1, "a precision: very-high, high, medium or low")
      }
      security.precision = precision
    case "cwe":
      security.cwe = try values.map { (value, token) throws(PolicyDiagnostic) in
        let digits = value.hasPrefix("CWE-") ? String(value.dropFirst(4)) : value
        guard let number = Int(digits), digits.allSatisfy(\.isASCII), (1...9999).contains(number) else {
          throw invalid(token, "a CWE number such as 311")
        }
        return number
      }
    case "masvs":
      security.masvs = try values.map { (value, token) throws(PolicyDiagnostic) in
        guard AuditRuleSecurity.isMASVSControl(value) else {
          throw invalid(token, "a MASVS control such as MASVS-STORAGE-1")
        }
        return value
      }
    default:
      security.mastg = try values.map { (value, token) throws(PolicyDiagnostic) in
        guard AuditRuleSecurity.isMASTGTest(value) else {
          throw invalid(token, "a MASTG test such as MASTG-TEST-0299")
        }
        return value
      }
    }
  }

  private static let securityKeys: Set<String> = ["security-severity", "precision", "cwe", "masvs", "mastg"]

  private func parseRequirement(
    next: () -> Token, peek: () -> Token, fail: (Token, String) -> PolicyDiagnostic,
    line: Int
  ) throws(PolicyDiagnostic) -> ClassRequirement {
    let token = next()
    func parseClass() throws(PolicyDiagnostic) -> ProtectionClass {
      let classToken = next()
      guard case .word(let word) = classToken.kind else {
        throw fail(classToken, "a protection class (\(Self.classNames))")
      }
      guard let value = ProtectionClass(parsing: word) else {
        var message = "expected a protection class (\(Self.classNames)), found '\(word.prefix(40))'"
        if let near = Suggestion.nearest(to: word.lowercased(), in: ProtectionClass.allCases.flatMap(\.spellings)),
          let suggested = ProtectionClass(parsing: near)
        {
          message += "; did you mean '\(suggested.shortName)'?"
        }
        throw PolicyDiagnostic(source: source, line: line, column: classToken.column, message: message)
      }
      return value
    }
    switch token.kind {
    case .symbol("="): return .equal(try parseClass())
    case .symbol(">="): return .atLeast(try parseClass())
    case .symbol("<="): return .atMost(try parseClass())
    case .symbol("!="): return .notEqual(try parseClass())
    case .word("any"): return .any
    case .word("in"):
      let open = next()
      guard open.kind == .symbol("{") else { throw fail(open, "'{' to start the set of allowed classes") }
      var set: Set<ProtectionClass> = []
      while true {
        set.insert(try parseClass())
        let separator = next()
        if separator.kind == .symbol("}") { break }
        guard separator.kind == .symbol(",") else { throw fail(separator, "',' or '}' in the set of classes") }
      }
      return .oneOf(set)
    case .word("same-as-sibling-without"):
      let suffixToken = next()
      guard case .string(let suffix) = suffixToken.kind, !suffix.isEmpty, !suffix.contains("/") else {
        throw fail(suffixToken, "a quoted, non-empty name suffix such as \"-wal\"")
      }
      return .sameAsSiblingWithout(suffix: suffix)
    default:
      throw fail(
        token,
        "a requirement: = CLASS, >= CLASS, <= CLASS, != CLASS, in {CLASS, ...}, any, or same-as-sibling-without \"SUFFIX\""
      )
    }
  }

  private static let classNames = "none, until-first-auth, when-inactive, unless-open, complete"

  private static func isValidID(_ id: String) -> Bool {
    guard let first = id.unicodeScalars.first, first.properties.isAlphabetic, first.isASCII, id.utf8.count <= 64
    else { return false }
    return id.unicodeScalars.allSatisfy { scalar in
      scalar.isASCII
        && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "._-".unicodeScalars.contains(scalar))
    }
  }

  private func tokenize(_ bytes: [UInt8], line: Int) throws(PolicyDiagnostic) -> [Token] {
    var tokens: [Token] = []
    var i = 0
    func isWordByte(_ b: UInt8) -> Bool {
      switch b {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
        true
      default: false
      }
    }
    while i < bytes.count {
      let b = bytes[i]
      if b == UInt8(ascii: " ") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "\r") {
        i += 1
        continue
      }
      if b == UInt8(ascii: "#") { break }
      let column = i + 1
      if b == UInt8(ascii: "\"") {
        let value = try readString(bytes, at: &i, line: line)
        tokens.append(Token(kind: .string(value), column: column))
        continue
      }
      if isWordByte(b) {
        let start = i
        while i < bytes.count, isWordByte(bytes[i]) { i += 1 }
        tokens.append(Token(kind: .word(String(decoding: bytes[start..<i], as: UTF8.self)), column: column))
        continue
      }
      if (b == UInt8(ascii: ">") || b == UInt8(ascii: "<") || b == UInt8(ascii: "!")) && i + 1 < bytes.count
        && bytes[i + 1] == UInt8(ascii: "=")
      {
        tokens.append(Token(kind: .symbol(String(decoding: bytes[i...(i + 1)], as: UTF8.self)), column: column))
        i += 2
        continue
      }
      if b == UInt8(ascii: "=") || b == UInt8(ascii: "{") || b == UInt8(ascii: "}") || b == UInt8(ascii: ",") {
        tokens.append(Token(kind: .symbol(String(UnicodeScalar(b))), column: column))
        i += 1
        continue
      }
      let shown = b < 0x80 ? "'\(UnicodeScalar(b))'" : "a non-ASCII character"
      throw PolicyDiagnostic(
        source: source, line: line, column: column,
        message: "expected a word, a quoted string or one of = >= <= != { } , — found \(shown)")
    }
    tokens.append(Token(kind: .end, column: i + 1))
    return tokens
  }

  /// The quoted string whose opening quote is at `i`, with `\"` read as a quote and every other
  /// escape kept whole; `i` moves past the closing quote.
  private func readString(_ bytes: [UInt8], at i: inout Int, line: Int) throws(PolicyDiagnostic) -> String {
    let column = i + 1
    var value: [UInt8] = []
    i += 1
    var closed = false
    while i < bytes.count {
      let c = bytes[i]
      if c == UInt8(ascii: "\"") {
        closed = true
        i += 1
        break
      }
      if c == UInt8(ascii: "\\") && i + 1 < bytes.count {
        // `\"` is a quote; every other escape (`\\`, `\*`) is kept whole for the pattern to read.
        if bytes[i + 1] == UInt8(ascii: "\"") {
          value.append(UInt8(ascii: "\""))
        } else {
          value.append(contentsOf: bytes[i...(i + 1)])
        }
        i += 2
        continue
      }
      value.append(c)
      i += 1
    }
    guard closed else {
      throw PolicyDiagnostic(
        source: source, line: line, column: column,
        message: "expected a closing '\"' for the string that starts here")
    }
    return String(decoding: value, as: UTF8.self)
  }
}
