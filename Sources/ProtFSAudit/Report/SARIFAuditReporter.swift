import Foundation
import ProtFS

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
