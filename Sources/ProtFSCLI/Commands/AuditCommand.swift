import Foundation
import ProtFS
import ProtFSAudit
import ProtFSSystem

/// `protfs audit [PATH...]`: checks containers against policies, for people and for CI.
package enum AuditCommand {
  package static let command = Command(
    name: "audit",
    abstract: "Check containers against protection-class policies (for CI).",
    discussion: """
      Walks each container (PATH may be a container directory or a whole device; --bundle ID: that
      app's container on the device; default: the whole device) and checks every item's effective protection class against the policies
      (default: the built-in Policies/default.policy), plus built-in checks: corrupt classes, items
      still locked out although the device's lock state makes their class available, protected
      files readable by others, symlinks leaving the container or looping, orphan
      background-download temp files, names that are not UTF-8, and items with no class of their
      own. The policy format and the check ids are described in Policies/README.md.

      Exit status: 0 when no finding is at or above --fail-on, 1 when one is, 2 when the audit
      could not run or could not read the whole tree.
      """,
    arguments: [paths],
    options: [bundle, policy, entitlements, format, output, failOn],
    run: run
  )

  /// `[<path> ...]`.
  package static let paths = Argument(
    name: "path", help: "A container or device directory (default: the current device).", arity: .zeroOrMore)
  /// `--bundle BUNDLE-ID`: the app's container on the device, instead of PATHs.
  package static let bundle = Option.value(
    "bundle", "bundle-id", help: "Audit this app's container on the device (instead of PATHs).")
  /// `--policy FILE`, repeatable.
  package static let policy = Option.value(
    "policy", "file", help: "A policy file; repeat to apply several (default: the built-in default policy).",
    repeatable: true)
  /// `--entitlements FILE`.
  package static let entitlements = Option.value(
    "entitlements", "file", help: "Compare each container's default class with this entitlements plist.")
  /// `--format FORMAT`.
  package static let format = Option.value("format", "format", help: "text, json, sarif or junit (default: text).")
  /// `--output FILE`, `-o`.
  package static let output = Option.value(
    "output", short: "o", "file", help: "Write the report to this file instead of standard output.")
  /// `--fail-on LEVEL`.
  package static let failOn = Option.value(
    "fail-on", "level", help: "Exit 1 for findings at this level or above: error, warning or note (default: error).")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let format = try parse(Self.format, default: "text", as: AuditFormat.self, invocation)
    let failOn = try parse(Self.failOn, default: "error", as: AuditLevel.self, invocation)
    let bundleID = try invocation.value(Self.bundle).map(invocation.bundleID)
    if bundleID != nil && !invocation.arguments(Self.paths).isEmpty {
      throw invocation.usageError("Give either --bundle or PATHs to audit, not both.")
    }
    do {
      return try audit(invocation, bundleID: bundleID, format: format, failOn: failOn)
    } catch {
      // Whatever stopped the audit, CI must tell it apart from findings: exit status 2.
      throw ExitStatus(code: 2, message: invocation.describe(error))
    }
  }

  /// Audits `bundleID`'s container, else the PATHs, else the device.
  private static func audit(_ invocation: Invocation, bundleID: BundleID?, format: AuditFormat, failOn: AuditLevel)
    throws(ProtFSError) -> Int32
  {
    var policies: [Policy] = []
    for path in invocation.values(Self.policy) {
      let policy = try Policy(contentsOf: path)
      for warning in policy.warnings { Console.err(warning.description) }
      policies.append(policy)
    }
    if policies.isEmpty { policies = [Policy.builtInDefault] }

    var entitlementsDefault: ProtectionClass?
    if let path = invocation.value(Self.entitlements) {
      entitlementsDefault = try Entitlements(contentsOf: path).defaultDataProtection
      if entitlementsDefault == nil {
        Console.err("note: '\(path)' does not set \(Entitlements.defaultDataProtectionKey); no default to compare.")
      }
    }

    var paths = invocation.arguments(Self.paths)
    if let bundleID {
      let device = invocation.device
      try device.requireInitialized()
      let container = device.container(bundleID)
      try container.requireExists()
      paths = [container.absolutePath]
    } else if paths.isEmpty {
      let device = invocation.device
      try device.requireInitialized()
      paths = [device.root]
    }
    let target = try AuditTarget.resolve(paths)

    // PROTFS_AUDIT_THREADS tunes the walk for benchmarks; 2 threads suit the 2-core machines it was measured on.
    let threads = invocation.environment["PROTFS_AUDIT_THREADS"].flatMap(Int.init) ?? 2
    let configuration = AuditConfiguration(
      policies: policies, entitlementsDefault: entitlementsDefault,
      // The same hook the cache commands use: wiring the task store there wires it here too.
      downloadTasks: { device in DownloadTasks.directory(for: device) }, threads: min(max(threads, 1), 64))
    try configuration.validate()

    let fd: Int32
    let outputName: String
    if let path = invocation.value(Self.output) {
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
      if fd < 0 { throw ProtFSError.system("write the report to", path: path, errno: errno) }
      outputName = path
    } else {
      fflush(nil)
      fd = STDOUT_FILENO
      outputName = "standard output"
    }
    defer { if fd != STDOUT_FILENO { close(fd) } }

    let output = AuditOutput(fileDescriptor: fd, description: outputName)
    let total = try Auditor(configuration).run(target, reporter: format.reporter(output))
    if let error = output.writeError { throw error }
    if total.incomplete {
      Console.err(
        "Error: the audit is incomplete: part of the tree could not be read (see the \(BuiltInCheck.unreadable.rawValue) findings)."
      )
      return 2
    }
    return total.count(atLeast: failOn) > 0 ? 1 : 0
  }

  /// The value of `option` (`defaultText` when not given) as one of `T`'s cases, or a usage error
  /// that names them.
  private static func parse<T: RawRepresentable & CaseIterable>(
    _ option: Option, default defaultText: String, as type: T.Type, _ invocation: Invocation
  ) throws -> T where T.RawValue == String {
    let text = invocation.value(option) ?? defaultText
    if let value = T(rawValue: text.lowercased()) { return value }
    let names = T.allCases.map(\.rawValue)
    var message = "'\(text)' is not a valid value for '--\(option.long)'; use one of \(names.joined(separator: ", "))."
    if let near = Suggestion.nearest(to: text.lowercased(), in: names) { message += " Did you mean '\(near)'?" }
    throw invocation.usageError(message)
  }
}
