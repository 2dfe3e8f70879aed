import Foundation
import ProtFS

/// Text for people: a heading per container, one line per finding, a summary line.
public final class TextAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var containerHasFindings = false
  private var pendingHeading: String?

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// Nothing to write before the first container.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {}

  /// Remembers the heading; it is written only if the container has findings.
  public func beginContainer(_ unit: AuditTarget.Unit) {
    let location = unit.displayPrefix.isEmpty ? unit.absolutePath : String(unit.displayPrefix.dropLast())
    pendingHeading = "\(unit.name) (\(location))"
  }

  /// One line: level, rule, path, message; expected/actual in the message already.
  public func report(_ finding: AuditFinding) {
    if let heading = pendingHeading {
      output.write(heading + "\n")
      pendingHeading = nil
    }
    let level = finding.level.rawValue.padding(toLength: 7, withPad: " ", startingAt: 0)
    output.write("  \(level) \(finding.ruleID)  \(finding.containerPath): \(finding.message)\n")
  }

  /// The totals.
  public func finish(_ summary: AuditSummary) {
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
}

/// JSON for scripts: `{"root": …, "findings": [ … ], "summary": { … }}`, written as findings arrive.
public final class JSONAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var first = true

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// Opens the object and the findings array.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {
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

/// SARIF 2.1.0: one run, the rules with help text, results with `partialFingerprints`, streamed.
public final class SARIFAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var first = true
  private var ruleIndex: [String: Int] = [:]

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// The log, the tool with its rules, and the opening of `results`.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) {
    output.write("{\n  \"$schema\": \"https://json.schemastore.org/sarif-2.1.0.json\",\n  \"version\": \"2.1.0\",\n")
    output.write("  \"runs\": [\n    {\n      \"tool\": {\n        \"driver\": {\n")
    output.write("          \"name\": \"protfs\",\n          \"version\": \(Escape.json(ProtFSVersion.current)),\n")
    output.write("          \"rules\": [")
    for (index, rule) in rules.enumerated() {
      ruleIndex[rule.id] = index
      output.write(index == 0 ? "\n" : ",\n")
      output.write(
        "            {\"id\": \(Escape.json(rule.id)), \"name\": \(Escape.json(rule.name)), "
          + "\"shortDescription\": {\"text\": \(Escape.json(rule.summary))}, "
          + "\"fullDescription\": {\"text\": \(Escape.json(rule.help))}, "
          + "\"help\": {\"text\": \(Escape.json(rule.help))}, "
          + "\"defaultConfiguration\": {\"level\": \"\(rule.level.rawValue)\"}, "
          + "\"properties\": {\"origin\": \(Escape.json(rule.origin))}}")
    }
    output.write("\n          ]\n        }\n      },\n")
    let base = target.root.hasSuffix("/") ? target.root : target.root + "/"
    output.write(
      "      \"originalUriBaseIds\": {\"AUDITROOT\": {\"uri\": \(Escape.json("file://" + Escape.uri(Array(base.utf8))))}},\n"
    )
    output.write("      \"columnKind\": \"unicodeCodePoints\",\n      \"results\": [")
  }

  /// Nothing: locations say where.
  public func beginContainer(_ unit: AuditTarget.Unit) {}

  /// One result.
  public func report(_ finding: AuditFinding) {
    output.write(first ? "\n        " : ",\n        ")
    first = false
    var properties = "\"container\": \(Escape.json(finding.container))"
    if let expected = finding.expected { properties += ", \"expected\": \(Escape.json(expected))" }
    if let actual = finding.actual { properties += ", \"actual\": \(Escape.json(actual))" }
    let uri = finding.pathBytes.isEmpty ? "./" : Escape.uri(finding.pathBytes)
    var result = "{\"ruleId\": \(Escape.json(finding.ruleID)), "
    if let index = ruleIndex[finding.ruleID] { result += "\"ruleIndex\": \(index), " }
    result +=
      "\"level\": \"\(finding.level.rawValue)\", \"message\": {\"text\": \(Escape.json(finding.message))}, "
      + "\"locations\": [{\"physicalLocation\": {\"artifactLocation\": {\"uri\": \(Escape.json(uri)), \"uriBaseId\": \"AUDITROOT\"}}}], "
      + "\"partialFingerprints\": {\"protfsItem/v1\": \"\(finding.fingerprint)\"}, "
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
}

/// JUnit XML: a test case per rule (passing when it found nothing), a failure per finding.
///
/// JUnit needs each rule's failures together, so this reporter keeps the findings (not the tree) in memory.
public final class JUnitAuditReporter: AuditReporter {
  private let output: AuditOutput
  private var rules: [AuditRuleDescription] = []
  private var findings: [String: [AuditFinding]] = [:]

  /// Writes to `output`.
  public init(_ output: AuditOutput) { self.output = output }

  /// Remembers the rules.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) { self.rules = rules }

  /// Nothing: each failure names its container.
  public func beginContainer(_ unit: AuditTarget.Unit) {}

  /// Keeps the finding for its rule's test case.
  public func report(_ finding: AuditFinding) { findings[finding.ruleID, default: []].append(finding) }

  /// Writes the whole document.
  public func finish(_ summary: AuditSummary) {
    let failures = findings.values.reduce(0) { $0 + $1.count }
    let errors = summary.incomplete ? 1 : 0
    output.write("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n")
    output.write(
      "<testsuites name=\"protfs audit\" tests=\"\(rules.count)\" failures=\"\(failures)\" errors=\"\(errors)\">\n")
    output.write(
      "  <testsuite name=\"protfs audit\" tests=\"\(rules.count)\" failures=\"\(failures)\" errors=\"\(errors)\" skipped=\"0\">\n"
    )
    for rule in rules {
      let name = Escape.xml("\(rule.id) \(rule.name)")
      let classname = rule.origin == "built-in" ? "protfs.builtin" : "protfs.policy"
      let found = findings[rule.id] ?? []
      if found.isEmpty {
        output.write("    <testcase classname=\"\(classname)\" name=\"\(name)\"/>\n")
        continue
      }
      output.write("    <testcase classname=\"\(classname)\" name=\"\(name)\">\n")
      for finding in found {
        var body = "\(finding.container): \(finding.containerPath)\n\(finding.message)"
        if let expected = finding.expected { body += "\nexpected: \(expected)" }
        if let actual = finding.actual { body += "\nactual: \(actual)" }
        output.write(
          "      <failure type=\"\(finding.level.rawValue)\" message=\"\(Escape.xml(finding.path))\">\(Escape.xml(body))</failure>\n"
        )
      }
      output.write("    </testcase>\n")
    }
    output.write("  </testsuite>\n</testsuites>\n")
    output.flush()
  }
}
