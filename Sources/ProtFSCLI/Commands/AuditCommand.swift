import Foundation
import ProtFS
import ProtFSAppBundle
import ProtFSAudit
import ProtFSSystem

/// `protfs audit [PATH...]`: checks containers against policies, for people and for CI.
package enum AuditCommand {
  package static let command = Command(
    name: "audit",
    abstract: "Check containers against protection-class policies (for CI).",
    discussion: """
      Walks each container (PATH may be a container directory or a whole device; default: the
      current device) and checks every item's effective protection class against the policies
      (default: the built-in Policies/default.policy), plus built-in checks: corrupt classes, items
      still locked out although the device's lock state makes their class available, protected
      files readable by others, symlinks leaving the container or looping, orphan
      background-download temp files, names that are not UTF-8, and items with no class of their
      own; on a sealed device, files without a key record holding plaintext (PFS018) and key
      records that do not match their file or class (PFS019). The policy format and the check ids
      are described in Policies/README.md.

      --policy takes a path, or the name of a policy installed with protfs (strict,
      background-downloads, default), which is read from share/protfs beside the binary's bin
      directory (/usr/share/protfs for /usr/bin/protfs).

      Every rule carries a security severity, a precision, its CWE, OWASP MASVS control and MASTG
      test (docs/audit-rules.md): in SARIF as security-severity, precision and tags, so that code
      scanning ranks alerts Critical to Low; in JSON, JUnit and text too.

      --format sarif writes SARIF 2.1.0 for code scanning: every finding is at line 1 of its item,
      and locations are relative to the audited directory, or with --sarif-root DIR to DIR (a
      repository checkout that holds the audited tree), so that alerts point at the repository's
      files. --format junit writes a test suite per container: a failing test case per finding at
      or above --fail-on, a passing one per rule with nothing to fail (findings below --fail-on
      go in its output), so that the dashboard is red exactly when the exit status is 1.

      --app APP (an .ipa or an .app, as `protfs inspect` reads it) checks the app's container
      (on the device, unless PATHs are given) against what the app declares: its default class
      (PFS007, as --entitlements), a Downloads directory of class none when a background mode
      downloads (PFS016: fetch, processing, remote-notification), and background-task
      declarations that agree (PFS017).

      Exit status: 0 when no finding is at or above --fail-on, 1 when one is, 2 when the audit
      could not run or could not read the whole tree.
      """,
    arguments: [paths],
    options: [bundle, app, policy, entitlements, format, output, failOn, sarifRoot],
    run: run
  )

  /// `[<path> ...]`.
  package static let paths = Argument(
    name: "path", help: "A container or device directory (default: the current device).", arity: .zeroOrMore)
  /// `--bundle BUNDLE-ID`: the app's container on the device, instead of PATHs.
  package static let bundle = Option.value(
    "bundle", "bundle-id",
    help: "Audit this app's container on the device (instead of PATHs).\(CommonOptions.leadingBundle)")
  /// `--policy FILE`, repeatable.
  package static let policy = Option.value(
    "policy", "file",
    help: "A policy file or an installed policy's name; repeat to apply several (default: the built-in default).",
    repeatable: true, choices: ["strict", "background-downloads", "default"])
  /// `--entitlements FILE`.
  package static let entitlements = Option.value(
    "entitlements", "file", help: "Compare each container's default class with this entitlements plist.")
  /// `--app APP`.
  package static let app = Option.value(
    "app", "app", help: "Check the app's container against what this .ipa or .app declares.")
  /// `--format FORMAT`.
  package static let format = Option.value(
    "format", "format", help: "text, json, sarif or junit (default: text).",
    choices: AuditFormat.allCases.map(\.rawValue))
  /// `--output FILE`, `-o`.
  package static let output = Option.value(
    "output", short: "o", "file", help: "Write the report to this file instead of standard output.")
  /// `--fail-on LEVEL`.
  package static let failOn = Option.value(
    "fail-on", "level", help: "Exit 1 for findings at this level or above: error, warning or note (default: error).",
    choices: AuditLevel.allCases.reversed().map(\.rawValue))
  /// `--sarif-root DIR`.
  package static let sarifRoot = Option.value(
    "sarif-root", "dir",
    help: "SARIF locations relative to this directory: the repository checkout that holds the audited tree.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let format = try parse(Self.format, default: "text", as: AuditFormat.self, invocation)
    let failOn = try parse(Self.failOn, default: "error", as: AuditLevel.self, invocation)
    let sarifRoot = invocation.value(Self.sarifRoot)
    if sarifRoot != nil, format != .sarif {
      throw invocation.usageError(
        "'--sarif-root' applies to '--format sarif' only; add '--format sarif' or leave it out.")
    }
    // Whatever stops the audit (an app or a policy that cannot be read, a missing container), CI
    // must tell it apart from findings: exit status 2.
    let (app, bundleID) = try appAndBundleID(invocation)
    let audit: PreparedAudit
    do {
      audit = try prepare(invocation, bundleID: bundleID, app: app)
    } catch {
      throw ExitStatus(code: 2, message: invocation.describe(error))
    }
    var options = AuditReportOptions(failOn: failOn)
    if let sarifRoot {
      // Checked before the report is opened, so that a bad root leaves no half-written file.
      do {
        options.sarifRoot = try SARIFRoot(sarifRoot, containing: audit.target)
      } catch {
        throw invocation.usageError(invocation.describe(error))
      }
    }
    do {
      return try run(audit, invocation, format: format, options: options)
    } catch {
      throw ExitStatus(code: 2, message: invocation.describe(error))
    }
  }

  /// The app `--app` names (read, or exit status 2) and the container to audit: `--bundle`'s,
  /// else, without PATHs, the app's; a usage error for options that do not go together.
  private static func appAndBundleID(_ invocation: Invocation) throws -> (AppPackage?, BundleID?) {
    var bundleID = try invocation.value(Self.bundle).map(invocation.bundleID)
    let paths = invocation.arguments(Self.paths)
    if bundleID != nil && !paths.isEmpty {
      throw invocation.usageError("Give either --bundle or PATHs to audit, not both.")
    }
    if invocation.value(Self.app) != nil, invocation.value(Self.entitlements) != nil {
      throw invocation.usageError("Give either --app or --entitlements, not both: the app's entitlements are read.")
    }
    let app: AppPackage?
    do {
      app = try invocation.value(Self.app).map(AppPackage.read)
    } catch {
      throw ExitStatus(code: 2, message: invocation.describe(error))
    }
    if let app {
      if let bundleID, bundleID != app.bundleID {
        throw invocation.usageError(
          "The bundle id \(bundleID) is not the app's: '\(app.path)' is \(app.bundleID); give the app's, or leave --bundle out."
        )
      }
      // Without PATHs, the app's own container on the device.
      if paths.isEmpty { bundleID = app.bundleID }
    }
    return (app, bundleID)
  }

  /// What an audit runs on, read from the command line: the configuration and the target.
  private struct PreparedAudit {
    var configuration: AuditConfiguration
    var target: AuditTarget
  }

  /// Reads what to audit: `bundleID`'s container, else the PATHs, else the device.
  private static func prepare(_ invocation: Invocation, bundleID: BundleID?, app: AppPackage?) throws(ProtFSError)
    -> PreparedAudit
  {
    let policies = try Self.policies(invocation)
    var entitlementsDefault = app?.containerDefaultClass
    if let path = invocation.value(Self.entitlements) {
      entitlementsDefault = try Entitlements(contentsOf: path).defaultDataProtection
      if entitlementsDefault == nil {
        Console.err("note: '\(path)' does not set \(Entitlements.defaultDataProtectionKey); no default to compare.")
      }
    }
    let target = try Self.target(invocation, bundleID: bundleID)
    if let app, !target.units.contains(where: { $0.name == app.bundleID.rawValue && $0.isContainer }) {
      Console.err(
        "note: no container audited is \(app.bundleID)'s; only the default class of each was compared with '\(app.path)'."
      )
    }
    // PROTFS_AUDIT_THREADS tunes the walk for benchmarks; 2 threads suit the 2-core machines it was measured on.
    let threads = invocation.environment["PROTFS_AUDIT_THREADS"].flatMap(Int.init) ?? 2
    let configuration = AuditConfiguration(
      policies: policies, entitlementsDefault: entitlementsDefault,
      // The same hook the cache commands use: wiring the task store there wires it here too.
      downloadTasks: { device in DownloadTasks.directory(for: device) }, threads: min(max(threads, 1), 64),
      app: app.map(auditedApp))
    try configuration.validate()
    return PreparedAudit(configuration: configuration, target: target)
  }

  /// The policies `--policy` names (files, or installed policies' names), their warnings printed;
  /// the built-in default without one.
  private static func policies(_ invocation: Invocation) throws(ProtFSError) -> [Policy] {
    var policies: [Policy] = []
    let installed = InstalledPolicies(
      executable: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "/usr/bin/protfs")
    for argument in invocation.values(Self.policy) {
      let path = installed.path(for: argument, exists: { FileManager.default.fileExists(atPath: $0) })
      let policy = try Policy(contentsOf: path)
      for warning in policy.warnings { Console.err(warning.description) }
      policies.append(policy)
    }
    return policies.isEmpty ? [Policy.builtInDefault] : policies
  }

  /// The tree to audit: `bundleID`'s container, else the PATHs, else the whole device.
  private static func target(_ invocation: Invocation, bundleID: BundleID?) throws(ProtFSError) -> AuditTarget {
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
    return try AuditTarget.resolve(paths)
  }

  /// What the audit checks of `app`: its downloading background modes and its task declarations' problems.
  private static func auditedApp(_ app: AppPackage) -> AuditedApp {
    AuditedApp(
      path: app.path, bundleID: app.bundleID.rawValue,
      downloadingModes: AppImplication.downloading(app.backgroundModes),
      taskDeclarationProblems: app.implications.filter {
        [.taskIdentifiersMissing, .taskModeMissing].contains($0.kind) && $0.level == .warning
      }
      .map(\.message))
  }

  private static func run(
    _ audit: PreparedAudit, _ invocation: Invocation, format: AuditFormat, options: AuditReportOptions
  ) throws(ProtFSError) -> Int32 {
    let fd: Int32
    let outputName: String
    if let path = invocation.value(Self.output) {
      fd = try Kernel.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644).orThrow(
        "write the report to", path: path)
      outputName = path
    } else {
      fflush(nil)
      fd = STDOUT_FILENO
      outputName = "standard output"
    }
    defer { if fd != STDOUT_FILENO { closeDescriptor(fd) } }

    let output = AuditOutput(fileDescriptor: fd, description: outputName)
    let total = try Auditor(audit.configuration).run(audit.target, reporter: format.reporter(output, options: options))
    if let error = output.writeError { throw error }
    if total.incomplete {
      Console.err(
        "Error: the audit is incomplete: part of the tree could not be read (see the \(BuiltInCheck.unreadable.rawValue) findings)."
      )
      return 2
    }
    return total.count(atLeast: options.failOn) > 0 ? 1 : 0
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
