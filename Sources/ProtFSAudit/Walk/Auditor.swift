import Foundation
import ProtFS
import ProtFSSystem

/// Which items a lock may legitimately have locked out right now (their permission bits removed and
/// the original mode saved in `user.protfs.saved-mode`). Any other item that is locked out is a
/// leftover of an interrupted unlock: the audit reports it.
///
/// The lock simulator's own state can conform to this protocol; `AuditLockState` is the stand-in.
public protocol LockExpectation: Sendable {
  /// Whether an item of `kind` (a file or a directory) and class `protectionClass` may be locked out now.
  func mayBeLockedOut(_ kind: FileKind, _ protectionClass: ProtectionClass) -> Bool
}

/// A lock state given by hand, as far as the audit is concerned (docs/semantics.md §3); audits of a protfs device
/// read its real state instead (`ProtectionState`).
public enum AuditLockState: String, Sendable, LockExpectation {
  /// Unlocked (or no passcode): nothing may be locked out.
  case unlocked
  /// Locked: complete and unless-open files cannot be opened, nothing can be created in complete
  /// directories, and when-inactive items may have expired.
  case locked
  /// Before the first unlock: everything but class none is unavailable.
  case beforeFirstUnlock
  /// Not recorded (a tree outside any device): treated as unlocked, so every saved mode is reported.
  case unknown

  /// the table of docs/semantics.md §3, from the point of view of what a lock removes.
  public func mayBeLockedOut(_ kind: FileKind, _ protectionClass: ProtectionClass) -> Bool {
    switch self {
    case .unlocked, .unknown:
      return false
    case .beforeFirstUnlock:
      return protectionClass != .none
    case .locked:
      switch protectionClass {
      case .none, .completeUntilFirstUserAuthentication: return false
      case .complete, .completeWhenUserInactive: return true
      case .completeUnlessOpen: return kind == .file
      }
    }
  }
}

/// How to audit: which policies, what the device state is, who owns temp downloads.
public struct AuditConfiguration: Sendable {
  /// The policies; each is evaluated on its own (within one, the last matching rule wins).
  public var policies: [Policy]
  /// The default class the app's entitlements ask for, to compare with each container's default.
  public var entitlementsDefault: ProtectionClass?
  /// Which items may be locked out; nil (the default) reads each container's device lock state.
  public var lockState: (any LockExpectation)?
  /// The task store of a device, which says which download tasks own which temp files; without one
  /// (and outside any device) every `CFNetworkDownload_*.tmp` is an orphan.
  public var downloadTasks: @Sendable (Device) -> any DownloadTaskDirectory
  /// Worker threads that split the directories (2 on the 2-core CI machines).
  public var threads: Int
  /// The app whose declarations its container is checked against (`audit --app`), if any.
  public var app: AuditedApp?

  /// Creates a configuration.
  public init(
    policies: [Policy], entitlementsDefault: ProtectionClass? = nil,
    lockState: (any LockExpectation)? = nil,
    downloadTasks: @escaping @Sendable (Device) -> any DownloadTaskDirectory = { _ in NoDownloadTasks() },
    threads: Int = 2, app: AuditedApp? = nil
  ) {
    self.app = app
    self.policies = policies
    self.entitlementsDefault = entitlementsDefault
    self.lockState = lockState
    self.downloadTasks = downloadTasks
    self.threads = max(1, threads)
  }

  /// Every rule this audit checks, so every rule reports can mention: the built-in checks (the
  /// entitlements' default only when one is given, the app's only with an app), then each policy's
  /// rules.
  public var rules: [AuditRuleDescription] { rules(sealed: false) }

  /// ``rules``, and with `sealed` (a container of the target is on a sealed device) the checks of
  /// sealed files.
  public func rules(sealed: Bool) -> [AuditRuleDescription] {
    let checks = BuiltInCheck.allCases.filter { check in
      switch check {
      case .defaultClassMismatch: entitlementsDefault != nil
      case .appDownloadsNotClassNone, .appTaskDeclaration: app != nil
      case .plaintextInSealedContainer, .sealedKeyMismatch: sealed
      default: true
      }
    }
    return checks.map(\.description) + policies.flatMap { $0.rules.map(\.description) }
  }

  /// Throws when two policies use the same rule id, which would make findings ambiguous.
  public func validate() throws(ProtFSError) {
    var seen: [String: PolicyRule] = [:]
    for rule in policies.flatMap(\.rules) {
      if BuiltInCheck(rawValue: rule.id) != nil {
        throw ProtFSError(
          .malformed, "\(rule.source):\(rule.line): the rule id \(rule.id) is reserved for a built-in check.",
          path: rule.source, remedy: .advice("choose another id"))
      }
      if let other = seen[rule.id] {
        throw ProtFSError(
          .malformed,
          "\(rule.source):\(rule.line): the rule id \(rule.id) is already used at \(other.source):\(other.line).",
          path: rule.source, remedy: .advice("rule ids must be unique across the policies of one audit"))
      }
      seen[rule.id] = rule
    }
  }
}

extension ProtectionState: LockExpectation {
  /// What the lock simulator itself removes bits from in this state.
  public func mayBeLockedOut(_ kind: FileKind, _ protectionClass: ProtectionClass) -> Bool {
    restricts(kind, protectionClass)
  }
}

/// While a lock transition is half done, any item may be locked out: nothing can be judged.
package struct TransitionInProgress: LockExpectation {
  package func mayBeLockedOut(_ kind: FileKind, _ protectionClass: ProtectionClass) -> Bool { true }
}

/// Receives findings as the audit streams them. Calls are serialised by the auditor.
public protocol AuditReporter: AnyObject {
  /// Called once, before anything else.
  func begin(target: AuditTarget, rules: [AuditRuleDescription])
  /// Called before the findings of each container.
  func beginContainer(_ unit: AuditTarget.Unit)
  /// Called for each finding.
  func report(_ finding: AuditFinding)
  /// Called once, at the end.
  func finish(_ summary: AuditSummary)
}

/// What an audit saw.
public struct AuditSummary: Sendable, Equatable {
  /// Containers audited.
  public var containers = 0
  /// Items looked at (files, directories, links), container roots excluded.
  public var items = 0
  /// Findings by level.
  public var findings: [AuditLevel: Int] = [:]
  /// Whether part of the tree could not be read (the audit is incomplete: exit status 2).
  public var incomplete = false

  /// Creates an empty summary.
  public init() {}

  /// The number of findings at `level` or above.
  public func count(atLeast level: AuditLevel) -> Int {
    findings.filter { $0.key >= level }.values.reduce(0, +)
  }

  /// Adds another summary's counts to this one.
  public mutating func merge(_ other: AuditSummary) {
    containers += other.containers
    items += other.items
    for (level, count) in other.findings { findings[level, default: 0] += count }
    incomplete = incomplete || other.incomplete
  }
}

/// Checks container trees against policies and the built-in checks, streaming findings to a reporter.
///
/// The tree is never held in memory: worker threads take directories from a shared stack, read each
/// entry's `d_type` and attributes relative to the directory's descriptor (`getxattrat`), and hand
/// findings over in batches.
public struct Auditor: Sendable {
  /// The configuration.
  public var configuration: AuditConfiguration

  /// Creates an auditor.
  public init(_ configuration: AuditConfiguration) { self.configuration = configuration }

  /// Audits `target`, streaming findings into `reporter`; returns the summary it also passed to `finish`.
  public func run(_ target: AuditTarget, reporter: some AuditReporter) throws(ProtFSError) -> AuditSummary {
    try configuration.validate()
    let sink = FindingSink(reporter)
    let matcher = RuleMatcher(configuration.policies)
    reporter.begin(target: target, rules: configuration.rules(sealed: target.hasSealedDevice))
    var summary = AuditSummary()
    for unit in target.units {
      if unit.isDirectory { summary.containers += 1 }
      reporter.beginContainer(unit)
      summary.merge(ContainerWalk(unit: unit, configuration: configuration, matcher: matcher, sink: sink).run())
    }
    reporter.finish(summary)
    return summary
  }
}

/// Serialises reporter calls from the workers.
///
/// `@unchecked Sendable`: the reporter, which is not thread-safe, is only called while `lock` is
/// held.
package final class FindingSink: @unchecked Sendable {
  private let lock = NSLock()
  private let reporter: any AuditReporter

  package init(_ reporter: any AuditReporter) { self.reporter = reporter }

  package func deliver(_ findings: [AuditFinding]) {
    guard !findings.isEmpty else { return }
    lock.lock()
    defer { lock.unlock() }
    for finding in findings { reporter.report(finding) }
  }
}
