import Foundation
import ProtFS

/// Text for people: a heading per container with findings, one line per finding in aligned
/// columns (level, rule id, path in the container, message), errors first, then by path and rule
/// id; then the security mapping of every rule that reported, and the totals.
///
/// Sorting needs a container's findings together, so this reporter keeps one container's findings
/// (never the tree) until the next container starts.
public final class TextAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var rules: [String: AuditRuleDescription] = [:]
  private var idWidth = 0
  private var heading: String?
  private var findings: [AuditFinding] = []
  private var reported: Set<String> = []

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// Remembers the rules, and how wide their ids are, so that every container's columns line up.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {
    for rule in rules { self.rules[rule.id] = rule }
    idWidth = rules.map(\.id.count).max() ?? 0
  }

  /// Writes the previous container's findings, and remembers this one's heading.
  public func beginContainer(_ unit: AuditTarget.Unit) {
    writeContainer()
    heading = "\(unit.name) (\(unit.reportLocation))"
  }

  /// Keeps the finding until its container is done.
  public func report(_ finding: AuditFinding) {
    findings.append(finding)
    reported.insert(finding.ruleID)
  }

  /// The last container, the mapping of the rules that reported, and the totals.
  public func finish(_ summary: AuditSummary) {
    writeContainer()
    let found = reported.sorted { Self.precedes(level(of: $0), $0, level(of: $1), $1) }
    if !found.isEmpty {
      let width = max(idWidth, found.map(\.count).max() ?? 0)
      let ranks = found.map { id in security(of: id).map { "\($0.rating) \($0.severity)" } ?? "-" }
      let rankWidth = ranks.map(\.count).max() ?? 0
      output.write("\nSecurity severity, CWE, MASVS and MASTG of the rules above:\n")
      for (id, rank) in zip(found, ranks) {
        let security = security(of: id)
        let references = security.map { $0.cweIDs + $0.masvs + $0.mastg } ?? []
        let line =
          "  \(Self.pad(id, width))  \(Self.pad(rank, rankWidth))  "
          + (references.isEmpty ? "-" : references.joined(separator: ", "))
        output.write(TerminalText.escaped(line) + "\n")
      }
      output.write("\n")
    }
    func plural(_ count: Int, _ word: String) -> String { "\(count) \(word)\(count == 1 ? "" : "s")" }
    let errors = summary.findings[.error] ?? 0
    let warnings = summary.findings[.warning] ?? 0
    let notes = summary.findings[.note] ?? 0
    var line = "\(plural(errors, "error")), \(plural(warnings, "warning")), \(plural(notes, "note")) in "
    line += "\(plural(summary.containers, "container")) (\(plural(summary.items, "item")))."
    if summary.incomplete { line += " The audit is incomplete: part of the tree could not be read." }
    output.write(line + "\n")
    output.flush()
  }

  /// The container's heading and its findings, sorted: errors first, then by path, then by rule id.
  private func writeContainer() {
    defer {
      heading = nil
      findings.removeAll(keepingCapacity: false)
    }
    guard let heading, !findings.isEmpty else { return }
    findings.sort { a, b in
      if a.level != b.level { return a.level > b.level }
      let pathA = a.pathBytes[a.containerPathOffset...]
      let pathB = b.pathBytes[b.containerPathOffset...]
      if pathA != pathB { return pathA.lexicographicallyPrecedes(pathB) }
      return a.ruleID < b.ruleID
    }
    // The names in a container are the app's, and reach a terminal: escaped (TerminalText).
    output.write(TerminalText.escaped(heading) + "\n")
    let width = max(idWidth, findings.map(\.ruleID.count).max() ?? 0)
    for finding in findings {
      let line =
        "  \(Self.pad(finding.level.rawValue, 7))  \(Self.pad(finding.ruleID, width))  "
        + "\(finding.containerPath): \(finding.message)"
      output.write(TerminalText.escaped(line) + "\n")
    }
  }

  private func level(of id: String) -> AuditLevel { rules[id]?.level ?? .note }

  private func security(of id: String) -> AuditRuleSecurity? { rules[id]?.security }

  /// Errors first, then by id.
  private static func precedes(_ levelA: AuditLevel, _ a: String, _ levelB: AuditLevel, _ b: String) -> Bool {
    levelA != levelB ? levelA > levelB : a < b
  }

  private static func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
  }
}

extension AuditTarget.Unit {
  /// Where reports say the container is: relative to its device (`Containers/ID`) when it is in
  /// one, whether the device, the container or `--bundle` was audited; else relative to the
  /// audited directory (`.` when it is the container).
  package var reportLocation: String {
    if let device, absolutePath.hasPrefix(device.root + "/") {
      return String(absolutePath.dropFirst(device.root.count + 1))
    }
    return displayPrefix.isEmpty ? "." : String(displayPrefix.dropLast())
  }
}

/// JSON for scripts: `{"root": …, "findings": [ … ], "summary": { … }}`, written as findings arrive.
public final class JSONAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var first = true
  /// Each rule's security fields, as the bytes that follow `"actual"` in its findings: made once,
  /// since a report may hold millions of findings of a few rules.
  private var securityFields: [String: [UInt8]] = [:]

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// `, "securitySeverity": 7.5, "cwe": [...], "masvs": [...], "mastg": [...]` for `security`.
  private static func fields(_ security: AuditRuleSecurity) -> [UInt8] {
    func list(_ items: [String]) -> String { "[" + items.map { Escape.json($0) }.joined(separator: ", ") + "]" }
    let text =
      ", \"securitySeverity\": \(security.severity), \"cwe\": \(list(security.cweIDs)), "
      + "\"masvs\": \(list(security.masvs)), \"mastg\": \(list(security.mastg))"
    return Array(text.utf8)
  }

  /// Opens the object and the findings array.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {
    for rule in rules { securityFields[rule.id] = Self.fields(rule.security) }
    output.write("{\n  \"tool\": \"protfs\",\n  \"version\": \(Escape.json(ProtFSVersion.current)),\n")
    output.write("  \"root\": \(Escape.json(target.root)),\n  \"findings\": [")
  }

  /// Nothing: the container is a field of each finding.
  public func beginContainer(_ unit: AuditTarget.Unit) {}

  /// One finding per line.
  public func report(_ finding: AuditFinding) {
    let opening: StaticString = first ? "\n    {\"ruleId\": " : ",\n    {\"ruleId\": "
    first = false
    output.withBuffer { buffer in
      Escape.append(opening, to: &buffer)
      Escape.appendJSON(finding.ruleID, to: &buffer)
      Escape.append(", \"level\": ", to: &buffer)
      Escape.appendJSON(finding.level.rawValue, to: &buffer)
      Escape.append(", \"container\": ", to: &buffer)
      Escape.appendJSON(finding.container, to: &buffer)
      Escape.append(", \"path\": ", to: &buffer)
      Escape.appendJSONPath(finding.pathBytes[...], to: &buffer)
      Escape.append(", \"message\": ", to: &buffer)
      Escape.appendJSON(finding.message, to: &buffer)
      Escape.append(", \"expected\": ", to: &buffer)
      Escape.appendJSON(finding.expected, to: &buffer)
      Escape.append(", \"actual\": ", to: &buffer)
      Escape.appendJSON(finding.actual, to: &buffer)
      buffer.append(
        contentsOf: securityFields[finding.ruleID] ?? Self.fields(AuditRuleSecurity.default(for: finding.level)))
      Escape.append("}", to: &buffer)
    }
  }

  /// Closes the array and writes the summary.
  public func finish(_ summary: AuditSummary) {
    output.write(first ? "],\n" : "\n  ],\n")
    output.write(
      "  \"summary\": {\"containers\": \(summary.containers), \"items\": \(summary.items), "
        + "\"errors\": \(summary.findings[.error] ?? 0), \"warnings\": \(summary.findings[.warning] ?? 0), "
        + "\"notes\": \(summary.findings[.note] ?? 0), \"complete\": \(!summary.incomplete)}\n}\n")
    output.flush()
  }
}
