import Foundation
import ProtFS

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
        let text = Self.details(of: finding, rule)
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

  /// The text of a failing case: the rule, where, the message, what was expected and found, the
  /// security mapping and how to fix it.
  private static func details(of finding: AuditFinding, _ rule: AuditRuleDescription) -> String {
    var text = "\(rule.id) \(rule.name) at \(finding.path)\n\(finding.message)"
    if let expected = finding.expected { text += "\nexpected: \(expected)" }
    if let actual = finding.actual { text += "\nactual: \(actual)" }
    text += "\nsecurity: \(rule.security.summary) (precision \(rule.security.precision.rawValue))"
    // A policy rule's message is its help already; a built-in check's help says how to fix it.
    if !finding.message.contains(rule.help) { text += "\n\n\(rule.help)" }
    return text
  }
}
