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

/// SARIF 2.1.0 as code scanning reads it (GitHub's required fields included): one run, the rules
/// with help text and help URIs, results with a file-level region and `partialFingerprints`,
/// streamed. Locations are relative to the audited root (`AUDITROOT`), or to a `SARIFRoot` (`SRCROOT`,
/// the repository checkout) so that an alert points at the file in the repository.
public final class SARIFAuditReporter: AuditReporter {
  private let output: AuditOutput
  private let root: SARIFRoot?
  private var first = true
  private var ruleIndex: [String: Int] = [:]
  /// The audited root's path below the base, as bytes, prefixed to every finding's path.
  private let prefix: [UInt8]
  private let baseID: String

  /// GitHub's limits on rule texts; longer ones make it reject the upload.
  private static let maxNameLength = 255
  private static let maxDescriptionLength = 1024

  /// Writes to `output`; locations are relative to `root` when given, else to the audited root.
  public init(_ output: AuditOutput, root: SARIFRoot? = nil) {
    self.output = output
    self.root = root
    prefix = Array((root?.auditedRootPrefix ?? "").utf8)
    baseID = root == nil ? "AUDITROOT" : "SRCROOT"
  }

  /// The log, the tool with its rules, and the opening of `results`.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {
    output.write("{\n  \"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\",\n  \"version\": \"2.1.0\",\n")
    output.write("  \"runs\": [\n    {\n      \"tool\": {\n        \"driver\": {\n")
    output.write("          \"name\": \"protfs\",\n          \"version\": \(Escape.json(ProtFSVersion.current)),\n")
    output.write("          \"semanticVersion\": \(Escape.json(ProtFSVersion.current)),\n")
    // No informationUri or helpUri: the project has no published address yet, and a link that does
    // not resolve is worse than none. help.markdown carries what docs/audit-rules.md says.
    output.write("          \"rules\": [")
    for (index, rule) in rules.enumerated() {
      ruleIndex[rule.id] = index
      output.write(index == 0 ? "\n" : ",\n")
      let security = rule.security
      let helpText = "\(rule.help)\n\nSecurity: \(security.summary) (precision \(security.precision.rawValue))."
      output.write(
        "            {\"id\": \(Escape.json(rule.id)), \"name\": \(text(rule.name, Self.maxNameLength)), "
          + "\"shortDescription\": {\"text\": \(text(rule.summary, Self.maxDescriptionLength))}, "
          + "\"fullDescription\": {\"text\": \(text(rule.help, Self.maxDescriptionLength))}, "
          + "\"help\": {\"text\": \(Escape.json(helpText)), \"markdown\": \(Escape.json(rule.markdown))}, "
          + "\"defaultConfiguration\": {\"level\": \"\(rule.level.rawValue)\"}, "
          // What code scanning ranks by: security-severity counts only with the tag `security`.
          + "\"properties\": {\"security-severity\": \"\(security.severity)\", "
          + "\"precision\": \"\(security.precision.rawValue)\", "
          + "\"tags\": [\(security.tags.map { Escape.json($0) }.joined(separator: ", "))], "
          + "\"origin\": \(Escape.json(rule.origin))}}")
    }
    output.write("\n          ]\n        }\n      },\n")
    let (base, description) =
      if let root {
        (root.path, "The repository checkout the locations are relative to (--sarif-root).")
      } else {
        (target.root, "The audited directory.")
      }
    let directory = base.hasSuffix("/") ? base : base + "/"
    output.write(
      "      \"originalUriBaseIds\": {\"\(baseID)\": {\"uri\": \(Escape.json("file://" + Escape.uri(Array(directory.utf8)))), "
        + "\"description\": {\"text\": \(Escape.json(description))}}},\n")
    output.write("      \"columnKind\": \"unicodeCodePoints\",\n      \"results\": [")
  }

  /// Nothing: locations say where.
  public func beginContainer(_ unit: AuditTarget.Unit) {}

  /// One result. Every finding is about a whole item, so its region is the item's first line.
  public func report(_ finding: AuditFinding) {
    output.write(first ? "\n        " : ",\n        ")
    first = false
    var properties = "\"container\": \(Escape.json(finding.container))"
    if let expected = finding.expected { properties += ", \"expected\": \(Escape.json(expected))" }
    if let actual = finding.actual { properties += ", \"actual\": \(Escape.json(actual))" }
    let path = prefix + finding.pathBytes
    let uri = path.isEmpty ? "./" : Escape.uri(path)
    let fingerprint = finding.fingerprint
    var result = "{\"ruleId\": \(Escape.json(finding.ruleID)), "
    if let index = ruleIndex[finding.ruleID] { result += "\"ruleIndex\": \(index), " }
    result +=
      "\"level\": \"\(finding.level.rawValue)\", \"message\": {\"text\": \(Escape.json(finding.message))}, "
      + "\"locations\": [{\"physicalLocation\": {\"artifactLocation\": {\"uri\": \(Escape.json(uri)), \"uriBaseId\": \"\(baseID)\"}, "
      + "\"region\": {\"startLine\": 1, \"startColumn\": 1, \"endLine\": 1, \"endColumn\": 1}}}], "
      // GitHub matches alerts across runs by primaryLocationLineHash: the item's fingerprint, so that
      // editing the file does not close the alert and open another.
      + "\"partialFingerprints\": {\"primaryLocationLineHash\": \"\(fingerprint):1\", \"protfsItem/v1\": \"\(fingerprint)\"}, "
      + "\"properties\": {\(properties)}}"
    output.write(result)
  }

  /// Closes `results` and records whether the run completed.
  public func finish(_ summary: AuditSummary) {
    output.write(first ? "],\n" : "\n      ],\n")
    output.write(
      "      \"invocations\": [{\"executionSuccessful\": \(!summary.incomplete)}],\n"
        + "      \"properties\": {\"containers\": \(summary.containers), \"items\": \(summary.items)}\n    }\n  ]\n}\n")
    output.flush()
  }

  /// `text` as a JSON string of at most `limit` characters, cut with an ellipsis.
  private func text(_ text: String, _ limit: Int) -> String {
    Escape.json(text.count <= limit ? text : text.prefix(limit - 1) + "…")
  }
}

/// JUnit XML as test dashboards read it: a test suite per container, holding a failing test case per
/// finding at or above `--fail-on` (an error case per part of the tree that could not be read) and
/// a passing case per checked rule with nothing to fail. Notes, and findings below `--fail-on`, are
/// that passing case's `<system-out>`: the suites are red exactly when the audit fails.
///
/// The totals open the document, so this reporter keeps the findings (not the tree) in memory.
public final class JUnitAuditReporter: AuditReporter {
  private struct Suite {
    var unit: AuditTarget.Unit
    var findings: [String: [AuditFinding]] = [:]
  }

  private let output: AuditOutput
  private let options: AuditReportOptions
  private var rules: [AuditRuleDescription] = []
  private var suites: [Suite] = []

  /// Writes to `output`; `options.failOn` decides which findings fail their test case.
  public init(_ output: AuditOutput, options: AuditReportOptions = AuditReportOptions()) {
    self.output = output
    self.options = options
  }

  /// Remembers the rules.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) { self.rules = rules }

  /// Opens the container's suite.
  public func beginContainer(_ unit: AuditTarget.Unit) { suites.append(Suite(unit: unit)) }

  /// Keeps the finding in its container's suite.
  public func report(_ finding: AuditFinding) {
    guard !suites.isEmpty else { return }
    suites[suites.count - 1].findings[finding.ruleID, default: []].append(finding)
  }

  /// Writes the whole document.
  public func finish(_ summary: AuditSummary) {
    var tests = 0
    var failures = 0
    var errors = 0
    var body = ""
    for suite in suites {
      let (text, counts) = render(suite)
      body += text
      tests += counts.tests
      failures += counts.failures
      errors += counts.errors
    }
    output.write("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
    output.write(
      "<testsuites name=\"protfs audit\" tests=\"\(tests)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\">\n"
    )
    output.write(body)
    output.write("</testsuites>\n")
    output.flush()
  }

  /// One container's suite and its counts.
  private func render(_ suite: Suite) -> (String, (tests: Int, failures: Int, errors: Int)) {
    let unit = suite.unit
    // The rules checked in this container, and any other rule that reported there all the same.
    let checked = rules.filter { rule in
      BuiltInCheck(rawValue: rule.id)?.applies(to: unit) ?? unit.isDirectory || suite.findings[rule.id] != nil
    }
    let classname = Escape.xml(unit.name)
    var cases = ""
    var tests = 0
    var failures = 0
    var errors = 0
    for rule in checked {
      let found = suite.findings[rule.id] ?? []
      // A part of the tree that could not be read is a check that could not run: a JUnit error.
      let isError = rule.id == BuiltInCheck.unreadable.rawValue
      let failing = found.filter { isError || options.fails($0.level) }
      let quiet = found.filter { !(isError || options.fails($0.level)) }
      var output = ""
      if !quiet.isEmpty {
        let lines = quiet.map { "\($0.level.rawValue): \($0.containerPath): \($0.message)\n" }.joined()
        output = "      <system-out>\(Escape.xml(lines))</system-out>\n"
      }
      if failing.isEmpty {
        tests += 1
        let name = Escape.xml("\(rule.id) \(rule.name)")
        cases +=
          output.isEmpty
          ? "    <testcase classname=\"\(classname)\" name=\"\(name)\"/>\n"
          : "    <testcase classname=\"\(classname)\" name=\"\(name)\">\n\(output)    </testcase>\n"
        continue
      }
      for (index, finding) in failing.enumerated() {
        tests += 1
        if isError { errors += 1 } else { failures += 1 }
        var text = "\(rule.id) \(rule.name) at \(finding.path)\n\(finding.message)"
        if let expected = finding.expected { text += "\nexpected: \(expected)" }
        if let actual = finding.actual { text += "\nactual: \(actual)" }
        text += "\nsecurity: \(rule.security.summary) (precision \(rule.security.precision.rawValue))"
        // A policy rule's message is its help already; a built-in check's help says how to fix it.
        if !finding.message.contains(rule.help) { text += "\n\n\(rule.help)" }
        let element = isError ? "error" : "failure"
        cases +=
          "    <testcase classname=\"\(classname)\" name=\"\(Escape.xml("\(rule.id) \(finding.containerPath)"))\">\n"
        cases +=
          "      <\(element) type=\"\(finding.level.rawValue)\" message=\"\(Escape.xml(finding.message))\">"
          + "\(Escape.xml(text))</\(element)>\n"
        if index == 0 { cases += output }
        cases += "    </testcase>\n"
      }
    }
    let location = unit.reportLocation
    var text =
      "  <testsuite name=\"\(classname)\" tests=\"\(tests)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\">\n"
    // The path, then each reporting rule's mapping: `security DP004` = `high 7.5, CWE-311, ...`.
    text += "    <properties><property name=\"path\" value=\"\(Escape.xml(location))\"/>"
    for rule in checked where suite.findings[rule.id] != nil {
      text += "<property name=\"security \(Escape.xml(rule.id))\" value=\"\(Escape.xml(rule.security.summary))\"/>"
    }
    text += "</properties>\n"
    text += cases + "  </testsuite>\n"
    return (text, (tests, failures, errors))
  }
}
