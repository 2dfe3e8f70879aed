import Foundation
import ProtFS
import ProtFSAudit
import ProtFSSystem

/// A temporary directory removed when the value goes away (tests run in parallel: one each).
public final class AuditScratch: @unchecked Sendable {
  /// Its absolute path.
  public let path: String

  /// Creates a fresh directory under `$TMPDIR` (the shared test helper's mkdtemp).
  public init() {
    do {
      path = try TestDevice.makeTemporaryDirectory(prefix: "protfs-audit-test")
    } catch {
      preconditionFailure("\(error)")
    }
  }

  deinit {
    // Unlike TestDevice.removeTree, which works on full paths, chmod and rm walk with fts and so also
    // remove the trees deeper than PATH_MAX that the audit tests build.
    for (program, arguments) in [("/bin/chmod", ["-R", "u+rwx", path]), ("/bin/rm", ["-rf", path])] {
      let process = TestProcess()
      process.executableURL = URL(fileURLWithPath: program)
      process.arguments = arguments
      guard (try? process.start()) != nil else { continue }
      process.waitUntilExit()
    }
  }

  /// A device inside the scratch directory, initialised, with one container per bundle id.
  public func device(containers: [String] = ["com.example.app"]) throws -> Device {
    let device = Device(root: path + "/device")
    try device.initialize()
    for id in containers { try device.createContainer(try BundleID(id)) }
    return device
  }
}

extension Device {
  /// Writes a file inside container `bundleID` at `relative`, with `protectionClass` as its own class
  /// (none when nil) and `mode`; parent directories must exist.
  public func writeFile(
    _ bundleID: String, _ relative: String, class protectionClass: ProtectionClass?,
    mode: Int = 0o600, contents: String = "data"
  ) throws {
    let path = containerPath(bundleID, relative)
    guard FileManager.default.createFile(atPath: path, contents: Data(contents.utf8)) else {
      throw ProtFSError(.io, "Cannot create '\(path)'.")
    }
    chmod(path, mode_t(mode))
    if let protectionClass { try setAttribute(path, AttributeName.protectionClass, protectionClass.rawValue) }
  }

  /// Makes a directory inside a container, with an own class when given.
  public func makeDirectory(_ bundleID: String, _ relative: String, class protectionClass: ProtectionClass?) throws {
    let path = containerPath(bundleID, relative)
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    if let protectionClass { try setAttribute(path, AttributeName.protectionClass, protectionClass.rawValue) }
  }

  /// The absolute path of `relative` inside the container of `bundleID`.
  public func containerPath(_ bundleID: String, _ relative: String = "") -> String {
    relative.isEmpty ? "\(root)/Containers/\(bundleID)" : "\(root)/Containers/\(bundleID)/\(relative)"
  }

  /// Sets a raw extended attribute on `path` without following a symlink.
  public func setAttribute(_ path: String, _ name: String, _ value: String) throws {
    let url = URL(fileURLWithPath: path)
    let parent = try DirectoryHandle(path: url.deletingLastPathComponent().path)
    try parent.setAttribute(name, to: Array(value.utf8), of: url.lastPathComponent)
  }
}

/// Keeps every finding in memory, for assertions.
public final class CollectingReporter: AuditReporter {
  /// The findings, in the order they arrived.
  public private(set) var findings: [AuditFinding] = []
  /// The summary passed to `finish`.
  public private(set) var summary: AuditSummary?
  /// The rules passed to `begin`.
  public private(set) var rules: [AuditRuleDescription] = []
  /// The containers announced.
  public private(set) var containers: [String] = []

  /// Creates an empty collector.
  public init() {}
  /// Records the rules.
  public func begin(target: AuditTarget, rules: [AuditRuleDescription]) { self.rules = rules }
  /// Records the container.
  public func beginContainer(_ unit: AuditTarget.Unit) { containers.append(unit.name) }
  /// Records the finding.
  public func report(_ finding: AuditFinding) { findings.append(finding) }
  /// Records the summary.
  public func finish(_ summary: AuditSummary) { self.summary = summary }

  /// The findings of rule `id`, as `path` strings relative to the container, sorted.
  public func paths(_ id: String) -> [String] { findings.filter { $0.ruleID == id }.map(\.containerPath).sorted() }

  /// The findings other than "no class of its own" notes, as `id path` strings, sorted.
  public var significant: [String] {
    findings.filter { $0.ruleID != BuiltInCheck.noOwnClass.rawValue }.map { "\($0.ruleID) \($0.containerPath)" }
      .sorted()
  }
}

/// Runs an audit of `path` with `configuration` and returns what it reported.
public func runAudit(
  _ path: String, _ configuration: AuditConfiguration = AuditConfiguration(policies: [.builtInDefault])
)
  throws -> CollectingReporter
{
  let reporter = CollectingReporter()
  _ = try Auditor(configuration).run(AuditTarget.resolve(path), reporter: reporter)
  return reporter
}

/// Where the repository and its neighbours are.
public enum RepositoryLayout {
  /// The package root: the nearest ancestor of this file that holds Package.swift.
  public static var packageRoot: String {
    var url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while url.path != "/" {
      if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
      url.deleteLastPathComponent()
    }
    fatalError("No Package.swift above \(#filePath).")
  }

  /// Python lines that load `scripts/make-backup.py` as the module `make`, so that a test's script
  /// writes a backup's records with its helpers (`make.archive`) rather than a second way.
  public static var makeBackupModule: String {
    """
    import importlib.util
    spec = importlib.util.spec_from_file_location('make_backup', '\(packageRoot)/scripts/make-backup.py')
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    """
  }

  /// The built `protfs` binary (the shared runner's lookup: `$PROTFS_BINARY`, else next to the tests).
  public static var protfsBinary: String { Protfs.binary }
}
