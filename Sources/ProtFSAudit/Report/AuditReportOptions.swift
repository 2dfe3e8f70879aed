/// What shapes a machine-readable report besides its findings.
public struct AuditReportOptions: Sendable, Equatable {
  /// The lowest level that fails the audit: JUnit fails the test cases of these findings only, so
  /// that a dashboard is red exactly when the job is (a note fails only under `--fail-on note`,
  /// which makes the job fail for it too).
  public var failOn: AuditLevel
  /// Where SARIF locations are relative to; nil: the audited root (`AUDITROOT`).
  public var sarifRoot: SARIFRoot?

  /// Creates options.
  public init(failOn: AuditLevel = .error, sarifRoot: SARIFRoot? = nil) {
    self.failOn = failOn
    self.sarifRoot = sarifRoot
  }

  /// Whether a finding at `level` fails its JUnit test case.
  public func fails(_ level: AuditLevel) -> Bool { level >= failOn }
}
